"""LLM inference on one device or one tensor-parallel node: prefill, decode, KV cache.

One model, built on the pass counts of :mod:`mlsysim.roofline` (``transformer_cost``,
the FLOP, memory traffic and footprint behind ``roofline`` and ``pass_cost``), adds what
serving needs:

**Step time** of a pass on ``tp`` GPUs that split it by tensor parallelism
(Shoeybi et al. 2019, Megatron-LM §3):

    T = max(W/tp / (η·P),  Q_gpu / (η_mem·B))  +  T_comm  +  L·t_layer

* W, Q — FLOP and bytes of the pass; on each GPU the FLOP, the
  weight bytes and the KV traffic are divided by ``tp`` (KV heads that cannot be
  divided are replicated, below); the residual stream stays whole on every GPU.
* η, η_mem — achievable fractions of dense peak and of HBM bandwidth
  (``efficiency``, ``mem_efficiency``): the roofline is a bound, these make it an
  estimate. Defaults and their sources: :data:`DEFAULT_EFFICIENCY`,
  :data:`DEFAULT_MEM_EFFICIENCY`.
* T_comm = 2·L·(t_base + allreduce(S, tp, β, α)) — two all-reduces per layer
  (after attention and after the MLP) of S = batch·tokens·d_model·bytes, a ring
  over the node's per-direction scale-up link β (``Hardware.scaleup_Bps``) with
  α per ring step plus a fixed kernel cost t_base (:data:`ALLREDUCE_STEP_S`,
  :data:`ALLREDUCE_BASE_S`). Not overlapped with compute, as in Megatron-style TP.
* L·t_layer — a fixed cost per layer and step that no bandwidth removes: the
  launch gaps and start-up of the ~10 kernels of a decoder layer
  (:data:`DEFAULT_LAYER_OVERHEAD_S`). It is what makes small TP shards slower
  than their byte count suggests.

**Prefill** processes the prompt (its time is the time to first token, TTFT),
counting causal attention pairs; **decode** adds one token per sequence (its
time is the inter-token latency, ITL). The ``bound`` reports which roofline term
dominates: decode is memory-bound at small batch and compute-bound past the ridge.

**KV cache** per token: 2·L·n_kv·d_head·bytes (MHA/GQA), L·(r_kv + d_rope)·bytes
for MLA (``Transformer.kv_bytes_per_token``). Under TP each GPU holds
n_kv/tp heads; when n_kv < tp each GPU holds one head (heads are replicated
tp/n_kv times), and MLA's single latent is replicated on every GPU. tp must
divide the query heads, and n_kv and tp must divide one another.

**Memory**: weights/tp + KV share + live activations ≤ device memory, the same
footprint as :func:`~mlsysim.roofline.roofline`; :func:`max_batch`,
:func:`max_context` and :func:`min_tp` invert it. A configuration that does not
fit raises :class:`~mlsysim.errors.InfeasibleError` (scalar) or comes back NaN
with ``feasible`` False (arrays) — a model too large for one GPU is served with
``tp = min_tp(...)``, never timed as if it fitted.

**Paged KV** (Kwon et al. 2023, vLLM): memory in blocks of ``block_tokens``
tokens; a request of length ℓ holds ⌈ℓ/B⌉ blocks, wasting ⌈ℓ/B⌉·B − ℓ slots in its
last block, against a contiguous allocator that reserves ``max_tokens`` per request.

**Speculative decoding** (Leviathan et al. 2023; Chen et al. 2023): a draft
proposes k tokens, the target verifies them in one pass; with acceptance rate α
each step yields (1 − α^(k+1))/(1 − α) tokens.

Worked number (tested): Llama-2-7B decode on an A100-80GB at batch 1 (13.2 GB of
weights read per token at 0.83 × 2,039 GB/s, plus 32 × 40 µs): ITL 9.1 ms,
110 tokens/s — gpt-fast measured 104.9 tokens/s.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .tables import Record
from .collectives import allreduce_time
from .errors import (InfeasibleError, MlsysimError, UnknownNameError, check_fraction, check_integer,
                     check_positive)
from .registry import hardware as _hardware, model as _model
from .roofline import RooflineTerms, transformer_cost
from .systems import Hardware
from .units import bytes_per, fmt
from .workloads import Transformer

# --- defaults, each from a published measurement -----------------------------
DEFAULT_EFFICIENCY = 0.70
"""Achieved fraction of dense peak FLOP/s for the GEMMs and attention of a pass.
Large fp16/bf16 GEMMs reach 80–90 % of peak and attention kernels 50–73 % on an
A100 (Dao 2023, FlashAttention-2, §1 and §4), up to 75 % on an H100 (Shah et al.
2024, FlashAttention-3); a Transformer pass mixes both, hence 0.70."""

DEFAULT_MEM_EFFICIENCY = 0.83
"""Achieved fraction of spec HBM bandwidth for streaming kernels. gpt-fast reports
an empirical peak of about 1,700 GB/s on its A100-80GB (2,039 GB/s spec, 83 %;
pytorch-labs/gpt-fast README); STREAM-style copies on HBM GPUs typically reach
80–90 % of the datasheet figure."""

DEFAULT_LAYER_OVERHEAD_S = 40e-6
"""Fixed cost per layer per step (s): about ten kernels per decoder layer (two norms,
QKV projection, rotary embedding and KV write, attention, output projection,
residual add, gate/up projection, activation, down projection), each paying a few
µs of launch gap, DRAM-latency ramp and tail that no bandwidth removes. For scale,
NCCL charges a 6.6 µs base latency to a small collective kernel (below)."""

ALLREDUCE_BASE_S = 6.6e-6
"""Fixed latency of one all-reduce (s): NCCL's tuning model, ring algorithm, LL
protocol (NVIDIA/nccl ``src/graph/tuning.cc``, ``baseLat``)."""

ALLREDUCE_STEP_S = 0.6e-6
"""Latency per ring step over NVLink (s): NCCL's tuning model, ``hwLat`` for NVLink,
ring, LL protocol (NVIDIA/nccl ``src/graph/tuning.cc``)."""

DEFAULT_MEMORY_FRACTION = 0.9
"""Share of device memory a serving engine gives to weights and KV cache; the rest
holds activations, workspaces and the CUDA context (vLLM's default
``gpu_memory_utilization`` = 0.9)."""


# --- result records -----------------------------------------------------------
def _shape_row(x):
    return [("shape", str(np.shape(x)))] if np.ndim(x) else None


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
    peak_flops: object        # achievable: efficiency × dense peak
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
    efficiency: object = 1.0  # the η that scaled the dense peak

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
                ("compute time", fmt(self.compute_s, "s")), ("memory time", fmt(self.memory_s, "s")),
                ("communication", fmt(self.comm_s, "s")), ("fixed overhead", fmt(self.overhead_s, "s")),
                (label, fmt(self.time_s, "s")), ("bound", self.bound),
                ("tokens/s", f"{self.tokens_per_s:,.4g}"),
                ("memory per GPU", f"{fmt(self.footprint_B, 'B')} of {fmt(self.capacity_B, 'B')}")]


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


@dataclass(frozen=True)
class PagedKV(Record):
    """Result of :func:`paged_kv`: KV memory and concurrent requests, paged vs contiguous."""

    workload: str
    hardware: str
    block_tokens: object
    max_tokens: float
    kv_budget_B: float
    kv_bytes_per_token: float
    mean_tokens: float            # E[ℓ]
    mean_blocks: object           # E[⌈ℓ/B⌉]
    waste_tokens: object          # E[⌈ℓ/B⌉·B − ℓ]
    requests_paged: object
    requests_contiguous: float

    @property
    def fragmentation(self):
        """Share of the allocated KV slots that hold no token (internal fragmentation)."""
        return self.waste_tokens / (self.mean_blocks * self.block_tokens)

    @property
    def contiguous_waste_fraction(self):
        """Share of a max-length reservation that holds no token, on average."""
        return 1.0 - self.mean_tokens / self.max_tokens

    @property
    def gain(self):
        """Concurrent requests, paged over contiguous."""
        return self.requests_paged / self.requests_contiguous

    def rows(self):
        return _shape_row(self.requests_paged) or [
            ("workload", self.workload), ("hardware", self.hardware),
            ("KV budget", fmt(self.kv_budget_B, "B")),
            ("KV per token", fmt(self.kv_bytes_per_token, "B")),
            ("mean request", f"{self.mean_tokens:,.4g} tokens"),
            ("block", f"{self.block_tokens:g} tokens"),
            ("waste per request", f"{self.waste_tokens:.3g} tokens ({self.fragmentation:.1%})"),
            ("concurrent requests, paged", f"{self.requests_paged:,.0f}"),
            ("concurrent requests, contiguous", f"{self.requests_contiguous:,.0f} "
                                                 f"(reserving {self.max_tokens:,.0f} tokens each)"),
            ("gain", f"{self.gain:.3g}x")]


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

    @property
    def tokens_per_s(self):
        """Generated tokens per second over the whole batch: batch × output / end-to-end time."""
        return self.batch * self.output_tokens / self.e2e_s

    def rows(self):
        return _shape_row(self.e2e_s) or [
            ("workload", self.workload), ("hardware", f"{self.hardware} x {self.tp:g}"),
            ("batch", f"{self.batch:g}"),
            ("tokens", f"{self.prompt_tokens:g} in, {self.output_tokens:g} out"),
            ("TTFT", fmt(self.ttft_s, "s")), ("mean ITL", fmt(self.itl_s, "s")),
            ("end to end", fmt(self.e2e_s, "s")), ("generated tokens/s", f"{self.tokens_per_s:,.4g}"),
            ("memory per GPU", f"{fmt(self.footprint_B, 'B')} of {fmt(self.capacity_B, 'B')}")]


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


# --- tensor-parallel layout ---------------------------------------------------
def _num(x):
    if type(x) in (int, float):
        return float(x)
    return float(x) if np.ndim(x) == 0 else np.asarray(x, dtype=float)


def _scalar(*xs) -> bool:
    return all(type(x) is float for x in xs)


def _transformer(workload) -> Transformer:
    m = _model(workload)
    if not isinstance(m, Transformer):
        raise MlsysimError(f"{m.name} is not a Transformer: serving models LLM inference")
    return m


def _valid_tp(m: Transformer, t):
    return (m.heads % t == 0) & (m.is_mla | (m.kv_heads % t == 0) | (t % m.kv_heads == 0))


def _tp_layout(m: Transformer, tp):
    """(tp as int or float array, KV share per GPU, mask of valid tp or None). A scalar tp that
    does not split the heads raises."""
    if type(tp) is not int:
        check_integer("tp", tp)
        tp = int(tp) if np.ndim(tp) == 0 else np.asarray(tp, dtype=float)
    check_integer("tp", tp)
    if type(tp) is int:
        if not _valid_tp(m, tp):
            raise InfeasibleError(_tp_message(m, tp))
        return tp, (1.0 if m.is_mla else max(1.0 / tp, 1.0 / m.kv_heads)), None
    share = np.ones_like(tp) if m.is_mla else np.maximum(1.0 / tp, 1.0 / m.kv_heads)
    ok = _valid_tp(m, tp)
    return tp, share, (None if ok.all() else ok)


def _tp_message(m: Transformer, tp) -> str:
    valid = [t for t in range(1, m.heads + 1) if _valid_tp(m, t)]
    return (f"tp={tp} does not split {m.name}: tp must divide its {m.heads} query heads"
            + ("" if m.is_mla else f", and tp and its {m.kv_heads} KV heads must divide one another")
            + f"; valid tp: {', '.join(map(str, valid[:12]))}")


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
    check_positive("context_tokens", context_tokens, allow_zero=True)
    check_positive("batch", batch)
    _, share, ok = _tp_layout(m, tp)
    out = _num(batch) * _num(context_tokens) * m.kv_bytes_per_token(precision) * share
    return out if ok is None else np.where(ok, out, np.nan)


# --- one pass -------------------------------------------------------------------
@dataclass(frozen=True)
class _Setup:
    """Validated inputs shared by the passes of one call."""

    m: Transformer
    one: bool
    hws: list
    precision: str
    wp: str
    kp: str
    tp: object
    share: object
    ok: object
    eff: object
    mem_eff: object
    layer_s: object
    base_s: object
    step_s: object


def _setup(model, hardware, precision, tp, wp, kp, eff=DEFAULT_EFFICIENCY, mem_eff=DEFAULT_MEM_EFFICIENCY,
           layer_s=DEFAULT_LAYER_OVERHEAD_S, base_s=ALLREDUCE_BASE_S, step_s=ALLREDUCE_STEP_S) -> _Setup:
    m = _transformer(model)
    one = isinstance(hardware, (str, Hardware))
    hws = [_hardware(h) for h in ([hardware] if one else list(hardware))]
    if not hws:
        raise MlsysimError("hardware list must not be empty")
    wp, kp = wp or precision, kp or precision
    for p in (precision, wp, kp):
        bytes_per(p)
    check_fraction("efficiency", eff)
    check_fraction("mem_efficiency", mem_eff)
    check_positive("layer_overhead_s", layer_s, allow_zero=True)
    check_positive("allreduce_base_s", base_s, allow_zero=True)
    check_positive("allreduce_step_s", step_s, allow_zero=True)
    tp, share, ok = _tp_layout(m, tp)
    if (tp > 1) if type(tp) is int else np.any(tp > 1):
        for hw in hws:
            if hw.scaleup_Bps is None:
                raise InfeasibleError(f"{hw.name} has no scale-up link: tensor parallelism (tp > 1) needs one")
    return _Setup(m, one, hws, precision, wp, kp, tp, share, ok, eff, mem_eff, layer_s, base_s, step_s)


def _cost(s: _Setup, phase: str, batch, tokens, context) -> dict:
    """Per-GPU FLOP, traffic and resident bytes of one pass (no hardware yet)."""
    m, tp = s.m, s.tp
    c = transformer_cost(m, phase, batch, tokens, context, s.precision, s.wp, s.kp)
    weights = m.params * bytes_per(s.wp)
    kv = batch * (context + tokens) * m.kv_bytes_per_token(s.kp)
    live = c.footprint_B - weights - kv           # activations alive during the pass
    wbytes, kvbytes = c.weight_bytes / tp, c.kv_bytes * s.share
    return dict(flops=c.flops / tp, bytes=wbytes + kvbytes + c.activation_bytes, weight_bytes=wbytes,
                kv_bytes=kvbytes, activation_bytes=c.activation_bytes, weights_B=weights / tp,
                kv_cache_B=kv * s.share, footprint_B=weights / tp + kv * s.share + live,
                message_B=batch * tokens * m.d_model * bytes_per(s.precision))


def _time(s: _Setup, hw: Hardware, p: dict) -> dict:
    """Compute, memory, communication and fixed time of a pass on one device kind."""
    m, tp = s.m, s.tp
    peak, bw = hw.peak(s.precision) * s.eff, hw.memory_bw_Bps * s.mem_eff
    compute_s, memory_s = p["flops"] / peak, p["bytes"] / bw
    if type(tp) is int:
        comm = 0.0 if tp == 1 else 2 * m.layers * (
            allreduce_time(p["message_B"], tp, hw.scaleup_Bps, s.step_s) + s.base_s)
    else:
        t = np.where(s.ok if s.ok is not None else True, tp, 1.0)
        one_ar = allreduce_time(p["message_B"], t, hw.scaleup_Bps or 1.0, s.step_s) + s.base_s
        comm = 2 * m.layers * np.where(t > 1, one_ar, 0.0)
    overhead = m.layers * s.layer_s
    if _scalar(compute_s, memory_s):
        roof = max(compute_s, memory_s)
    else:
        roof = np.maximum(compute_s, memory_s)
        overhead = overhead + 0.0 * roof
    return dict(peak_flops=peak, bandwidth_Bps=bw, compute_s=compute_s, memory_s=memory_s, comm_s=comm,
                overhead_s=overhead, time_s=roof + comm + overhead, capacity_B=hw.memory_B)


_STEP_FIELDS = ("flops", "bytes", "weight_bytes", "kv_bytes", "activation_bytes", "peak_flops",
                "bandwidth_Bps", "compute_s", "memory_s", "comm_s", "overhead_s", "time_s", "weights_B",
                "kv_cache_B", "footprint_B", "capacity_B")


def _evaluate(s: _Setup, phase: str, batch, tokens, context) -> tuple[dict, object]:
    """Fields of an :class:`InferenceStep` (stacked over devices) and the fit mask."""
    p = _cost(s, phase, batch, tokens, context)
    if s.one:
        v = _time(s, s.hws[0], p)
        v.update(p)
        return v, v["footprint_B"] <= v["capacity_B"]
    rows = []
    for hw in s.hws:
        v = _time(s, hw, p)
        v.update(p)
        v["fits"] = v["footprint_B"] <= hw.memory_B
        rows.append(v)
    shape = np.broadcast_shapes(*(np.shape(v[k]) for v in rows for k in ("time_s", "fits")))
    values = {k: np.array([np.broadcast_to(v[k], shape) for v in rows]) for k in (*_STEP_FIELDS, "fits")}
    return values, values.pop("fits")


def _window(m: Transformer, context, tokens):
    """Clip array contexts to the model's window and say where they were clipped."""
    end = context + tokens
    if type(end) is float:
        if end > m.max_context:
            raise InfeasibleError(f"{m.name} has a context window of {m.max_context:,} tokens; "
                                  f"context_tokens + new tokens reaches {end:,.0f}")
        return context, None
    inside = np.asarray(end) <= m.max_context
    if inside.all():
        return context, None
    return np.minimum(context, np.maximum(m.max_context - tokens, 0.0)), inside


