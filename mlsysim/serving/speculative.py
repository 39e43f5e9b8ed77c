"""Speculative decoding (Leviathan et al. 2023; Chen et al. 2023).

A draft proposes k tokens, the target verifies them in one pass; with acceptance
rate α each step yields (1 − α^(k+1))/(1 − α) tokens.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InfeasibleError, MlsysimError, check_count, check_positive
from ..roofline import _whole
from ..systems import Hardware
from ..tables import Record
from ..units import fmt
from .step import (ALLREDUCE_BASE_S, ALLREDUCE_STEP_S, DEFAULT_EFFICIENCY, DEFAULT_LAYER_OVERHEAD_S,
                   DEFAULT_MEM_EFFICIENCY, _evaluate, _num, _scalar, _setup, _shape_row, _window)


@dataclass(frozen=True)
class Speculative(Record):
    """Result of :func:`speculative_decode`: time per generated token with a draft model."""

    workload: str
    draft: str
    hardware: str
    k: object
    acceptance_rate: object
    tokens_per_step: object   # expected tokens each verification yields
    draft_s: object           # k draft decode steps
    verify_s: object          # one target pass over k + 1 tokens
    baseline_s: object        # one plain target decode step
    time_per_token_s: object
    footprint_B: object
    capacity_B: float

    @property
    def speedup(self):
        """Plain decode time per token over speculative time per token."""
        return self.baseline_s / self.time_per_token_s

    def rows(self):
        return _shape_row(self.time_per_token_s) or [
            ("target / draft", f"{self.workload} / {self.draft}"), ("hardware", self.hardware),
            ("draft length k", f"{self.k:g}"), ("acceptance rate", f"{self.acceptance_rate:.3g}"),
            ("tokens per verification", f"{self.tokens_per_step:.3g}"),
            ("draft steps", fmt(self.draft_s, "s")), ("verification", fmt(self.verify_s, "s")),
            ("time per token", fmt(self.time_per_token_s, "s")),
            ("plain decode", fmt(self.baseline_s, "s")), ("speed-up", f"{self.speedup:.3g}x")]



def expected_accepted_tokens(k, acceptance_rate):
    """Expected tokens one verification step yields with k drafted tokens and acceptance rate α.

    E = (1 − α^(k+1)) / (1 − α)  (k + 1 when α = 1): the accepted prefix of the draft
    plus the target's own next token (Leviathan, Kalman & Matias 2023, Eq. 1; Chen et
    al. 2023). α is the probability that the target accepts a drafted token,
    assumed independent across positions.

    >>> round(expected_accepted_tokens(4, 0.8), 4), expected_accepted_tokens(3, 1.0)
    (3.3616, 4.0)
    """
    whole = check_count("k", k, minimum=0)
    check_positive("acceptance_rate", acceptance_rate, allow_zero=True)
    a = _num(acceptance_rate)
    if not (0.0 <= a <= 1.0 if type(a) is float else np.all((a >= 0) & (a <= 1))):
        raise MlsysimError(f"acceptance_rate must lie in [0, 1], got {acceptance_rate}")
    k1 = _num(k) + 1.0
    if _scalar(a, k1):
        return k1 if a == 1.0 else (1.0 - a ** k1) / (1.0 - a)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(a == 1.0, k1, (1.0 - a ** k1) / (1.0 - a))
    return out if whole is None else np.where(whole, out, np.nan)


def _extra_logits_s(s, batch, k, rate):
    """Compute seconds of the output head at the k positions of a verification beyond the last
    one (which the prefill pass already counts). By GEMM shape: the head GEMM with batch·(k+1)
    rows less the one with batch rows (no extra tile while both fit one row of tiles); with a
    scalar η: their 2·batch·k·vocab·d_model/tp FLOP at the pass's rate η·P."""
    m = s.m
    from ..kernels import THIN_ROWS, memoised, tile_time
    flat = batch * k * 2.0 * m.vocab * m.d_model / s.tp / rate
    if s.eff is not None:
        return flat
    if _scalar(batch, k) and batch * (k + 1.0) <= THIN_ROWS:   # a GEMV-like pass: at its own rate
        return flat
    hw, n = s.hws[0], m.vocab / s.tp

    def extra():
        return (tile_time(batch * (k + 1.0), n, m.d_model, hw, s.precision, roofline=False)
                - tile_time(batch, n, m.d_model, hw, s.precision, roofline=False))
    plain = not (np.ndim(hw.peak(s.precision)) or np.ndim(hw.memory_bw_Bps))
    if plain and _scalar(batch, k) and type(s.tp) is int:
        return memoised(m, "_verify_head_cache", hw, s.precision, (s.tp, batch, k), extra)
    return np.where(batch * (k + 1.0) <= THIN_ROWS, flat, extra())


