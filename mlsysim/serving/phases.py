"""The two phases of LLM inference: prefill (time to first token) and decode (inter-token latency).

**Prefill** processes the prompt (its time is the time to first token, TTFT),
counting causal attention pairs; **decode** adds one token per sequence (its
time is the inter-token latency, ITL). Both are one pass of
:mod:`mlsysim.serving.step`:

    T = max(T_gemm,  Q_gpu / (η_mem·B))  +  T_comm  +  L·t_layer

By default (``efficiency=None``) the compute term T_gemm times each matrix multiply of
a prefill from its shape (:mod:`mlsysim.kernels`: output tiles in waves over the SMs),
so a short prompt's few-row GEMMs run below the long prompt's rate; a decode step's
one-row products, and a pass of at most :data:`mlsysim.kernels.THIN_ROWS` rows (batch ×
new tokens), run as GEMV-like kernels and keep the scalar
:data:`~mlsysim.serving.step.DEFAULT_EFFICIENCY`.
A number ``efficiency=η`` overrides it with T_gemm = W/tp / (η·P) for every pass.

The ``bound`` reports which roofline term dominates: decode is memory-bound at small
batch and compute-bound past the ridge. A model too large for one GPU is served with
``tp = min_tp(...)``, never timed as if it fitted.
"""
from __future__ import annotations

import numpy as np

from dataclasses import dataclass

from ..errors import InfeasibleError, MlsysimError, check_count
from ..roofline import COUNTS_REASON, RooflineTerms, _whole
from ..tables import Record
from ..units import fmt
from .capacity import min_tp
from .step import (ALLREDUCE_BASE_S, ALLREDUCE_STEP_S, DEFAULT_EFFICIENCY, DEFAULT_LAYER_OVERHEAD_S,
                   DEFAULT_MEM_EFFICIENCY, _achieved, _evaluate, _masked, _num, _Setup, _setup, _shape_row,
                   _window)


@dataclass(frozen=True)
class InferenceStep(RooflineTerms, Record):
    """Result of :func:`prefill` or :func:`decode`: one pass on ``tp`` GPUs.

    FLOP, bytes and memory are **per GPU**. ``time_s`` is the TTFT of a prefill or
    the ITL of a decode step; ``tokens_per_s`` counts new tokens of the whole batch.
    """

    workload: str
    hardware: object
    phase: str
    precision: str
    tp: object
    batch: object
    tokens: object            # new tokens per sequence (1 for decode)
    context_tokens: object
    flops: object
    bytes: object
    weight_bytes: object
    kv_bytes: object
    activation_bytes: object
    peak_flops: object        # achieved compute rate: efficiency × dense peak
    bandwidth_Bps: object     # achievable: mem_efficiency × spec bandwidth
    compute_s: object
    memory_s: object
    comm_s: object
    overhead_s: object
    time_s: object
    weights_B: object         # resident per GPU
    kv_cache_B: object        # resident per GPU
    footprint_B: object
    capacity_B: object
    feasible: object
    reason: str = ""
    efficiency: object = 1.0  # fraction of the dense peak: set, or achieved by the GEMMs' shapes
    gemm_shapes: bool = False  # True: each GEMM timed from its shape (a prefill at the default)

    @property
    def tokens_per_s(self):
        """New tokens per second summed over the batch: batch × tokens / time."""
        return self.batch * self.tokens / self.time_s

    @property
    def utilization(self):
        """Achieved FLOP/s over the dense peak (not the achievable one): the pass's MFU."""
        return self.flops / self.time_s / (self.peak_flops / self.efficiency)

    def rows(self):
        shape = _shape_row(self.time_s)
        if shape:
            return shape
        label = "TTFT" if self.phase == "prefill" else "time per token (ITL)"
        return [("workload", self.workload), ("hardware", f"{self.hardware} x {self.tp:g}" if self.tp > 1
                                              else str(self.hardware)),
                ("phase", self.phase), ("batch", f"{self.batch:g}"),
                ("tokens", f"{self.tokens:g} new after {self.context_tokens:g} cached"),
                ("compute time", fmt(self.compute_s, "s")),
                ("compute rate", f"{fmt(self.peak_flops, 'FLOP/s')}, {self.efficiency:.0%} of peak"
                                 + (" (GEMM shapes)" if self.gemm_shapes else "")),
                ("memory time", fmt(self.memory_s, "s")),
                ("communication", fmt(self.comm_s, "s")), ("fixed overhead", fmt(self.overhead_s, "s")),
                (label, fmt(self.time_s, "s")), ("bound", self.bound),
                ("tokens/s", f"{self.tokens_per_s:,.4g}"),
                ("memory per GPU", f"{fmt(self.footprint_B, 'B')} of {fmt(self.capacity_B, 'B')}")]



