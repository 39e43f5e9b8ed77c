"""Wafer-scale engines: weight streaming and weights-resident execution.

A wafer-scale engine (Cerebras WSE-2, WSE-3) keeps 40–44 GB of SRAM beside its cores
at ~20 PB/s and has no HBM. It runs a model in one of two ways.

**Weight streaming** (Cerebras weight-streaming whitepaper and MemoryX/SwarmX
documentation, 2021; S. Lie, "Cerebras architecture deep dive", Hot Chips 34, 2022).
Weights and optimizer state live in external memory (MemoryX); the activations of
the step stay on the wafer; weights stream in one layer at a time over the system
I/O (12 × 100 GbE = 150 GB/s per direction), and in training the weight gradients
stream back out. Loading the next layer overlaps the current layer's compute, so
each sweep over the layers takes

    forward   t_f = max(F/P, W/R)
    backward  t_b = max(2F/P (+F/P with full recomputation), W/R, G/R)   (training)

where F is the forward FLOP of the N = batch × seq_len tokens on the wafer, P the
peak, W the weight bytes streamed per sweep, G the gradient bytes streamed out and
R the injection bandwidth per direction (in and out run at once). A sweep is
compute-bound when F/W exceeds the **streaming ridge** P/R — about 1e5 FLOP/B on a
CS-3 against ~300 FLOP/B (peak over HBM bandwidth) on an H100. For a dense model
(F ≈ 2·N·params, W = params·b) that takes

    N* ≈ P·b / (2R) tokens on the wafer at once        (≈ 1.06e5 in fp16 on a CS-3)

and those tokens' activations must fit in SRAM: in training every layer's saved
activations (or only the layer inputs with full recomputation) plus the logits,
beside a double buffer of the largest layer's weights (and, in training, a buffer
for its gradients). If the largest batch that fits is below N*, the step stays
injection-bound: more wafers (data parallel, the weights broadcast by SwarmX)
multiply throughput but not the per-wafer intensity.

**Weights resident** (Cerebras inference, 2024). The weights stay in SRAM, split by
layers across k = ⌈footprint / SRAM⌉ wafers that form a pipeline. A token passes
every wafer in turn, so one step is the roofline of one wafer with its SRAM
bandwidth as the memory bandwidth (only one wafer works on a given batch at a
time), plus the activations handed from wafer to wafer over the system links.
A second, latency-bound regime that neither formula models — per-layer dataflow
and synchronisation across the wafer — sets the measured batch-1 token rates
(notebook 10 compares them).

Assumptions: gradients and streamed weights use the weight precision; the
optimizer update runs in MemoryX and overlaps the sweeps; layers are uniform, so
summing per-layer max() terms equals the max() of the sums within a sweep.

Worked numbers (tested): on a CS-3 in fp16 the streaming ridge is 1.06e5 FLOP/B;
Llama-3-70B training needs ≈ 51 sequences of 2,048 tokens on the wafer to be
compute-bound, but SRAM holds the activations of no sequence without
recomputation and of 9 with full recomputation — the compute-bound batch is not
reachable. Served with weights resident in fp16 it needs 4 CS-3 wafers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .tables import Record
from .errors import (InfeasibleError, MlsysimError, UnknownNameError, check_count, check_fraction, check_integer,
                     check_positive)
from .optimizers import training_state
from .registry import hardware as _hardware, model as _model
from .roofline import COUNTS_REASON, Roofline, _transformer_weight_reads, _whole, pass_cost, roofline
from .sensitivity import scale_hardware
from .units import bytes_per, fmt
from .workloads import Transformer

MEMORYX_B = 1.2e15   # largest CS-3 external-memory option: 1.5 TB, 12 TB or 1.2 PB (Cerebras, Mar 2024)
PHASES = ("training", "prefill", "decode")
RECOMPUTE = ("none", "full")


def _where(ok, v):
    return v if ok is True else np.where(ok, v, np.nan)


@dataclass(frozen=True, repr=False)
class WeightStreaming(Record):
    """Result of :func:`weight_streaming` (per wafer; times in s, traffic in bytes).

    Scalar inputs give floats; array inputs (batch, seq_len, context) give arrays.
    """

    workload: str
    hardware: str
    phase: str
    precision: str
    recompute: str
    wafers: int
    batch: object
    tokens: object                # tokens on one wafer per step
    flops: object                 # FLOP executed per wafer per step (recomputation included)
    model_flops: object           # FLOP the model needs (3x forward for training)
    weight_bytes: object          # weight bytes streamed in per sweep
    peak_flops: float
    injection_Bps: float          # per direction
    forward_compute_s: object
    forward_stream_s: object
    backward_compute_s: object
    backward_stream_s: object     # max of weights in and gradients out (full duplex)
    time_s: object
    compute_bound_batch: object   # sequences per wafer at which the forward sweep turns compute-bound
    max_batch: object             # largest batch whose activations fit in SRAM
    sram_needed_B: object
    sram_B: float
    external_needed_B: float
    external_B: float
    tokens_per_sequence: object
    feasible: object
    reason: str = ""

    @property
    def compute_s(self):
        return (self.forward_compute_s + self.backward_compute_s)

    @property
    def injection_s(self):
        """Time the inbound stream needs for the step (weights in, both sweeps)."""
        return self.forward_stream_s + (self.backward_stream_s if self.phase == "training" else 0.0)

    @property
    def ridge(self) -> float:
        """Streaming ridge: FLOP per streamed weight byte at which a sweep turns compute-bound."""
        return self.peak_flops / self.injection_Bps

    @property
    def intensity(self):
        """Forward FLOP per streamed weight byte."""
        return self.forward_compute_s * self.peak_flops / self.weight_bytes

    @property
    def bound(self):
        """"compute", "injection" or "mixed" (forward injection-bound, backward compute-bound)."""
        f = np.asarray(self.forward_compute_s >= self.forward_stream_s)
        b = np.asarray(self.backward_compute_s >= self.backward_stream_s) if self.phase == "training" else f
        out = np.where(f & b, "compute", np.where(~f & ~b, "injection", "mixed"))
        out = np.where(self.feasible, out, "infeasible")
        return str(out) if out.ndim == 0 else out

    @property
    def reachable(self):
        """Whether the compute-bound batch fits in SRAM."""
        return self.compute_bound_batch <= self.max_batch

    @property
    def tokens_per_s(self):
        """New tokens per second over all ``wafers`` (data parallel, each with ``batch``)."""
        return self.wafers * self.batch * self.tokens_per_sequence / self.time_s

    @property
    def utilization(self):
        """Model FLOP/s as a fraction of the peak (recomputation is not useful work)."""
        return self.model_flops / (self.time_s * self.peak_flops)

    def verdict(self) -> str:
        """One sentence: is the compute-bound batch reachable before SRAM runs out?"""
        if np.ndim(self.time_s):
            return ""
        need, cap = self.compute_bound_batch, self.max_batch
        if need <= cap:
            return (f"compute-bound from {need:,.0f} sequences per wafer; SRAM holds up to {cap:,.0f}: "
                    f"reachable")
        return (f"compute-bound only from {need:,.0f} sequences per wafer, but SRAM holds at most "
                f"{cap:,.0f}: not reachable, the forward sweep stays injection-bound")

    def rows(self) -> list[tuple[str, str]]:
        if np.ndim(self.time_s):
            return [("shape", str(np.shape(self.time_s)))]
        rows = [("workload", f"{self.workload} {self.phase}, batch {self.batch:g} x {self.tokens_per_sequence:g}"
                             f" tokens on {self.hardware}"),
                ("streaming ridge", f"{self.ridge:.3g} FLOP/B (injection {fmt(self.injection_Bps, 'B/s')})"),
                ("intensity", f"{self.intensity:.3g} FLOP/B"),
                ("forward sweep", f"compute {fmt(self.forward_compute_s, 's')}, "
                                  f"stream {fmt(self.forward_stream_s, 's')}")]
        if self.phase == "training":
            rows.append(("backward sweep", f"compute {fmt(self.backward_compute_s, 's')}, "
                                           f"stream {fmt(self.backward_stream_s, 's')}"))
        rows += [("step time", fmt(self.time_s, "s")), ("bound", self.bound),
                 ("utilization", fmt(self.utilization, "%")),
                 ("SRAM", f"{fmt(self.sram_needed_B, 'B')} of {fmt(self.sram_B, 'B')}"),
                 ("compute-bound batch", self.verdict())]
        return rows

    __repr__ = Record.__str__


def _num(x):
    return float(x) if np.ndim(x) == 0 else np.asarray(x, dtype=float)


def _check_count(name: str, n) -> None:
    if not (type(n) is int and n >= 1):   # fast path for the usual plain int
        check_integer(name, n)


def _transformer(workload) -> Transformer:
    m = _model(workload)
    if not isinstance(m, Transformer):
        raise MlsysimError(f"{m.name} is not a Transformer; the wafer models cover Transformers only")
    return m


def _crossover_batch(m: Transformer, tokens_per_seq, fwd_flops_per_seq, wb: float, peak: float, rate: float):
    """Sequences b at which a forward sweep's FLOP / peak equal its streamed bytes / rate.

    b = k·W(b·t) with k = P/(R·F₁) (F₁ forward FLOP per sequence, t tokens per sequence) and
    W(n) = C(n) + min(n, V)·d·b_w: the embedding rows the tokens touch, in closed form for each
    side of n = V; C is constant for a dense model and is iterated for a MoE, whose touched
    experts grow with the tokens.
    """
    k = peak / (rate * fwd_flops_per_seq)
    row, vocab = m.d_model * wb, float(m.vocab)
    b = 1.0 + 0.0 * k
    for _ in range(8 if m.is_moe else 1):
        n = b * tokens_per_seq
        rest = _transformer_weight_reads(m, n, wb) - np.minimum(n, vocab) * row
        full = k * (rest + vocab * row)                  # every embedding row touched
        part = k * rest / (1.0 - k * tokens_per_seq * row)
        b = np.where(full * tokens_per_seq >= vocab, full, part) if np.ndim(full) else \
            (full if full * tokens_per_seq >= vocab else part)
    return b


def _streaming_inputs(workload, hardware, phase: str, recompute: str, wafers, efficiency, external_memory_B):
    """The Transformer and the device of :func:`weight_streaming`, its settings checked."""
    m, hw = _transformer(workload), _hardware(hardware)
    if phase not in PHASES:
        raise UnknownNameError("weight-streaming phase", phase, PHASES)
    if recompute not in RECOMPUTE:
        raise UnknownNameError("recomputation", recompute, RECOMPUTE)
    if phase != "training" and recompute != "none":
        raise MlsysimError("recompute applies to training only")
    if hw.host_link_Bps is None:
        raise MlsysimError(f"{hw.name} has no host/injection link (host_link_Bps) to stream weights over")
    _check_count("wafers", wafers)
    check_fraction("efficiency", efficiency)
    check_positive("external_memory_B", external_memory_B)
    return m, hw


def _forward_flops(m: Transformer, phase: str, batch, seq_len, context_tokens, precision: str, wp: str, optimizer):
    """Forward FLOP of one sweep over the batch on the wafer, and the tokens per sequence."""
    if phase == "decode":
        _, c, tps = pass_cost(m, "decode", batch, context_tokens=context_tokens, precision=precision,
                              weight_precision=wp)
        fwd = c.flops
    else:
        kind = "training" if phase == "training" else "prefill"
        ctx = 0 if phase == "training" else context_tokens
        _, c, tps = pass_cost(m, kind, batch, seq_len=seq_len, context_tokens=ctx, precision=precision,
                              weight_precision=wp, optimizer=optimizer)
        fwd = c.flops / 3.0 if phase == "training" else c.flops
    return fwd, tps


def _sweeps(m: Transformer, phase: str, recompute: str, fwd, w, peak, rate, optimizer, wp: str, wb: float):
    """Compute and streaming times of the forward and backward sweeps, FLOPs, external state and step time."""
    fc, fs = fwd / peak, w / rate
    if phase == "training":
        extra = 1.0 if recompute == "full" else 0.0
        bc, bs = (2.0 + extra) * fwd / peak, w / rate   # gradients out (same bytes) run in parallel
        model_flops, flops = 3.0 * fwd, (3.0 + extra) * fwd
        state = training_state(m, optimizer, wp).total_B
    else:
        bc = bs = 0.0 * fwd
        model_flops = flops = fwd
        state = m.params * wb
    time_s = np.maximum(fc, fs) + np.maximum(bc, bs) if np.ndim(fc) else max(fc, fs) + max(bc, bs)
    return fc, fs, bc, bs, model_flops, flops, state, time_s


def _sram(m: Transformer, hw, phase: str, recompute: str, batch, tokens, tps, context_tokens, precision: str,
          wb: float, ab: float):
    """SRAM the step needs and the most sequences that fit beside the weight buffers."""
    # a double buffer of the largest streamed layer (+ its gradients in training) and the step's data
    block = (m.params - m.embedding_params - m.head_params) / m.layers * wb
    largest = max(block, m.vocab * m.d_model * wb)
    buffers = (3.0 if phase == "training" else 2.0) * largest
    kv_tok = m.kv_bytes_per_token(precision)
    if phase == "training":
        per_token_layers = m.d_model * m.layers + m.saved_activation_elements if recompute == "full" \
            else m.saved_activation_elements * m.layers
        data = tokens * (per_token_layers + m.vocab) * ab
    else:
        live = tokens * (2 * m.d_model + (2 if m.gated_mlp else 1) * max(m.d_ff, m.moe_d_ff)) * ab
        cached = batch * (context_tokens + tps) * kv_tok
        data = live + cached
    sram_needed = buffers + data
    per_seq = data / batch
    max_batch = np.floor(np.maximum(hw.memory_B - buffers, 0.0) / per_seq)
    return sram_needed, max_batch


def _feasibility(m: Transformer, hw, phase: str, batch, sram_needed, max_batch, state, external_memory_B, whole):
    """Whether SRAM and the external store hold the step (a scalar that does not raises), and why not."""
    ok = (sram_needed <= hw.memory_B) & (state <= external_memory_B)
    fits = ok
    if whole is not None:
        ok = ok & whole
    reason = ""
    if np.ndim(ok) == 0:
        if not ok:
            why = (f"its weights and optimizer state ({fmt(state, 'B')}) exceed the external memory "
                   f"({fmt(external_memory_B, 'B')})" if state > external_memory_B else
                   f"needs {fmt(sram_needed, 'B')} of SRAM but {hw.name} has {fmt(hw.memory_B, 'B')} "
                   f"(at most {max_batch:,.0f} sequences fit)")
            raise InfeasibleError(f"{m.name} {phase} at batch {batch:g}: {why}")
        ok = True
    elif not np.all(ok):
        why = [] if whole is not None and np.all(fits | ~whole) else \
            ["needs more SRAM (or external memory) than the device has"]
        reason = "; ".join(why + ([COUNTS_REASON] if whole is not None else [])) + " where feasible is False"
    return ok, reason


def weight_streaming(workload, hardware="cs-3", batch=1, seq_len=2048, phase: str = "training",
                     precision: str = "fp16", weight_precision: str | None = None, context_tokens=0,
                     recompute: str = "none", wafers: int = 1, efficiency=1.0, optimizer: str = "adamw",
                     external_memory_B: float = MEMORYX_B) -> WeightStreaming:
    """Step time of a Transformer on a wafer that streams its weights (see the module docstring).

    Parameters
    ----------
    hardware : a device with ``host_link_Bps`` (the injection link; for a GPU this is
        PCIe, i.e. weights offloaded to host memory) and on-device memory ``memory_B``.
    batch : sequences resident on one wafer per step (float or array).
    seq_len : tokens per sequence (training, prefill); decode adds one token per sequence
        to ``context_tokens`` cached ones.
    phase : "training" (forward and backward sweeps), "prefill" or "decode" (forward only).
    recompute : "none" keeps every layer's saved activations on the wafer; "full" keeps
        only each layer's input and recomputes the forward during the backward sweep.
    wafers : data-parallel wafers, each with ``batch`` (throughput scales, per-wafer time not).
    external_memory_B : capacity of the external weight store (default the 1.2 PB MemoryX).

    >>> r = weight_streaming("llama-3-70b", "cs-3", batch=8, seq_len=2048, recompute="full")
    >>> r.bound, round(r.ridge / 1e3, 1), round(float(r.compute_bound_batch), 1), float(r.max_batch)
    ('injection', 105.6, 51.2, 9.0)
    """
    m, hw = _streaming_inputs(workload, hardware, phase, recompute, wafers, efficiency, external_memory_B)
    wp = weight_precision or precision
    wb, ab = bytes_per(wp), bytes_per(precision)
    peak, rate = hw.peak(precision) * efficiency, hw.host_link_Bps
    whole = _whole(check_count("batch", batch), check_count("seq_len", seq_len),
                   check_count("context_tokens", context_tokens, minimum=0))
    batch, seq_len, context_tokens = _num(batch), _num(seq_len), _num(context_tokens)
    fwd, tps = _forward_flops(m, phase, batch, seq_len, context_tokens, precision, wp, optimizer)
    tokens = batch * tps
    w = _transformer_weight_reads(m, tokens, wb)
    fc, fs, bc, bs, model_flops, flops, state, time_s = _sweeps(m, phase, recompute, fwd, w, peak, rate, optimizer,
                                                                wp, wb)
    sram_needed, max_batch = _sram(m, hw, phase, recompute, batch, tokens, tps, context_tokens, precision, wb, ab)
    fwd_per_seq = fwd / batch
    need = _crossover_batch(m, tps, fwd_per_seq, wb, peak, rate)
    ok, reason = _feasibility(m, hw, phase, batch, sram_needed, max_batch, state, external_memory_B, whole)
    return WeightStreaming(
        workload=m.name, hardware=hw.name, phase=phase, precision=precision, recompute=recompute,
        wafers=int(wafers), batch=batch, tokens=tokens, flops=_where(ok, flops),
        model_flops=_where(ok, model_flops), weight_bytes=w, peak_flops=peak, injection_Bps=rate,
        forward_compute_s=_where(ok, fc), forward_stream_s=_where(ok, fs), backward_compute_s=_where(ok, bc),
        backward_stream_s=_where(ok, bs), time_s=_where(ok, time_s), compute_bound_batch=need,
        max_batch=max_batch, sram_needed_B=sram_needed, sram_B=hw.memory_B, external_needed_B=state,
        external_B=float(external_memory_B), tokens_per_sequence=tps, feasible=ok, reason=reason)


# --- weights resident in SRAM across wafers -------------------------------------------------
@dataclass(frozen=True, repr=False)
class WeightsResident(Record):
    """Result of :func:`weights_resident`: a layer pipeline over ``wafers`` wafers holding the weights.

    ``roofline`` is the whole model on one wafer (its peak, its SRAM bandwidth) with the
    pipeline's total SRAM as capacity; ``time_s`` is the step time of one batch through
    the pipeline (the inter-token latency), ``pipeline_tokens_per_s`` the rate with as many
    batches in flight as there are stages and memory for.
    """

    workload: str
    hardware: str
    wafers: int
    wafers_needed: object
    stages: int                   # pipeline stages: one per layer
    roofline: Roofline
    transfer_s: object            # activations handed across wafer boundaries
    max_batch: object             # largest number of sequences (at this context) the wafers hold
    feasible: object
    reason: str = ""

    @property
    def layers_per_wafer(self) -> float:
        return self.stages / self.wafers

    @property
    def compute_s(self):
        return self.layers_per_wafer * self.roofline.compute_s

    @property
    def memory_s(self):
        return self.layers_per_wafer * self.roofline.memory_s

    @property
    def time_s(self):
        return self.layers_per_wafer * self.roofline.time_s + self.transfer_s

    @property
    def footprint_B(self):
        return self.roofline.footprint_B

    @property
    def bound(self):
        return self.roofline.bound

    @property
    def tokens_per_s(self):
        """One batch in flight: batch × new tokens per step time."""
        return self.roofline.batch * self.roofline.tokens_per_sequence / self.time_s

    @property
    def in_flight(self):
        """Batches the pipeline can hold at once: one per stage, as far as SRAM allows."""
        return np.minimum(self.stages, np.floor(self.max_batch / self.roofline.batch))

    @property
    def pipeline_tokens_per_s(self):
        return self.in_flight * self.tokens_per_s

    def rows(self) -> list[tuple[str, str]]:
        r = self.roofline
        if np.ndim(self.time_s):
            return [("shape", str(np.shape(self.time_s)))]
        return [("workload", f"{self.workload} {r.phase}, batch {r.batch:g}"),
                ("wafers", f"{self.wafers} x {self.hardware} (needs {self.wafers_needed:.0f}), "
                           f"{self.stages} pipeline stages"),
                ("memory", f"{fmt(r.footprint_B, 'B')} of {fmt(r.capacity_B, 'B')} SRAM"),
                ("step time", f"{fmt(self.time_s, 's')} (compute {fmt(self.compute_s, 's')}, SRAM "
                              f"{fmt(self.memory_s, 's')}, hand-over {fmt(self.transfer_s, 's')})"),
                ("tokens/s, one batch", f"{self.tokens_per_s:,.0f}"),
                ("tokens/s, pipeline full", f"{self.pipeline_tokens_per_s:,.0f} ({self.in_flight:.0f} "
                                            f"batches in flight)"),
                ("largest batch", f"{self.max_batch:,.0f} sequences")]

    __repr__ = Record.__str__


def wafers_needed(workload, hardware="cs-3", batch=1, context_tokens=0, precision: str = "fp16"):
    """Wafers whose SRAM together holds the weights, KV cache and live activations: ⌈footprint / SRAM⌉.

    >>> wafers_needed("llama-3-70b", "cs-3")     # Cerebras serves Llama 3.1-70B on four CS-3s
    4
    """
    hw = _hardware(hardware)
    _, c, _ = pass_cost(workload, "decode", batch, context_tokens=context_tokens, precision=precision)
    n = np.ceil(c.footprint_B / hw.memory_B)
    if np.ndim(n) == 0:
        return int(n)
    return n if np.isnan(n).any() else n.astype(int)      # NaN where a count was fractional


def weights_resident(workload, hardware="cs-3", batch=1, context_tokens=0, phase: str = "decode",
                     seq_len=None, precision: str = "fp16", wafers: int | None = None,
                     efficiency=1.0) -> WeightsResident:
    """Inference with the weights resident in the SRAM of a layer pipeline of wafers.

    Each layer is a pipeline stage on its own region of a wafer, sized in proportion to
    its weights (Cerebras' layer-pipelined execution). With L layers on k wafers, the
    region of a layer is k/L of a wafer, so a batch spends (k/L)⁻¹ times the whole-wafer
    time in each layer:

        T_step = (L/k) · max(F/P, Q/B_SRAM) + (k − 1) · hand-over

    with F, Q the FLOP and SRAM traffic of one step of the whole model (the roofline of
    one wafer). A single batch keeps one stage busy at a time; up to L batches in flight
    (as SRAM allows) fill the pipeline. ``wafers`` defaults to the fewest that hold the
    largest configuration asked for (:func:`wafers_needed`); fewer is infeasible. A
    hand-over sends batch × new tokens × d_model activations over the system I/O.

    >>> r = weights_resident("llama-3-8b", "cs-3")
    >>> r.wafers, r.bound, round(r.time_s * 1e6, 1)
    (1, 'compute', 30.3)
    """
    m, hw = _transformer(workload), _hardware(hardware)
    if hw.kind != "wafer":
        raise MlsysimError(f"{hw.name} is a {hw.kind}; weights_resident models wafer-scale parts, "
                           f"whose memory is on-wafer SRAM (use roofline for HBM devices)")
    check_fraction("efficiency", efficiency)
    kv = dict(weight_precision=precision, kv_precision=precision)
    tokens_kw = {} if phase == "decode" else {"seq_len": seq_len}
    whole = _whole(check_count("batch", batch), check_count("context_tokens", context_tokens, minimum=0))
    given = batch                                # the roofline below masks fractional entries itself
    batch, context_tokens = _num(batch), _num(context_tokens)
    if whole is not None:
        batch = np.where(whole, batch, np.nan)
    # the footprint is linear in the batch: weights + batch × (KV cache + live activations per sequence)
    _, one, tps = pass_cost(m, phase, 1.0, context_tokens=context_tokens, precision=precision, **kv, **tokens_kw)
    weights = m.params * bytes_per(precision)
    per_seq = one.footprint_B - weights
    needed = np.ceil((weights + batch * per_seq) / hw.memory_B)
    if wafers is None:
        wafers = int(np.nanmax(needed))
    _check_count("wafers", wafers)
    if np.ndim(needed) == 0 and needed > wafers:
        raise InfeasibleError(f"{m.name} {phase} at batch {batch:g} needs {fmt(weights + batch * per_seq, 'B')} "
                              f"of SRAM: {needed:.0f} x {hw.name}, not {wafers}")
    r = roofline(m, scale_hardware(hw, capacity=wafers), batch=given, precision=precision, phase=phase,
                 seq_len=seq_len, context_tokens=context_tokens, efficiency=efficiency, **kv)
    transfer = (wafers - 1) * batch * tps * m.d_model * bytes_per(precision) / hw.host_link_Bps \
        if hw.host_link_Bps else 0.0
    max_batch = np.maximum(np.floor((wafers * hw.memory_B - weights) / per_seq), 0.0)
    ok = r.feasible
    return WeightsResident(workload=m.name, hardware=hw.name, wafers=int(wafers),
                           wafers_needed=int(needed) if np.ndim(needed) == 0 else
                           (needed.astype(int) if whole is None else needed),
                           stages=m.layers, roofline=r, transfer_s=_where(ok, transfer), max_batch=max_batch,
                           feasible=ok, reason=r.reason)