def _masked(values: dict, fits, masks, on_fail) -> tuple[dict, object, str]:
    """Scalar: raise via ``on_fail`` if it does not fit. Arrays: NaN where infeasible, with reasons."""
    masks = [(mk, why) for mk, why in masks if mk is not None]
    scalar = all(np.ndim(v) == 0 for v in values.values())
    if isinstance(fits, (bool, np.bool_)) and not masks and scalar:
        if not fits:
            on_fail()
        return {k: (v if type(v) is float else float(v)) for k, v in values.items()}, True, ""
    # arrays may come from any input, hardware fields included: the verdict takes their shape
    shape = np.broadcast_shapes(np.shape(fits), *(np.shape(v) for v in values.values()))
    feasible = np.broadcast_to(np.asarray(fits), shape)
    reasons = [] if feasible.all() else ["needs more memory than the device has"]
    for mk, why in masks:
        feasible = feasible & mk
        reasons.append(why)
    if feasible.all():
        return values, feasible, ""
    keep = ("footprint_B", "capacity_B")
    values = {k: (v if k in keep else np.where(feasible, v, np.nan)) for k, v in values.items()}
    return values, feasible, "; ".join(reasons) + " where feasible is False"


def _step(s: _Setup, phase, batch, tokens, context) -> InferenceStep:
    m = s.m
    batch, tokens, context = _num(batch), _num(tokens), _num(context)
    check_positive("batch", batch)
    check_positive("context_tokens", context, allow_zero=True)
    if phase == "prefill":
        check_positive("prompt_tokens", tokens)
    context, inside = _window(m, context, tokens)
    values, fits = _evaluate(s, phase, batch, tokens, context)
    values.pop("message_B", None)

    def fail():
        raise InfeasibleError(_fit_message(s, phase, batch, context, values["footprint_B"]))
    values, feasible, reason = _masked(values, fits, [(s.ok, "tp does not split the heads"),
                                                      (inside, "beyond the model's context window")], fail)
    return InferenceStep(workload=m.name, hardware=s.hws[0].name if s.one else tuple(h.name for h in s.hws),
                         phase=phase, precision=s.precision, tp=s.tp, batch=batch, tokens=tokens,
                         context_tokens=context, feasible=feasible, reason=reason, efficiency=s.eff, **values)


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
            efficiency=DEFAULT_EFFICIENCY, mem_efficiency=DEFAULT_MEM_EFFICIENCY,
            layer_overhead_s=DEFAULT_LAYER_OVERHEAD_S, allreduce_base_s=ALLREDUCE_BASE_S,
            allreduce_step_s=ALLREDUCE_STEP_S) -> InferenceStep:
    """Time to first token: one pass over ``prompt_tokens`` new tokens of ``batch`` sequences.

    T = max(W/tp/(η·P), Q_gpu/(η_mem·B)) + 2·L·(t_base + allreduce) + L·t_layer (module
    docstring). W counts 2 FLOP per multiply-add of every weight for every prompt token,
    causal attention over ``context_tokens`` cached plus t(t+1)/2 new pairs, and the
    logits of the last token only. Prefill is compute-bound for prompts longer than a
    few hundred tokens, so TTFT follows the GPU's FLOP/s.

    Parameters: ``model`` and ``hardware`` (name or record; a list of devices adds a
    leading axis); ``prompt_tokens``, ``batch``, ``context_tokens`` (a cached prefix),
    ``tp`` (GPUs of one node splitting the model) — numbers or arrays that broadcast;
    ``precision`` sets the peak and the activations, ``weight_precision`` and
    ``kv_precision`` the bytes stored; ``efficiency``, ``mem_efficiency``,
    ``layer_overhead_s``, ``allreduce_base_s``, ``allreduce_step_s`` as documented
    at their defaults (module constants).

    Worked number (TensorRT-LLM measured 133 ms): LLaMA-7B, 2,048 tokens, fp16, A100

    >>> r = prefill("llama-2-7b", "a100-80gb", prompt_tokens=2048, precision="fp16")
    >>> r.bound, round(r.time_s * 1e3)
    ('compute', 128)
    """
    s = _setup(model, hardware, precision, tp, weight_precision, kv_precision, efficiency, mem_efficiency,
               layer_overhead_s, allreduce_base_s, allreduce_step_s)
    return _step(s, "prefill", batch, prompt_tokens, context_tokens)