def _step(s: _Setup, phase, batch, tokens, context) -> InferenceStep:
    m = s.m
    whole = _whole(check_count("batch", batch), check_count("context_tokens", context, minimum=0),
                   check_count("prompt_tokens", tokens) if phase == "prefill" else None)
    batch, tokens, context = _num(batch), _num(tokens), _num(context)
    context, inside = _window(m, context, tokens)
    values, fits = _evaluate(s, phase, batch, tokens, context)
    values.pop("message_B", None)

    def fail():
        raise InfeasibleError(_fit_message(s, phase, batch, context, values["footprint_B"]))
    values, feasible, reason = _masked(values, fits, [(s.ok, "tp does not split the heads or is not a whole number"),
                                                      (inside, "beyond the model's context window"),
                                                      (whole, COUNTS_REASON)], fail)
    return InferenceStep(workload=m.name, hardware=s.hws[0].name if s.one else tuple(h.name for h in s.hws),
                         phase=phase, precision=s.precision, tp=s.tp, batch=batch, tokens=tokens,
                         context_tokens=context, feasible=feasible, reason=reason,
                         efficiency=s.eff if s.eff is not None else
                         _achieved(s, values["peak_flops"]) if phase == "prefill" else DEFAULT_EFFICIENCY,
                         gemm_shapes=s.eff is None and phase == "prefill", **values)


def _fit_message(s: _Setup, phase, batch, context, footprint) -> str:
    hw = s.hws[0]
    try:
        need = min_tp(s.m, hw, context_tokens=context, batch=batch, precision=s.precision,
                      weight_precision=s.wp, kv_precision=s.kp, phase=phase)
        hint = f"; serve it with tp={need} (ms.min_tp)" if need > s.tp else ""
    except MlsysimError:
        hint = "; no tensor-parallel split of one 8-GPU node fits it either"
    return (f"{s.m.name} {phase} at batch {batch:g} and {context:,.0f} cached tokens needs "
            f"{fmt(footprint, 'B', 4)} per GPU with tp={s.tp}, but {hw.name} has {fmt(hw.memory_B, 'B', 4)}"
            + hint)


