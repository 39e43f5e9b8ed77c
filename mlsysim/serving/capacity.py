"""KV-cache bytes and what fits in device memory while serving.

**KV cache** per token: 2·L·n_kv·d_head·bytes (MHA/GQA), L·(r_kv + d_rope)·bytes
for MLA (``Transformer.kv_bytes_per_token``). Under TP each GPU holds
n_kv/tp heads; when n_kv < tp each GPU holds one head (heads are replicated
tp/n_kv times), and MLA's single latent is replicated on every GPU.

**Memory**: weights/tp + KV share + live activations ≤ device memory, the same
footprint as :func:`~mlsysim.roofline.roofline` and :func:`~mlsysim.serving.decode`;
:func:`max_batch`, :func:`max_context` and :func:`min_tp` invert it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InfeasibleError, UnknownNameError, check_count, check_integer
from ..roofline import _whole
from ..registry import hardware as _hardware, model as _model  # _model: max_context doctest
from ..tables import Record
from ..units import fmt
from .step import _cost, _num, _setup, _shape_row, _tp_layout, _transformer, _valid_tp


@dataclass(frozen=True)
class ServingMemory(Record):
    """Result of :func:`serving_memory`: resident bytes per GPU."""

    workload: str
    hardware: str
    tp: object
    batch: object
    context_tokens: object
    weights_B: object
    kv_cache_B: object
    activations_B: object
    total_B: object
    capacity_B: float
    feasible: object

    @property
    def free_B(self):
        return self.capacity_B - self.total_B

    def rows(self):
        return _shape_row(self.total_B) or [
            ("workload", self.workload), ("hardware", f"{self.hardware} (tp {self.tp:g})"),
            ("weights", fmt(self.weights_B, "B")),
            ("KV cache", f"{fmt(self.kv_cache_B, 'B')} ({self.batch:g} x {self.context_tokens:g} tokens)"),
            ("activations", fmt(self.activations_B, "B")), ("total", fmt(self.total_B, "B")),
            ("capacity", fmt(self.capacity_B, "B")), ("fits", str(bool(self.feasible)))]



def kv_cache_bytes(model, context_tokens=8192, batch=1, precision: str = "bf16", tp=1):
    """KV-cache bytes of ``batch`` sequences of ``context_tokens`` tokens (per GPU when ``tp`` > 1).

    bytes = batch · context · (2·L·n_kv·d_head · bytes per element) for MHA/GQA,
    batch · context · L·(r_kv + d_rope) · bytes for MLA (DeepSeek-AI 2024, §2.1.1).
    Under TP each GPU holds max(1/tp, 1/n_kv) of the heads; an MLA latent is replicated.

    >>> kv_cache_bytes("llama-3-8b", context_tokens=8192) / 2**30   # 128 KiB per token
    1.0
    >>> kv_cache_bytes("opt-13b", 2048, precision="fp16") / 2**30   # vLLM: 1.6 GB per request
    1.5625
    """
    m = _transformer(model)
    whole = _whole(check_count("context_tokens", context_tokens, minimum=0), check_count("batch", batch))
    _, share, ok = _tp_layout(m, tp)
    out = _num(batch) * _num(context_tokens) * m.kv_bytes_per_token(precision) * share
    ok = _whole(ok, whole)
    return out if ok is None else np.where(ok, out, np.nan)


# --- memory: what fits ------------------------------------------------------------
def min_tp(model, hardware, context_tokens=2048, batch=1, precision: str = "bf16",
           weight_precision: str | None = None, kv_precision: str | None = None, phase: str = "decode",
           prompt_tokens=2048, max_tp: int = 8) -> int:
    """Smallest tensor-parallel degree (≤ ``max_tp``, GPUs of one node) whose per-GPU memory fits.

    Candidates are the tp that split the heads (see :func:`decode`); each GPU holds
    weights/tp, its KV share and the live activations of a ``phase`` pass ("decode",
    or "prefill" of ``prompt_tokens``). Raises :class:`~mlsysim.errors.InfeasibleError`
    when not even ``max_tp`` GPUs hold the model (a larger NVLink domain, fewer bytes
    per weight or pipeline stages are needed).

    >>> min_tp("llama-3-70b", "h100"), min_tp("llama-3.1-405b", "h200", context_tokens=8192)
    (2, 8)
    """
    m, hw = _transformer(model), _hardware(hardware)
    check_integer("max_tp", max_tp)
    check_integer("context_tokens", context_tokens, minimum=0)
    check_integer("batch", batch)
    check_integer("prompt_tokens", prompt_tokens)
    if phase not in ("decode", "prefill"):
        raise UnknownNameError("phase", phase, ("decode", "prefill"))
    tokens = 1.0 if phase == "decode" else float(prompt_tokens)
    for tp in range(1, int(max_tp) + 1):
        if not _valid_tp(m, tp):
            continue
        s = _setup(m, hw, precision, tp, weight_precision, kv_precision)
        if _cost(s, phase, float(batch), tokens, float(context_tokens))["footprint_B"] <= hw.memory_B:
            return tp
    raise InfeasibleError(f"{m.name} at batch {batch:g} and {context_tokens:,.0f} cached tokens does not fit "
                          f"on up to {max_tp} x {hw.name} ({fmt(hw.memory_B, 'B')} each) by tensor parallelism")


def serving_memory(model, hardware, context_tokens=2048, batch=1, precision: str = "bf16", tp=1,
                   weight_precision: str | None = None, kv_precision: str | None = None) -> ServingMemory:
    """Resident bytes per GPU while ``batch`` sequences decode after ``context_tokens`` tokens.

    total = weights·bytes/tp + batch·(context + 1)·KV per token·share + live activations,
    the footprint :func:`decode` checks. Does not raise when it does not fit: read ``feasible``.

    >>> s = serving_memory("llama-3-8b", "h100", context_tokens=8191, batch=16)
    >>> round(s.weights_B / 1e9, 2), round(s.kv_cache_B / 2**30, 1), bool(s.feasible)
    (16.06, 16.0, True)
    """
    s = _setup(model, hardware, precision, tp, weight_precision, kv_precision)
    whole = _whole(check_count("context_tokens", context_tokens, minimum=0), check_count("batch", batch))
    batch, context = _num(batch), _num(context_tokens)
    p = _cost(s, "decode", batch, 1.0, context)
    hw = s.hws[0]
    feasible = p["footprint_B"] <= hw.memory_B
    if s.ok is not None:
        feasible = feasible & s.ok
    parts = dict(weights_B=p["weights_B"], kv_cache_B=p["kv_cache_B"],
                 activations_B=p["footprint_B"] - p["weights_B"] - p["kv_cache_B"], total_B=p["footprint_B"])
    if whole is not None:               # a fractional batch or context holds no real bytes
        feasible = feasible & whole
        parts = {k: np.where(whole, v, np.nan) for k, v in parts.items()}
    return ServingMemory(workload=s.m.name, hardware=hw.name, tp=s.tp, batch=batch, context_tokens=context,
                         capacity_B=hw.memory_B, feasible=feasible, **parts)


def max_batch(model, hardware, context_tokens=2048, precision: str = "bf16", tp=1,
              weight_precision: str | None = None, kv_precision: str | None = None):
    """Largest number of sequences that can decode together after ``context_tokens`` tokens.

    b_max = ⌊(capacity − weights/tp) / (per-sequence KV share + live activations)⌋,
    the largest batch :func:`decode` accepts. 0 when the weights fit but not one
    sequence; InfeasibleError (NaN in arrays) when not even the weights fit.

    >>> max_batch("llama-3-8b", "h100", context_tokens=8191)
    59
    """
    s = _setup(model, hardware, precision, tp, weight_precision, kv_precision)
    whole = check_count("context_tokens", context_tokens, minimum=0)
    p = _cost(s, "decode", 1.0, 1.0, _num(context_tokens))     # footprint is affine in the batch
    hw = s.hws[0]
    room = hw.memory_B - p["weights_B"]
    out = np.floor(np.maximum(room, 0.0) / (p["footprint_B"] - p["weights_B"]))
    return _count(out, room < 0, _whole(s.ok, whole),
                  lambda: f"{s.m.name} weights need {fmt(p['weights_B'], 'B', 4)} per GPU with tp={s.tp}, "
                          f"more than the {fmt(hw.memory_B, 'B', 4)} of {hw.name}")


def max_context(model, hardware, batch=1, precision: str = "bf16", tp=1,
                weight_precision: str | None = None, kv_precision: str | None = None):
    """Longest sequence (tokens held in the KV cache) that ``batch`` sequences can each reach.

    ℓ_max = ⌊(capacity − weights/tp − batch·live) / (batch·KV per token·share)⌋, capped
    at the model's context window: a decode step after ℓ_max − 1 cached tokens fits,
    one after ℓ_max tokens does not (unless the window caps it). InfeasibleError (NaN
    in arrays) when not even one token per sequence fits.

    >>> max_context("llama-3-8b", "b200") == _model("llama-3-8b").max_context
    True
    >>> max_context("llama-3-70b", "h100", batch=8, tp=2)
    7206
    """
    s = _setup(model, hardware, precision, tp, weight_precision, kv_precision)
    whole = check_count("batch", batch)
    batch = _num(batch)
    p0 = _cost(s, "decode", batch, 1.0, 0.0)
    hw, m = s.hws[0], s.m
    per_token = batch * m.kv_bytes_per_token(s.kp) * s.share
    room = hw.memory_B - (p0["footprint_B"] - p0["kv_cache_B"])
    out = np.minimum(np.floor(np.maximum(room, 0.0) / per_token), m.max_context)
    return _count(out, room < per_token, _whole(s.ok, whole),
                  lambda: f"{m.name} does not fit on {hw.name} with tp={s.tp} at batch {batch:g}: weights and "
                          f"activations leave {fmt(max(room, 0.0), 'B')} for the KV cache")


def _count(out, short, ok, message):
    """A count that the memory allows: an int for plain inputs (InfeasibleError with ``message()``
    where ``short``, too little memory), NaN in arrays where ``short`` or where ``ok`` (valid
    inputs, None when all are) is False."""
    bad = short if ok is None else short | ~ok
    if np.ndim(out) == 0 and np.ndim(bad) == 0:
        if bad:
            raise InfeasibleError(message())
        return int(out)
    return np.where(bad, np.nan, out)
