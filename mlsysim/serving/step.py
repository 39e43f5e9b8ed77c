"""One inference pass on ``tp`` GPUs of one node: FLOP, bytes, resident memory and time.

The engine behind :func:`~mlsysim.serving.prefill`, :func:`~mlsysim.serving.decode` and the
other serving solvers. **Step time** of a pass on ``tp`` GPUs that split it by tensor
parallelism (Shoeybi et al. 2019, Megatron-LM §3):

    T = max(T_gemm,  Q_gpu / (η_mem·B))  +  T_comm  +  L·t_layer

* W, Q — FLOP and bytes of the pass; on each GPU the FLOP, the
  weight bytes and the KV traffic are divided by ``tp`` (KV heads that cannot be
  divided are replicated, below); the residual stream stays whole on every GPU.
* T_gemm — the compute time of the pass. By default (``efficiency=None``) each matrix
  multiply of a prefill is timed from its shape (:mod:`mlsysim.kernels`: the QKV, output,
  MLP and head projections with batch × tokens rows after the TP split, the attention
  scores as the 128 × 128 blocks a causal kernel computes; output tiles in waves over the
  SMs), so a short prompt's
  few-row GEMMs that leave SMs idle are not timed at the long prompt's rate. A decode
  step's products have one row per sequence (GEMV-like kernels that stream the weights):
  they keep T_gemm = W/tp / (η·P) with η = :data:`DEFAULT_EFFICIENCY`, and so does a
  prefill of at most :data:`mlsysim.kernels.THIN_ROWS` rows (batch × new tokens). A number
  ``efficiency=η`` overrides both: T_gemm = W/tp / (η·P) for every pass.
* η_mem — achievable fraction of HBM bandwidth (``mem_efficiency``), default and source
  :data:`DEFAULT_MEM_EFFICIENCY`: the roofline is a bound, the efficiencies make it an
  estimate.
* T_comm = 2·L·(t_base + allreduce(S, tp, β, α)) — two all-reduces per layer
  (after attention and after the MLP) of S = batch·tokens·d_model·bytes, a ring
  over the node's per-direction scale-up link β (``Hardware.scaleup_Bps``) with
  α per ring step plus a fixed kernel cost t_base (:data:`ALLREDUCE_STEP_S`,
  :data:`ALLREDUCE_BASE_S`). Not overlapped with compute, as in Megatron-style TP.
* L·t_layer — a fixed cost per layer and step that no bandwidth removes: the
  launch gaps and start-up of the ~10 kernels of a decoder layer
  (:data:`DEFAULT_LAYER_OVERHEAD_S`). It is what makes small TP shards slower
  than their byte count suggests.

**Tensor-parallel layout**: tp must divide the query heads, and n_kv and tp must
divide one another. Each GPU holds n_kv/tp KV heads; when n_kv < tp each GPU holds
one head (heads are replicated tp/n_kv times), and MLA's single latent is replicated
on every GPU.

**Memory** per GPU: weights/tp + KV share + live activations, the same footprint as
:func:`~mlsysim.roofline.roofline`. A configuration that does not fit raises
:class:`~mlsysim.errors.InfeasibleError` (scalar) or comes back NaN with ``feasible``
False (arrays).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..collectives import allreduce_time
from ..errors import InfeasibleError, MlsysimError, check_count, check_fraction, check_positive
from ..kernels import LAYER_OVERHEAD_S, MEMORY_EFFICIENCY, memoised
from ..registry import hardware as _hardware, model as _model
from ..roofline import transformer_cost
from ..systems import Hardware
from ..units import bytes_per
from ..workloads import Transformer

# --- defaults, each from a published measurement -----------------------------
DEFAULT_EFFICIENCY = 0.70
"""Achieved fraction of dense peak FLOP/s for the GEMMs and attention of a pass, where a
scalar is used: the compute term of every decode step, and of every pass when a caller
sets ``efficiency`` (prefill otherwise times its GEMMs by shape). Large fp16/bf16 GEMMs
reach 80–90 % of peak and attention kernels 50–73 % on an A100 (Dao 2023,
FlashAttention-2, §1 and §4), up to 75 % on an H100 (Shah et al. 2024, FlashAttention-3);
a Transformer pass mixes both, hence 0.70."""

DEFAULT_MEM_EFFICIENCY = MEMORY_EFFICIENCY
"""Achieved fraction of spec HBM bandwidth for streaming kernels: 0.83, the training step's
:data:`mlsysim.kernels.MEMORY_EFFICIENCY` (gpt-fast's about 1,700 GB/s on an A100-80GB of
2,039 GB/s spec; source there)."""

DEFAULT_LAYER_OVERHEAD_S = LAYER_OVERHEAD_S
"""Fixed cost per layer per step (s): 40 µs, the training step's
:data:`mlsysim.kernels.LAYER_OVERHEAD_S` — about ten kernels per decoder layer, each paying a
few µs of launch gap, DRAM-latency ramp and tail that no bandwidth removes (reasoning there)."""

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


ATTENTION_BLOCK = 128
"""Query and key block (rows × columns) of a fused attention kernel: 128 × 128, the smallest
output tile of :data:`mlsysim.kernels.TILES` (FlashAttention-2 uses 128-row query blocks, Dao 2023)."""


# --- helpers shared by the result records and solvers -----------------------------
def _shape_row(x):
    return [("shape", str(np.shape(x)))] if np.ndim(x) else None


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
        check_count("tp", tp)          # a fractional entry of an array never splits the heads (below)
        tp = int(tp) if np.ndim(tp) == 0 else np.asarray(tp, dtype=float)
    elif tp < 1:
        check_count("tp", tp)
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


def _setup(model, hardware, precision, tp, wp, kp, eff=None, mem_eff=DEFAULT_MEM_EFFICIENCY,
           layer_s=DEFAULT_LAYER_OVERHEAD_S, base_s=ALLREDUCE_BASE_S, step_s=ALLREDUCE_STEP_S) -> _Setup:
    m = _transformer(model)
    one = isinstance(hardware, (str, Hardware))
    hws = [_hardware(h) for h in ([hardware] if one else list(hardware))]
    if not hws:
        raise MlsysimError("hardware list must not be empty")
    wp, kp = wp or precision, kp or precision
    for p in (precision, wp, kp):
        bytes_per(p)
    if eff is not None:
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


def _achieved(s: _Setup, rate):
    """Fraction of the dense peak that an achieved compute rate (FLOP/s, stacked over the
    devices of ``s`` when there are several) amounts to."""
    if s.one:
        return rate / s.hws[0].peak(s.precision)
    peak = np.array([h.peak(s.precision) for h in s.hws])
    return rate / peak.reshape((-1,) + (1,) * (np.ndim(rate) - 1))


def _cost(s: _Setup, phase: str, batch, tokens, context) -> dict:
    """Per-GPU FLOP, traffic and resident bytes of one pass (no hardware yet)."""
    m, tp = s.m, s.tp
    c = transformer_cost(m, phase, batch, tokens, context, s.precision, s.wp, s.kp)
    weights = m.params * bytes_per(s.wp)
    kv = batch * (context + tokens) * m.kv_bytes_per_token(s.kp)
    live = c.footprint_B - weights - kv           # activations alive during the pass
    wbytes, kvbytes = c.weight_bytes / tp, c.kv_bytes * s.share
    out = dict(flops=c.flops / tp, bytes=wbytes + kvbytes + c.activation_bytes, weight_bytes=wbytes,
               kv_bytes=kvbytes, activation_bytes=c.activation_bytes, weights_B=weights / tp,
               kv_cache_B=kv * s.share, footprint_B=weights / tp + kv * s.share + live,
               message_B=batch * tokens * m.d_model * bytes_per(s.precision))
    if s.eff is None:   # what the shape-aware compute time needs
        out["_shape"] = (phase, batch, tokens, context)
    return out


def _shape_compute_s(s: _Setup, hw: Hardware, flops, phase, batch, tokens, context):
    """Shape-aware compute time of a pass. A prefill's GEMMs are timed tile by tile (memoised
    for plain numbers, the scalar path). A decode step's products have one row per sequence:
    GEMV-like kernels, not 128-row tiles, stream the weights (the memory term), and their few
    FLOPs keep the scalar :data:`DEFAULT_EFFICIENCY`, so ``decode`` is the same either way; so
    does a prefill of at most :data:`mlsysim.kernels.THIN_ROWS` rows (batch × new tokens), which
    runs the same kind of kernel: a one-token prefill costs what a decode step costs."""
    from ..kernels import THIN_ROWS
    scalar_s = flops / (hw.peak(s.precision) * DEFAULT_EFFICIENCY)
    if phase == "decode":
        return scalar_s
    thin = batch * tokens <= THIN_ROWS
    if _scalar(batch, tokens) and thin:
        return scalar_s
    if (not _scalar(batch, tokens, context) or type(s.tp) is not int or np.ndim(hw.peak(s.precision))
            or np.ndim(hw.memory_bw_Bps)):
        return np.where(thin, scalar_s, _gemm_compute_s(s, hw, batch, tokens, context))
    return memoised(s.m, "_prefill_gemm_cache", hw, s.precision, (s.tp, batch, tokens, context),
                    lambda: _gemm_compute_s(s, hw, batch, tokens, context))


def _causal_blocks(tokens, context, block):
    """Query × key blocks of ``block`` × ``block`` that causal attention computes for ``tokens`` new
    queries after ``context`` cached keys: query block i (of n = ⌈t/block⌉) needs the keys up to
    c + its last row, so Σ_i ⌈(c + min((i+1)·block, t))/block⌉ = (n−1)·⌈c/block⌉ + n(n−1)/2 +
    ⌈(c+t)/block⌉. Blocks wholly above the diagonal are skipped, those it crosses run in full
    (FlashAttention-2's causal loop, Dao 2023 §3.1); never decreasing in t or c."""
    ceil = (lambda x: float(math.ceil(x))) if _scalar(tokens, context) else np.ceil
    n = ceil(tokens / block)
    return (n - 1.0) * ceil(context / block) + n * (n - 1.0) / 2.0 + ceil((context + tokens) / block)


def layers_gemm_s(m: Transformer, tp, rows, gemm):
    """Seconds of the matrix multiplies of every decoder layer for ``rows`` tokens on one of ``tp`` GPUs,
    each timed by ``gemm(rows, n, k, count=1, experts_read=None)``: per layer the attention input and
    output projections and the MLP (or the router, the routed experts — each gets rows·k/E rows on
    average, of ``experts_read`` experts whose weights are read — and the shared experts, which see
    every row). The output head is left to the caller."""
    from ..kernels import layer_gemms
    g, d = layer_gemms(m), m.d_model
    attn = gemm(rows, g["in_n"] / tp, d) + gemm(rows, d, g["out_k"] / tp)
    dense = attn + gemm(rows, g["up_n"] / tp, d) + gemm(rows, d, g["down_k"] / tp)
    total = (m.layers - m.moe_layers) * dense
    if m.is_moe:
        per = rows * m.experts_per_token / m.experts
        touched = m.experts * (1.0 - (1.0 - m.experts_per_token / m.experts) ** rows)
        moe = attn + gemm(rows, m.experts, d) + gemm(per, g["e_up_n"] / tp, d, m.experts, touched) \
            + gemm(per, d, g["e_down_k"] / tp, m.experts, touched)
        if m.shared_experts:
            moe = moe + gemm(rows, g["e_up_n"] / tp, d, m.shared_experts) \
                + gemm(rows, d, g["e_down_k"] / tp, m.shared_experts)
        total = total + m.moe_layers * moe
    return total


def _gemm_compute_s(s: _Setup, hw: Hardware, batch, tokens, context):
    """Seconds of a pass's matrix multiplies on one GPU, each timed from its shape: per layer
    the attention input and output projections and the MLP (or the routed and shared experts)
    with batch × tokens rows after the TP split, the output head for the last token of each
    sequence, and the attention scores as the 128 × 128 blocks that causal attention computes
    (:func:`_causal_blocks`) in waves over the SMs; the weighted values (and, over layers, every
    layer) at the same rate per FLOP as the scores."""
    from ..kernels import layer_gemms, tile_time
    m, tp, p = s.m, s.tp, s.precision
    g, rows = layer_gemms(m), batch * tokens
    total = layers_gemm_s(m, tp, rows, lambda r, n, k, count=1.0, experts_read=None: tile_time(r, n, k, hw, p, count))
    head = tile_time(batch, m.vocab / tp, m.d_model, hw, p)   # logits of the last token only
    blocks = _causal_blocks(tokens, context, ATTENTION_BLOCK)
    scores = tile_time(ATTENTION_BLOCK * blocks, ATTENTION_BLOCK, g["qk"], hw, p, batch * m.heads / tp,
                       roofline=False)                       # one layer's q·k products, every head
    attention = scores * m.attention_flops_per_pair(absorbed=False) / (2.0 * m.heads * g["qk"])
    return total + head + attention


def _time(s: _Setup, hw: Hardware, p: dict, shape=None) -> dict:
    """Compute, memory, communication and fixed time of a pass on one device kind."""
    m, tp = s.m, s.tp
    bw = hw.memory_bw_Bps * s.mem_eff
    if s.eff is None:   # shape-aware: the achieved rate follows from the GEMMs' own times
        compute_s = _shape_compute_s(s, hw, p["flops"], *shape)
        peak = p["flops"] / compute_s
    else:
        peak = hw.peak(s.precision) * s.eff
        compute_s = p["flops"] / peak
    memory_s = p["bytes"] / bw
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
    shape = p.pop("_shape", None)
    if s.one:
        v = _time(s, s.hws[0], p, shape)
        v.update(p)
        return v, v["footprint_B"] <= v["capacity_B"]
    rows = []
    for hw in s.hws:
        v = _time(s, hw, p, shape)
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
    if not masks and isinstance(fits, (bool, np.bool_)) and all(type(v) is float or np.ndim(v) == 0
                                                                 for v in values.values()):
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