def decode(model, hardware, context_tokens=2048, batch=1, precision: str = "bf16", tp=1,
           weight_precision: str | None = None, kv_precision: str | None = None,
           efficiency=DEFAULT_EFFICIENCY, mem_efficiency=DEFAULT_MEM_EFFICIENCY,
           layer_overhead_s=DEFAULT_LAYER_OVERHEAD_S, allreduce_base_s=ALLREDUCE_BASE_S,
           allreduce_step_s=ALLREDUCE_STEP_S) -> InferenceStep:
    """One decode step: each of ``batch`` sequences adds a token after ``context_tokens`` cached.

    ``time_s`` is the inter-token latency (ITL); ``tokens_per_s`` = batch / ITL. Every
    step reads all weights once (shared by the batch) and each sequence's KV cache,
    so small batches are memory-bound; the step turns compute-bound when the batch
    passes about the ridge point (for a short cache) — with a long cache the KV
    traffic grows with the batch as fast as the work and decode stays memory-bound.
    Arguments as in :func:`prefill`.

    Worked number (gpt-fast measured 104.9 tokens/s): Llama-2-7B, bf16, A100-80GB

    >>> r = decode("llama-2-7b", "a100-80gb", context_tokens=0)
    >>> r.bound, round(r.time_s * 1e3, 2), round(r.tokens_per_s)
    ('memory', 9.09, 110)
    """
    s = _setup(model, hardware, precision, tp, weight_precision, kv_precision, efficiency, mem_efficiency,
               layer_overhead_s, allreduce_base_s, allreduce_step_s)
    return _step(s, "decode", batch, 1.0, context_tokens)


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
    check_positive("context_tokens", context_tokens, allow_zero=True)
    check_positive("batch", batch)
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
    check_positive("context_tokens", context_tokens, allow_zero=True)
    check_positive("batch", batch)
    batch, context = _num(batch), _num(context_tokens)
    p = _cost(s, "decode", batch, 1.0, context)
    hw = s.hws[0]
    feasible = p["footprint_B"] <= hw.memory_B
    if s.ok is not None:
        feasible = feasible & s.ok
    return ServingMemory(workload=s.m.name, hardware=hw.name, tp=s.tp, batch=batch, context_tokens=context,
                         weights_B=p["weights_B"], kv_cache_B=p["kv_cache_B"],
                         activations_B=p["footprint_B"] - p["weights_B"] - p["kv_cache_B"],
                         total_B=p["footprint_B"], capacity_B=hw.memory_B, feasible=feasible)


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
    check_positive("context_tokens", context_tokens, allow_zero=True)
    p = _cost(s, "decode", 1.0, 1.0, _num(context_tokens))     # footprint is affine in the batch
    hw = s.hws[0]
    room = hw.memory_B - p["weights_B"]
    out = np.floor(np.maximum(room, 0.0) / (p["footprint_B"] - p["weights_B"]))
    bad = room < 0 if s.ok is None else (room < 0) | ~s.ok
    if np.ndim(out) == 0 and np.ndim(bad) == 0:
        if bad:
            raise InfeasibleError(f"{s.m.name} weights need {fmt(p['weights_B'], 'B', 4)} per GPU with "
                                  f"tp={s.tp}, more than the {fmt(hw.memory_B, 'B', 4)} of {hw.name}")
        return int(out)
    return np.where(bad, np.nan, out)


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
    check_positive("batch", batch)
    batch = _num(batch)
    p0 = _cost(s, "decode", batch, 1.0, 0.0)
    hw, m = s.hws[0], s.m
    per_token = batch * m.kv_bytes_per_token(s.kp) * s.share
    room = hw.memory_B - (p0["footprint_B"] - p0["kv_cache_B"])
    out = np.minimum(np.floor(np.maximum(room, 0.0) / per_token), m.max_context)
    bad = room < per_token if s.ok is None else (room < per_token) | ~s.ok
    if np.ndim(out) == 0 and np.ndim(bad) == 0:
        if bad:
            raise InfeasibleError(f"{m.name} does not fit on {hw.name} with tp={s.tp} at batch {batch:g}: "
                                  f"weights and activations leave {fmt(max(room, 0.0), 'B')} for the KV cache")
        return int(out)
    return np.where(bad, np.nan, out)


