"""Which device and tensor-parallel degree serve a model within a TTFT and an ITL target."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InfeasibleError, check_integer, check_positive
from ..registry import hardware as _hardware
from ..systems import Hardware
from ..tables import Record
from ..units import bytes_per, fmt
from ..workloads import Transformer
from .capacity import max_batch
from .phases import decode, prefill
from .step import _transformer, _valid_tp


@dataclass(frozen=True)
class ServingPlan(Record):
    """Result of :func:`serving_plan`: one row per (device, tp) candidate."""

    workload: str
    ttft_target_s: float
    itl_target_s: float
    prompt_tokens: float
    output_tokens: float
    candidates: tuple          # dicts: device, tp, fits, ttft_s, itl_s, max_batch, tokens_per_s, ...

    @property
    def best(self) -> dict | None:
        """The candidate meeting both targets with the most generated tokens/s per GPU (None if none)."""
        ok = [c for c in self.candidates if c["meets"]]
        return max(ok, key=lambda c: c["tokens_per_s_per_gpu"]) if ok else None

    def table_rows(self) -> list[dict]:
        """Rows for :func:`mlsysim.table`, formatted (b: batch; tokens/s: generated, whole batch)."""
        out = []
        for c in self.candidates:
            if not c["fits"]:
                out.append({"device": c["device"], "tp": c["tp"], "TTFT": "does not fit", "ITL, b=1": "",
                            "largest b": "", "tokens/s": "", "per GPU": "", "meets": "no"})
                continue
            out.append({"device": c["device"], "tp": c["tp"], "TTFT": fmt(c["ttft_s"], "s"),
                        "ITL, b=1": fmt(c["itl_s"], "s"), "largest b": int(c["max_batch"]),
                        "tokens/s": f"{c['tokens_per_s']:,.0f}", "per GPU": f"{c['tokens_per_s_per_gpu']:,.0f}",
                        "meets": "yes" if c["meets"] else "no"})
        return out

    def rows(self):
        b = self.best
        return [("workload", self.workload), ("targets", f"TTFT <= {fmt(self.ttft_target_s, 's')}, "
                                                         f"ITL <= {fmt(self.itl_target_s, 's')}"),
                ("requests", f"{self.prompt_tokens:,.0f} in, {self.output_tokens:,.0f} out"),
                ("candidates", str(len(self.candidates))),
                ("best", "none meets both targets" if b is None else
                 f"{b['device']} x {b['tp']}, batch {b['max_batch']:.0f}, "
                 f"{b['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU")]


def _fits_weights(m: Transformer, hw: Hardware, tp: int, kw: dict) -> bool:
    return m.params * bytes_per(kw["weight_precision"] or kw["precision"]) / tp < hw.memory_B


def serving_plan(model, hardware, ttft_s=0.5, itl_s=0.03, prompt_tokens=4096, output_tokens=512,
                 tp=(1, 2, 4, 8), precision: str = "bf16", weight_precision: str | None = None,
                 kv_precision: str | None = None, max_batch_tried: int = 4096) -> ServingPlan:
    """Which device and tensor-parallel degree serve ``model`` within a TTFT and an ITL target?

    For every device in ``hardware`` and every tp in ``tp`` that splits the heads and fits:
    TTFT = :func:`prefill` of one ``prompt_tokens`` request (no queueing); ITL is the
    :func:`decode` step at the end of a response (``prompt_tokens + output_tokens``
    cached, the slowest step); the largest batch is the largest one whose ITL meets
    ``itl_s`` and whose caches fit; throughput = batch / ITL. A candidate meets the
    targets when TTFT ≤ ``ttft_s`` and at least one sequence meets ``itl_s``;
    ``best`` maximises generated tokens/s per GPU. Default efficiencies throughout: the
    prefill's GEMMs timed by shape, the decode steps at :data:`~mlsysim.serving.step.DEFAULT_EFFICIENCY`.

    >>> plan = serving_plan("llama-3-70b", ["h100", "h200"], ttft_s=0.5, itl_s=0.03)
    >>> (plan.best["device"], plan.best["tp"]), round(plan.best["max_batch"])
    (('H200-SXM', 8), 340)
    """
    m = _transformer(model)
    check_positive("ttft_s", ttft_s)
    check_positive("itl_s", itl_s)
    check_integer("prompt_tokens", prompt_tokens)
    check_integer("output_tokens", output_tokens)
    check_integer("max_batch_tried", max_batch_tried)
    devices = [hardware] if isinstance(hardware, (str, Hardware)) else list(hardware)
    tps = list(tp) if isinstance(tp, (list, tuple, range, np.ndarray)) else [tp]
    for t in tps:
        check_integer("tp", t)
    context = float(prompt_tokens + output_tokens)
    if context > m.max_context:
        raise InfeasibleError(f"{m.name} has a context window of {m.max_context:,} tokens; "
                              f"prompt + output reaches {context:,.0f}")
    rows = []
    for dev in devices:
        hw = _hardware(dev)
        for t in tps:
            row = {"device": hw.name, "tp": int(t), "fits": False, "ttft_s": math.nan, "itl_s": math.nan,
                   "max_batch": 0.0, "tokens_per_s": 0.0, "tokens_per_s_per_gpu": 0.0, "meets": False}
            rows.append(row)
            if not _valid_tp(m, t) or (t > 1 and hw.scaleup_Bps is None):
                continue
            kw = dict(precision=precision, tp=int(t), weight_precision=weight_precision, kv_precision=kv_precision)
            fit = max_batch(m, hw, context_tokens=context, **kw) if _fits_weights(m, hw, int(t), kw) else 0
            if fit < 1:
                continue
            batches = np.arange(1.0, float(min(fit, max_batch_tried)) + 1.0)
            steps = decode(m, hw, context_tokens=context, batch=batches, **kw)
            first = prefill(m, hw, prompt_tokens=prompt_tokens, **kw)
            good = np.asarray(steps.feasible) & (np.nan_to_num(steps.time_s, nan=np.inf) <= itl_s)
            row.update(fits=True, ttft_s=first.time_s, itl_s=float(steps.time_s[0]))
            if good.any():
                i = int(np.flatnonzero(good)[-1])
                row.update(max_batch=batches[i], tokens_per_s=float(steps.tokens_per_s[i]),
                           tokens_per_s_per_gpu=float(steps.tokens_per_s[i]) / t)
            row["meets"] = bool(good.any() and first.time_s <= ttft_s)
    return ServingPlan(workload=m.name, ttft_target_s=float(ttft_s), itl_target_s=float(itl_s),
                       prompt_tokens=float(prompt_tokens), output_tokens=float(output_tokens),
                       candidates=tuple(rows))