def speculative_decode(model, hardware, draft, k=4, acceptance_rate=0.8, context_tokens=2048, batch=1,
                       precision: str = "bf16", tp=1, weight_precision: str | None = None,
                       kv_precision: str | None = None, efficiency=None,
                       mem_efficiency=DEFAULT_MEM_EFFICIENCY, layer_overhead_s=DEFAULT_LAYER_OVERHEAD_S,
                       allreduce_base_s=ALLREDUCE_BASE_S, allreduce_step_s=ALLREDUCE_STEP_S) -> Speculative:
    """Time per generated token when ``draft`` proposes k tokens and ``model`` verifies them.

    One speculative step = k draft decode steps + one target pass over k + 1 tokens
    (a short prefill after ``context_tokens``, with logits at every position). It yields
    E = :func:`expected_accepted_tokens` tokens, so

        time per token = (k·T_draft + T_verify) / E,    speed-up = T_decode / time per token.

    With T_verify ≈ T_decode (memory-bound) and c = T_draft/T_decode this is Leviathan et
    al.'s (1 − α^(k+1)) / ((1 − α)(k·c + 1)). Both models share the same GPUs (same tp)
    and must fit together; the draft's steps are timed at the same context. One device.

    By default (``efficiency=None``) the verification times its GEMMs by shape, as
    :func:`prefill` does: up to :data:`mlsysim.kernels.THIN_ROWS` rows (batch·(k+1)) it runs
    GEMV-like kernels that stream the weights like a decode step; beyond, 128-row output
    tiles, which a few rows fill only in part. The decode steps keep
    :data:`~mlsysim.serving.step.DEFAULT_EFFICIENCY`. A number ``efficiency`` times every
    pass at that fraction of the peak.

    Worked number: Llama-2-70B verified on 4 × H100 after a Llama-2-7B draft, k = 4, α = 0.8:
    3.36 tokens per step; the verification of 5 rows (17.3 ms, memory-bound) costs one plain
    decode step, a 1.92x speed-up.

    >>> s = speculative_decode("llama-2-70b", "h100", draft="llama-2-7b", k=4, acceptance_rate=0.8, tp=4)
    >>> round(s.tokens_per_step, 2), round(s.verify_s * 1e3, 1), round(s.speedup, 2)
    (3.36, 17.3, 1.92)
    >>> round(s.verify_s / s.baseline_s, 2)
    1.0
    >>> round(speculative_decode("llama-2-70b", "h100", draft="llama-2-7b", k=4, acceptance_rate=0.8, tp=4,
    ...                          efficiency=0.70).speedup, 2)
    1.92
    """
    if not isinstance(hardware, (str, Hardware)):
        raise MlsysimError("speculative_decode takes one device")
    args = (hardware, precision, tp, weight_precision, kv_precision, efficiency, mem_efficiency,
            layer_overhead_s, allreduce_base_s, allreduce_step_s)
    st, sd = _setup(model, *args), _setup(draft, *args)
    m = st.m
    e = expected_accepted_tokens(k, acceptance_rate)
    whole = _whole(check_count("k", k, minimum=0), check_count("context_tokens", context_tokens, minimum=0),
                   check_count("batch", batch))
    kk, c, b = _num(k), _num(context_tokens), _num(batch)
    _window(m, c, kk + 1.0)
    _window(sd.m, c, kk)
    base, _ = _evaluate(st, "decode", b, 1.0, c)
    small, _ = _evaluate(sd, "decode", b, 1.0, c)
    verify, _ = _evaluate(st, "prefill", b, kk + 1.0, c)
    head_s = _extra_logits_s(st, b, kk, verify["peak_flops"])
    verify_s = verify["time_s"] + head_s
    draft_s = kk * small["time_s"]
    per_token = (draft_s + verify_s) / e
    footprint = verify["footprint_B"] + small["footprint_B"]     # both models' weights and caches
    fits = footprint <= base["capacity_B"]
    if np.ndim(fits) == 0 and not fits:
        raise InfeasibleError(f"{m.name} and its draft {sd.m.name} need {fmt(footprint, 'B', 4)} per GPU "
                              f"together with tp={st.tp}, more than the {fmt(base['capacity_B'], 'B', 4)} of "
                              f"{st.hws[0].name}")
    if whole is not None:
        fits = fits & whole
    if np.ndim(fits):
        per_token = np.where(fits, per_token, np.nan)
    return Speculative(workload=m.name, draft=sd.m.name, hardware=st.hws[0].name, k=kk, acceptance_rate=_num(
        acceptance_rate), tokens_per_step=e, draft_s=draft_s, verify_s=verify_s, baseline_s=base["time_s"],
        time_per_token_s=per_token, footprint_B=footprint, capacity_B=base["capacity_B"])