# --- meeting a service-level target --------------------------------------------------
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
    ``best`` maximises generated tokens/s per GPU. Default efficiencies throughout.

    >>> plan = serving_plan("llama-3-70b", ["h100", "h200"], ttft_s=0.5, itl_s=0.03)
    >>> (plan.best["device"], plan.best["tp"]), round(plan.best["max_batch"])
    (('H200-SXM', 8), 340)
    """
    m = _transformer(model)
    check_positive("ttft_s", ttft_s)
    check_positive("itl_s", itl_s)
    check_positive("prompt_tokens", prompt_tokens)
    check_positive("output_tokens", output_tokens)
    check_integer("max_batch_tried", max_batch_tried)
    devices = [hardware] if isinstance(hardware, (str, Hardware)) else list(hardware)
    tps = [tp] if isinstance(tp, int) else list(tp)
    context = float(prompt_tokens + output_tokens)
    if context > m.max_context:
        raise InfeasibleError(f"{m.name} has a context window of {m.max_context:,} tokens; "
                              f"prompt + output reaches {context:,.0f}")
    rows = []
    for dev in devices:
        hw = _hardware(dev)
        for t in tps:
            check_integer("tp", t)
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


# --- paged KV cache -------------------------------------------------------------
def paged_kv(model, hardware, lengths, probabilities=None, block_tokens=16, max_tokens=None,
             precision: str = "bf16", tp=1, weight_precision: str | None = None,
             kv_precision: str | None = None, memory_fraction=DEFAULT_MEMORY_FRACTION) -> PagedKV:
    """Concurrent requests whose KV cache fits, paged (blocks) against contiguous (max-length).

    A request that ends with ℓ tokens (prompt + output) holds ⌈ℓ/B⌉ blocks of B =
    ``block_tokens`` tokens; the unused slots of its last block, ⌈ℓ/B⌉·B − ℓ, are its
    internal fragmentation (Kwon et al. 2023, vLLM §4.2). A contiguous allocator must
    reserve ``max_tokens`` slots per request because the output length is unknown
    (vLLM §3, Orca, FasterTransformer). With lengths drawn from a mix (``lengths``
    with ``probabilities``, uniform by default) and a KV budget
    K = memory_fraction·capacity − weights/tp per GPU:

        requests_paged      = K / (E[⌈ℓ/B⌉] · B · KV per token)
        requests_contiguous = ⌊K / (max_tokens · KV per token)⌋

    The paged count is an expectation (a steady state over many requests), so it is
    not rounded. ``block_tokens`` may be an array (it broadcasts); ``max_tokens``
    defaults to the model's context window. Paged capacity is at least the contiguous
    one whenever B divides ``max_tokens``.

    >>> p = paged_kv("llama-3-8b", "h100", lengths=range(1, 4097), block_tokens=16, max_tokens=4096)
    >>> round(p.waste_tokens, 1), int(p.requests_contiguous), round(p.gain, 2)
    (7.5, 104, 2.0)
    """
    m, hw = _transformer(model), _hardware(hardware)
    lengths = np.asarray(list(lengths) if not isinstance(lengths, (np.ndarray, int, float)) else lengths,
                         dtype=float).ravel()
    check_positive("lengths", lengths)
    if probabilities is None:
        probs = np.full(lengths.size, 1.0 / lengths.size)
    else:
        probs = np.asarray(probabilities, dtype=float).ravel()
        if probs.shape != lengths.shape:
            raise MlsysimError(f"probabilities has {probs.size} entries but lengths has {lengths.size}")
        check_positive("probabilities", probs, allow_zero=True)
        if probs.sum() <= 0:
            raise MlsysimError("probabilities must not all be 0")
        probs = probs / probs.sum()
    check_integer("block_tokens", block_tokens)
    check_fraction("memory_fraction", memory_fraction)
    longest = float(lengths.max())
    max_tokens = float(m.max_context if max_tokens is None else max_tokens)
    check_positive("max_tokens", max_tokens)
    if longest > max_tokens:
        raise InfeasibleError(f"a request of {longest:,.0f} tokens exceeds max_tokens = {max_tokens:,.0f}")
    if longest > m.max_context:
        raise InfeasibleError(f"a request of {longest:,.0f} tokens exceeds {m.name}'s context window "
                              f"of {m.max_context:,} tokens")
    tp, share, ok = _tp_layout(m, tp)
    if ok is not None or np.ndim(tp):
        raise MlsysimError("paged_kv takes one tp (a whole number that splits the heads)")
    kv_tok = m.kv_bytes_per_token(kv_precision or precision) * share
    budget = memory_fraction * hw.memory_B - m.params * bytes_per(weight_precision or precision) / tp
    if budget <= 0:
        raise InfeasibleError(f"{m.name} weights with tp={tp} leave no KV memory on {hw.name} "
                              f"(memory_fraction={memory_fraction:g})")
    b = _num(block_tokens)
    bb = np.expand_dims(b, -1)
    blocks = np.ceil(lengths / bb)                                     # (..., mix)
    mean_blocks = np.sum(blocks * probs, axis=-1)
    waste = np.sum((blocks * bb - lengths) * probs, axis=-1)           # empty slots of the last block
    paged = budget / (mean_blocks * b * kv_tok)
    if np.ndim(paged) == 0:
        mean_blocks, waste, paged = float(mean_blocks), float(waste), float(paged)
    return PagedKV(workload=m.name, hardware=hw.name, block_tokens=b, max_tokens=max_tokens, kv_budget_B=budget,
                   kv_bytes_per_token=kv_tok, mean_tokens=float(np.dot(lengths, probs)), mean_blocks=mean_blocks,
                   waste_tokens=waste, requests_paged=paged,
                   requests_contiguous=float(math.floor(budget / (max_tokens * kv_tok))))


def length_mix(mean_tokens, max_tokens):
    """A request-length mix for :func:`paged_kv`: P(ℓ) ∝ exp(−(ℓ − 1)/mean), ℓ = 1 … max_tokens.

    Returns ``(lengths, probabilities)``. Chat traffic has many short and few long
    requests (vLLM §6.1 shows such skewed length histograms for ShareGPT and Alpaca);
    the truncated exponential is the simplest mix with that shape. Its actual mean is
    a little below ``mean_tokens`` when the truncation bites.

    >>> lengths, p = length_mix(500, 2048)
    >>> len(lengths), round(float(p.sum()), 6), round(float(lengths @ p))
    (2048, 1.0, 466)
    """
    check_positive("mean_tokens", mean_tokens)
    check_integer("max_tokens", max_tokens)
    lengths = np.arange(1.0, float(max_tokens) + 1.0)
    weights = np.exp(-(lengths - 1.0) / float(mean_tokens))
    return lengths, weights / weights.sum()


# --- a whole request ----------------------------------------------------------------
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
             efficiency=DEFAULT_EFFICIENCY, mem_efficiency=DEFAULT_MEM_EFFICIENCY,
             layer_overhead_s=DEFAULT_LAYER_OVERHEAD_S, allreduce_base_s=ALLREDUCE_BASE_S,
             allreduce_step_s=ALLREDUCE_STEP_S) -> Generation:
    """A batch of requests from prompt to last token: a prefill, then output − 1 decode steps.

    e2e = TTFT + Σ_{c=p}^{p+n−2} ITL(c): the prefill of p prompt tokens yields the first
    token, and decode step j runs after p + j cached tokens. Compute and memory time
    of a step are affine in c, so the sum of their maximum is evaluated in closed form
    (exact, vectorised). Memory is checked at the last token. Arguments as in
    :func:`prefill`, with ``output_tokens`` ≥ 2 (one token is a prefill).

    >>> g = generate("llama-2-7b", "h100", prompt_tokens=128, output_tokens=20)
    >>> round(g.ttft_s * 1e3, 2), round(g.itl_s * 1e3, 2), round(g.e2e_s * 1e3)
    (6.13, 6.06, 121)
    """
    s = _setup(model, hardware, precision, tp, weight_precision, kv_precision, efficiency, mem_efficiency,
               layer_overhead_s, allreduce_base_s, allreduce_step_s)
    m = s.m
    check_positive("output_tokens", output_tokens)
    check_positive("prompt_tokens", prompt_tokens)
    check_positive("batch", batch)
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
                  footprint_B=footprint, capacity_B=d0["capacity_B"])
    fits = (footprint <= d0["capacity_B"]) & fit0

    def fail():
        where, need = (("at the last token", footprint) if footprint > d0["capacity_B"] else
                       ("to prefill the whole batch at once", first["footprint_B"]))
        raise InfeasibleError(f"{m.name}: {batch:g} requests of {p:g} + {n:g} tokens need "
                              f"{fmt(need, 'B', 4)} per GPU {where} with tp={s.tp}, more than "
                              f"the {fmt(s.hws[0].memory_B, 'B', 4)} of {s.hws[0].name}")
    values, feasible, reason = _masked(values, fits, [(s.ok, "tp does not split the heads")], fail)
    if type(values["decode_s"]) is not float:
        values["decode_s"] = np.asarray(values["decode_s"], dtype=float)
    return Generation(workload=m.name, hardware=s.hws[0].name if s.one else tuple(h.name for h in s.hws),
                      tp=s.tp, batch=batch, prompt_tokens=p, output_tokens=n, feasible=feasible, reason=reason,
                      **values)


# --- speculative decoding --------------------------------------------------------------
def expected_accepted_tokens(k, acceptance_rate):
    """Expected tokens one verification step yields with k drafted tokens and acceptance rate α.

    E = (1 − α^(k+1)) / (1 − α)  (k + 1 when α = 1): the accepted prefix of the draft
    plus the target's own next token (Leviathan, Kalman & Matias 2023, Eq. 1; Chen et
    al. 2023). α is the probability that the target accepts a drafted token,
    assumed independent across positions.

    >>> round(expected_accepted_tokens(4, 0.8), 4), expected_accepted_tokens(3, 1.0)
    (3.3616, 4.0)
    """
    check_integer("k", k, minimum=0)
    a = _num(acceptance_rate)
    if not (0.0 <= a <= 1.0 if type(a) is float else np.all((a >= 0) & (a <= 1))):
        raise MlsysimError(f"acceptance_rate must lie in [0, 1], got {acceptance_rate}")
    k1 = _num(k) + 1.0
    if _scalar(a, k1):
        return k1 if a == 1.0 else (1.0 - a ** k1) / (1.0 - a)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(a == 1.0, k1, (1.0 - a ** k1) / (1.0 - a))


def speculative_decode(model, hardware, draft, k=4, acceptance_rate=0.8, context_tokens=2048, batch=1,
                       precision: str = "bf16", tp=1, weight_precision: str | None = None,
                       kv_precision: str | None = None, efficiency=DEFAULT_EFFICIENCY,
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

    >>> s = speculative_decode("llama-2-70b", "h100", draft="llama-2-7b", k=4, acceptance_rate=0.8, tp=4)
    >>> round(s.tokens_per_step, 2), round(s.speedup, 2)
    (3.36, 1.92)
    """
    if not isinstance(hardware, (str, Hardware)):
        raise MlsysimError("speculative_decode takes one device")
    args = (hardware, precision, tp, weight_precision, kv_precision, efficiency, mem_efficiency,
            layer_overhead_s, allreduce_base_s, allreduce_step_s)
    st, sd = _setup(model, *args), _setup(draft, *args)
    m = st.m
    e = expected_accepted_tokens(k, acceptance_rate)
    check_positive("context_tokens", context_tokens, allow_zero=True)
    check_positive("batch", batch)
    kk, c, b = _num(k), _num(context_tokens), _num(batch)
    _window(m, c, kk + 1.0)
    _window(sd.m, c, kk)
    base, _ = _evaluate(st, "decode", b, 1.0, c)
    small, _ = _evaluate(sd, "decode", b, 1.0, c)
    verify, _ = _evaluate(st, "prefill", b, kk + 1.0, c)
    head_s = b * kk * 2.0 * m.vocab * m.d_model / st.tp / verify["peak_flops"]   # logits at every position
    verify_s = verify["time_s"] + head_s
    draft_s = kk * small["time_s"]
    per_token = (draft_s + verify_s) / e
    footprint = verify["footprint_B"] + small["footprint_B"]     # both models' weights and caches
    fits = footprint <= base["capacity_B"]
    if np.ndim(fits) == 0 and not fits:
        raise InfeasibleError(f"{m.name} and its draft {sd.m.name} need {fmt(footprint, 'B', 4)} per GPU "
                              f"together with tp={st.tp}, more than the {fmt(base['capacity_B'], 'B', 4)} of "
                              f"{st.hws[0].name}")
    if np.ndim(fits):
        per_token = np.where(fits, per_token, np.nan)
    return Speculative(workload=m.name, draft=sd.m.name, hardware=st.hws[0].name, k=kk, acceptance_rate=_num(
        acceptance_rate), tokens_per_step=e, draft_s=draft_s, verify_s=verify_s, baseline_s=base["time_s"],
        time_per_token_s=per_token, footprint_B=footprint, capacity_B=base["capacity_B"])