def prefill(model, hardware, prompt_tokens=2048, batch=1, precision: str = "bf16", tp=1, context_tokens=0,
            weight_precision: str | None = None, kv_precision: str | None = None,
            efficiency=None, mem_efficiency=DEFAULT_MEM_EFFICIENCY,
            layer_overhead_s=DEFAULT_LAYER_OVERHEAD_S, allreduce_base_s=ALLREDUCE_BASE_S,
            allreduce_step_s=ALLREDUCE_STEP_S) -> InferenceStep:
    """Time to first token: one pass over ``prompt_tokens`` new tokens of ``batch`` sequences.

    T = max(T_gemm, Q_gpu/(η_mem·B)) + 2·L·(t_base + allreduce) + L·t_layer (module
    docstring). W counts 2 FLOP per multiply-add of every weight for every prompt token,
    causal attention over ``context_tokens`` cached plus t(t+1)/2 new pairs, and the
    logits of the last token only. Prefill is compute-bound for prompts longer than a
    few hundred tokens, so TTFT follows the GPU's FLOP/s.

    **Compute term.** By default (``efficiency=None``) T_gemm sums each GEMM's time from its
    shape (:mod:`mlsysim.kernels`): the QKV, output, MLP and head projections with
    batch × tokens rows after the TP split, the attention scores as the 128 × 128 blocks a
    causal kernel computes, each in 128- or 256-row output tiles run in waves over the SMs at
    the part's best matmul rate. A long prompt fills the waves and runs near that rate; a short prompt's few-row
    GEMMs leave SMs idle, so its TTFT is longer than the long prompt's rate suggests.
    ``efficiency`` is then the achieved fraction W/tp / (P·T_gemm). A number η instead sets
    T_gemm = W/tp / (η·P) at any length (the older scalar model; 0.70 =
    :data:`~mlsysim.serving.step.DEFAULT_EFFICIENCY` is the usual choice). Assumptions as in
    :mod:`mlsysim.kernels`: no overlap of GEMMs with each other, and no split-K above
    :data:`mlsysim.kernels.THIN_ROWS` rows; a pass of at most that many rows (batch × new
    tokens) runs GEMV-like kernels and is timed as a decode step is (a one-token prefill
    costs one decode step).

    Parameters: ``model`` and ``hardware`` (name or record; a list of devices adds a
    leading axis); ``prompt_tokens``, ``batch``, ``context_tokens`` (a cached prefix),
    ``tp`` (GPUs of one node splitting the model) — numbers or arrays that broadcast;
    ``precision`` sets the peak and the activations, ``weight_precision`` and
    ``kv_precision`` the bytes stored; ``efficiency`` (None: by GEMM shape, or a fraction
    of the dense peak), ``mem_efficiency``, ``layer_overhead_s``, ``allreduce_base_s``,
    ``allreduce_step_s`` as documented at their defaults (module constants).

    Worked numbers (TensorRT-LLM measured 133 ms and 16 ms): LLaMA-7B, fp16, A100-80GB.
    2,048 tokens: 27.6 TFLOP at 71 % of the 312 TFLOP/s peak, 126.5 ms; the scalar
    η = 0.70 gives 127.8 ms.

    >>> r = prefill("llama-2-7b", "a100-80gb", prompt_tokens=2048, precision="fp16")
    >>> r.bound, round(r.time_s * 1e3, 1), round(r.efficiency, 3)
    ('compute', 126.5, 0.707)
    >>> round(prefill("llama-2-7b", "a100-80gb", prompt_tokens=2048, precision="fp16",
    ...               efficiency=0.70).time_s * 1e3, 1)
    127.8

    128 tokens: one row of output tiles per GEMM, too few to fill the 108 SMs — 39 % of
    peak, 15.1 ms; the scalar η = 0.70 would call it memory-bound at 9.2 ms.

    >>> r = prefill("llama-2-7b", "a100-80gb", prompt_tokens=128, precision="fp16")
    >>> r.bound, round(r.time_s * 1e3, 1), round(r.efficiency, 2)
    ('compute', 15.1, 0.39)
    """
    s = _setup(model, hardware, precision, tp, weight_precision, kv_precision, efficiency, mem_efficiency,
               layer_overhead_s, allreduce_base_s, allreduce_step_s)
    return _step(s, "prefill", batch, prompt_tokens, context_tokens)


def decode(model, hardware, context_tokens=2048, batch=1, precision: str = "bf16", tp=1,
           weight_precision: str | None = None, kv_precision: str | None = None,
           efficiency=None, mem_efficiency=DEFAULT_MEM_EFFICIENCY,
           layer_overhead_s=DEFAULT_LAYER_OVERHEAD_S, allreduce_base_s=ALLREDUCE_BASE_S,
           allreduce_step_s=ALLREDUCE_STEP_S) -> InferenceStep:
    """One decode step: each of ``batch`` sequences adds a token after ``context_tokens`` cached.

    ``time_s`` is the inter-token latency (ITL); ``tokens_per_s`` = batch / ITL. Every
    step reads all weights once (shared by the batch) and each sequence's KV cache,
    so small batches are memory-bound; the step turns compute-bound when the batch
    passes about the ridge point (for a short cache) — with a long cache the KV
    traffic grows with the batch as fast as the work and decode stays memory-bound.
    Arguments as in :func:`prefill`. The compute term of a decode step is W/tp / (η·P) with
    η = :data:`~mlsysim.serving.step.DEFAULT_EFFICIENCY` (0.70) at the default
    ``efficiency=None`` too: its products have one row per sequence and run as GEMV-like
    kernels that stream the weights (the memory term), not as 128-row tiles.

    Worked number (gpt-fast measured 104.9 tokens/s): Llama-2-7B, bf16, A100-80GB

    >>> r = decode("llama-2-7b", "a100-80gb", context_tokens=0)
    >>> r.bound, round(r.time_s * 1e3, 2), round(r.tokens_per_s)
    ('memory', 9.09, 110)
    """
    s = _setup(model, hardware, precision, tp, weight_precision, kv_precision, efficiency, mem_efficiency,
               layer_overhead_s, allreduce_base_s, allreduce_step_s)
    return _step(s, "decode", batch, 1.0, context_tokens)
