"""A whole request: a prefill, then output − 1 decode steps, summed in closed form."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InfeasibleError, MlsysimError, check_count
from ..roofline import COUNTS_REASON, _whole
from ..tables import Record
from ..units import fmt
from .step import (ALLREDUCE_BASE_S, ALLREDUCE_STEP_S, DEFAULT_EFFICIENCY, DEFAULT_LAYER_OVERHEAD_S,
                   DEFAULT_MEM_EFFICIENCY, _achieved, _evaluate, _masked, _num, _scalar, _setup, _shape_row)


@dataclass(frozen=True)
class Generation(Record):
    """Result of :func:`generate`: one batch of requests from prompt to last token."""

    workload: str
    hardware: object
    tp: object
    batch: object
    prompt_tokens: object
    output_tokens: object
    ttft_s: object
    decode_s: object          # all decode steps
    itl_s: object             # mean decode step
    e2e_s: object
    footprint_B: object       # per GPU, at the last token
    capacity_B: object
    feasible: object
    reason: str = ""
    prefill_efficiency: object = 1.0   # the prefill's fraction of dense peak: set, or achieved by GEMM shapes
    gemm_shapes: bool = False          # True: the prefill's GEMMs timed from their shapes (the default)

    @property
    def tokens_per_s(self):
        """Generated tokens per second over the whole batch: batch × output / end-to-end time."""
        return self.batch * self.output_tokens / self.e2e_s

    def rows(self):
        return _shape_row(self.e2e_s) or [
            ("workload", self.workload), ("hardware", f"{self.hardware} x {self.tp:g}"),
            ("batch", f"{self.batch:g}"),
            ("tokens", f"{self.prompt_tokens:g} in, {self.output_tokens:g} out"),
            ("TTFT", fmt(self.ttft_s, "s")),
            ("prefill compute rate", f"{self.prefill_efficiency:.0%} of peak"
                                     + (" (GEMM shapes)" if self.gemm_shapes else "")),
            ("mean ITL", fmt(self.itl_s, "s")),
            ("end to end", fmt(self.e2e_s, "s")), ("generated tokens/s", f"{self.tokens_per_s:,.4g}"),
            ("memory per GPU", f"{fmt(self.footprint_B, 'B')} of {fmt(self.capacity_B, 'B')}")]



def _sum_max_linear(h0, s, n):
    """Σ_{j=0}^{n−1} max(h0 + s·j, 0) (n ≥ 0 whole; floats or arrays)."""
    if _scalar(h0, s, n):
        if s > 0:
            start, stop = min(max(math.floor(-h0 / s) + 1.0, 0.0), n), n
        elif s < 0:
            start, stop = 0.0, min(max(math.ceil(-h0 / s), 0.0), n)
        else:
            start, stop = 0.0, (n if h0 > 0 else 0.0)
        count = max(stop - start, 0.0)
        return count * h0 + s * count * (start + stop - 1.0) / 2.0
    h0, s, n = np.asarray(h0, float), np.asarray(s, float), np.asarray(n, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.where(s != 0, -h0 / s, np.inf)            # h(j) = 0 at j = root
    # s > 0: terms j ≥ ⌊root⌋ + 1 are positive; s < 0: terms j < ⌈root⌉; s = 0: all or none
    start = np.where(s > 0, np.clip(np.floor(root) + 1, 0, n), 0.0)
    stop = np.where(s < 0, np.clip(np.ceil(root), 0, n), n)
    stop = np.where((s == 0) & (h0 <= 0), 0.0, stop)
    count = np.maximum(stop - start, 0.0)
    return count * h0 + s * count * (start + stop - 1) / 2.0


def generate(model, hardware, prompt_tokens=2048, output_tokens=256, batch=1, precision: str = "bf16", tp=1,
             weight_precision: str | None = None, kv_precision: str | None = None,
             efficiency=None, mem_efficiency=DEFAULT_MEM_EFFICIENCY,
             layer_overhead_s=DEFAULT_LAYER_OVERHEAD_S, allreduce_base_s=ALLREDUCE_BASE_S,
             allreduce_step_s=ALLREDUCE_STEP_S) -> Generation:
    """A batch of requests from prompt to last token: a prefill, then output − 1 decode steps.

    e2e = TTFT + Σ_{c=p}^{p+n−2} ITL(c): the prefill of p prompt tokens yields the first
    token, and decode step j runs after p + j cached tokens. Compute and memory time
    of a step are affine in c, so the sum of their maximum is evaluated in closed form
    (exact, vectorised). Memory is checked at the last token. Arguments as in
    :func:`prefill`, with ``output_tokens`` ≥ 2 (one token is a prefill). By default
    (``efficiency=None``) the prefill times its GEMMs by shape and the decode steps keep
    :data:`~mlsysim.serving.step.DEFAULT_EFFICIENCY`; ``prefill_efficiency`` is the
    prefill's achieved fraction of the dense peak (or the ``efficiency`` given).

    Worked number: a 128-token prompt's GEMMs reach 29 % of an H100's peak, so the TTFT is
    7.06 ms (6.13 ms at the scalar η = 0.70); 19 decode steps of 6.06 ms follow.

    >>> g = generate("llama-2-7b", "h100", prompt_tokens=128, output_tokens=20)
    >>> round(g.ttft_s * 1e3, 2), round(g.itl_s * 1e3, 2), round(g.e2e_s * 1e3), round(g.prefill_efficiency, 2)
    (7.06, 6.06, 122, 0.29)
    >>> round(generate("llama-2-7b", "h100", prompt_tokens=128, output_tokens=20, efficiency=0.70).ttft_s * 1e3, 2)
    6.13
    """
    s = _setup(model, hardware, precision, tp, weight_precision, kv_precision, efficiency, mem_efficiency,
               layer_overhead_s, allreduce_base_s, allreduce_step_s)
    m = s.m
    whole = _whole(check_count("output_tokens", output_tokens), check_count("prompt_tokens", prompt_tokens),
                   check_count("batch", batch))
    if (output_tokens < 2) if type(output_tokens) in (int, float) else np.any(np.asarray(output_tokens) < 2):
        raise MlsysimError("output_tokens must be >= 2 (a single output token is a prefill: use ms.prefill)")
    p, n, batch = _num(prompt_tokens), _num(output_tokens), _num(batch)
    longest = p + n
    if (longest if type(longest) is float else np.max(longest)) > m.max_context:
        raise InfeasibleError(f"{m.name} has a context window of {m.max_context:,} tokens; "
                              f"prompt + output reaches {np.max(longest):,.0f}")
    first, fit0 = _evaluate(s, "prefill", batch, p, 0.0)
    d0, _ = _evaluate(s, "decode", batch, 1.0, p)
    d1, _ = _evaluate(s, "decode", batch, 1.0, p + 1.0)
    steps = n - 1.0
    gap0 = d0["compute_s"] - d0["memory_s"]
    roof = (steps * d0["memory_s"] + (d1["memory_s"] - d0["memory_s"]) * steps * (steps - 1.0) / 2.0
            + _sum_max_linear(gap0, (d1["compute_s"] - d1["memory_s"]) - gap0, steps))
    decode_s = roof + steps * (d0["comm_s"] + d0["overhead_s"])
    footprint = d0["footprint_B"] + (d1["footprint_B"] - d0["footprint_B"]) * (steps - 1.0)
    values = dict(ttft_s=first["time_s"], decode_s=decode_s, itl_s=decode_s / steps, e2e_s=first["time_s"] + decode_s,
                  footprint_B=footprint, capacity_B=d0["capacity_B"],
                  prefill_efficiency=_achieved(s, first["peak_flops"]) if s.eff is None else s.eff)
    fits = (footprint <= d0["capacity_B"]) & fit0

    def fail():
        where, need = (("at the last token", footprint) if footprint > d0["capacity_B"] else
                       ("to prefill the whole batch at once", first["footprint_B"]))
        raise InfeasibleError(f"{m.name}: {batch:g} requests of {p:g} + {n:g} tokens need "
                              f"{fmt(need, 'B', 4)} per GPU {where} with tp={s.tp}, more than "
                              f"the {fmt(s.hws[0].memory_B, 'B', 4)} of {s.hws[0].name}")
    values, feasible, reason = _masked(values, fits, [(s.ok, "tp does not split the heads or is not a whole number"),
                                                      (whole, COUNTS_REASON)], fail)
    if type(values["decode_s"]) is not float:
        values["decode_s"] = np.asarray(values["decode_s"], dtype=float)
    return Generation(workload=m.name, hardware=s.hws[0].name if s.one else tuple(h.name for h in s.hws),
                      tp=s.tp, batch=batch, prompt_tokens=p, output_tokens=n, feasible=feasible, reason=reason,
                      gemm_shapes=s.eff is None, **values)
