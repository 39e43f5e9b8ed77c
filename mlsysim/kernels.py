"""Achieved fraction of the dense peak in a matrix multiply, from its shape.

A GEMM C[m×n] = A[m×k]·B[k×n] (``batch`` independent copies) runs on a GPU as output tiles
of Tm × Tn elements: one thread block computes one tile, each of the S streaming
multiprocessors (SMs) takes one tile at a time, and the tiles run in *waves* of S. Its time is
the longer of two terms (NVIDIA, *Matrix Multiplication Background User's Guide*, sections
"Tile quantization" and "Wave quantization"; Williams et al. 2009 for the roofline):

* **compute** = waves · 2·Tm·Tn·k / (η_mm · P / S), with
  waves = ⌈batch · ⌈m/Tm⌉ · ⌈n/Tn⌉ / S⌉: a partly filled tile (*tile quantization*) and a
  partly filled last wave (*wave quantization*) cost as much as full ones. η_mm is the fraction
  of the dense peak P that a large, well-shaped GEMM sustains on the part
  (``Hardware.matmul_efficiency``): measured under continuous load where a measurement is
  published, so that it holds the clock the part settles at under its power limit, and the
  main loop's own overheads. The best iteration of a short benchmark reads higher: it catches
  the clock before the power limit pulls it down (H100: 794.5 TFLOP/s best iteration, 730
  sustained);
* **memory** = batch · (m·k + k·n + m·n) · bytes / B: each operand read and the result
  written once at the HBM bandwidth B — the GEMM's own roofline. A thin GEMM (small k, or
  one row per token in decode) has a low arithmetic intensity and is memory-bound.

η = 2·batch·m·n·k / (P · time). The library picks, per shape, the fastest of the tensor-core
tiles 128×256, 256×128 and 128×128 (CUTLASS's tile shapes for Ampere and Hopper; cuBLAS's
heuristics choose among such). Parts with no SM count (TPUs, CPUs, the wafer) keep the tile
but not the wave term.

Assumptions: operands already in HBM, no L2 reuse across GEMMs, no split-K or stream-K
(which would soften the wave term on a real library), one precision for inputs and output, and
the η_mm measured in bf16 (fp16 on the A100) for every precision, except fp8 where the part
has its own measurement (``Hardware.fp8_matmul_efficiency``: on an H100, fp8 GEMMs reach 62 % of
the fp8 peak where bf16 GEMMs reach 74–78 % of theirs, so fp8 is 1.6×, not 2×, faster). The memory term runs at the
full spec bandwidth B, while the streaming kernels of the step models run at
:data:`MEMORY_EFFICIENCY` of it.

Worked numbers (tested): on an A100 (108 SMs, η_mm = 0.737) the QKV projection of an
18.4B GPT with t = 8 (2,048 tokens × 2,304 columns, k = 6,144 hidden) makes 288 tiles of
128 × 128 in ⌈288/108⌉ = 3 waves, so η = 0.737 · 288/324 = 0.655, while an 8,192³ GEMM
fills its waves and reaches 0.736. An attention-score product with k = 96 (2,048 × 2,048 × 96)
does 2·m·n·k = 805 MFLOP for 9.2 MB of traffic, 88 FLOP/B, under the A100's ridge of
153 FLOP/B: memory-bound at η = 0.574.
"""
from __future__ import annotations

import numpy as np

from .errors import check_count
from .units import bytes_per

#: Output tiles (rows × columns) a GEMM library chooses among for tensor-core GEMMs
#: (CUTLASS 2.x/3.x default tile shapes for Ampere and Hopper: 128×256, 256×128, 128×128).
TILES = ((128, 256), (256, 128), (128, 128))

#: η_mm for a part with no published matmul measurement: the middle of the published NVIDIA
#: measurements (H100 73.8 % sustained and 80.3 % at best, B200 77.6 %, A100 73.7–86.9 %
#: depending on the software stack; see the ``kernel_source`` of each part in
#: ``data/hardware.yaml``).
DEFAULT_MATMUL_EFFICIENCY = 0.80

#: Achieved fraction of the spec HBM bandwidth in streaming (element-wise, normalisation,
#: softmax, optimizer) kernels: gpt-fast measures about 1,700 GB/s on an A100-80GB of
#: 2,039 GB/s spec (83 %; pytorch-labs/gpt-fast README, 2023); STREAM-style copies on HBM
#: GPUs reach 80–90 % of the datasheet figure.
MEMORY_EFFICIENCY = 0.83

#: Rows up to which a matrix multiply runs as a GEMV-like kernel rather than in output tiles:
#: 64, the smallest tensor-core tile height of a Hopper warpgroup MMA (``wgmma`` M = 64; NVIDIA
#: PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply") and of CUTLASS's small tiles. With
#: so few rows a library splits the reduction dimension over the SMs (split-K) instead of
#: leaving most of them idle, and the kernel streams the weights at the memory roof; the
#: serving models time such passes like a decode step (:mod:`mlsysim.serving.step`).
THIN_ROWS = 64

#: Fixed cost of one decoder layer's kernels in one forward pass (s): about ten kernels (two
#: norms, QKV projection, rotary embedding, attention, output projection, residual add, MLP
#: up/gate, activation, down projection), each paying a few µs of launch gap, DRAM-latency
#: ramp and tail that no bandwidth removes (NCCL charges a 6.6 µs base latency to a small
#: collective kernel for scale). A backward pass runs about twice the kernels.
LAYER_OVERHEAD_S = 40e-6


def _params(hw, precision):
    eta = hw.matmul_efficiency if hw.matmul_efficiency is not None else DEFAULT_MATMUL_EFFICIENCY
    if precision == "fp8" and hw.fp8_matmul_efficiency is not None:
        eta = hw.fp8_matmul_efficiency
    return hw.peak(precision) * eta, hw.sms, hw.memory_bw_Bps, bytes_per(precision)


def _cdiv(a, b):
    return -(-a // b)


def tile_time(m, n, k, hw, precision: str = "bf16", batch=1, roofline: bool = True):
    """Seconds for ``batch`` GEMMs of m×k by k×n on ``hw`` without input checks: the step
    models call it with average row counts (an expert's share of the routed tokens) that need
    not be whole. :func:`gemm_time` is the checked public form."""
    rate, sms, bw, ab = _params(hw, precision)
    scalar = all(type(x) in (int, float) for x in (m, n, k, batch)) and not (np.ndim(rate) or np.ndim(bw))
    best = None
    for tm, tn in TILES:
        tiles = batch * _cdiv(m, tm) * _cdiv(n, tn)
        slots = tiles if sms is None else _cdiv(tiles, sms) * sms
        t = slots * (2.0 * tm * tn) * k / rate
        best = t if best is None else (min(best, t) if scalar else np.minimum(best, t))
    if not roofline:
        return best
    memory = batch * (m * k + k * n + m * n) * ab / bw
    return max(best, memory) if scalar else np.maximum(best, memory)


def memoised(owner, name: str, hw, precision: str, shape: tuple, compute):
    """``compute()`` cached on the record ``owner`` (in ``owner.__dict__[name]``) under the GEMM
    parameters of ``hw`` and ``precision`` plus ``shape``: the scalar paths of the step models
    time the same shapes again and again. At most 4,096 entries are kept."""
    cache = owner.__dict__.setdefault(name, {})
    key = (id(hw), hw.sms, hw.matmul_efficiency, hw.fp8_matmul_efficiency, hw.memory_bw_Bps, hw.peak(precision), precision) + shape
    hit = cache.get(key)
    if hit is None:
        if len(cache) > 4096:
            cache.clear()
        hit = cache[key] = compute()
    return hit


def gemm_time(m, n, k, hw, precision: str = "bf16", batch=1, roofline: bool = True):
    """Seconds for ``batch`` GEMMs of m×k by k×n on ``hw`` (see the module docstring).

    ``m``, ``n``, ``k`` and ``batch`` are whole numbers ≥ 1 and broadcast (plain numbers stay
    plain; a fractional entry of an array gives NaN); ``hw`` is a :class:`Hardware` record or a
    registry name. ``roofline=False`` drops the memory term (a fused kernel that keeps its
    operands on chip, or one whose traffic is counted elsewhere).

    >>> import mlsysim as ms
    >>> round(gemm_time(8192, 8192, 8192, ms.hardware("a100"), "bf16") * 1e3, 2)   # 1.1 TFLOP at 230 TFLOP/s
    4.79
    """
    hw, whole = _checked(m, n, k, hw, batch)
    t = tile_time(m, n, k, hw, precision, batch, roofline)
    return t if whole is None else np.where(whole, t, np.nan)


def _checked(m, n, k, hw, batch):
    """The hardware record, and a mask of whole entries (None when every entry is whole)."""
    from .registry import hardware
    whole = None
    for name, v in (("m", m), ("n", n), ("k", k), ("batch", batch)):
        ok = check_count(name, v)
        if ok is not None:
            whole = ok if whole is None else whole & ok
    return hardware(hw), whole


def gemm_efficiency(m, n, k, hw, precision: str = "bf16", batch=1, roofline: bool = True):
    """Achieved fraction of the dense peak, 2·batch·m·n·k / (P · ``gemm_time``).

    >>> import mlsysim as ms
    >>> a100 = ms.hardware("a100")
    >>> round(gemm_efficiency(2048, 2304, 6144, a100, "fp16"), 3)   # 288 tiles in 3 waves of 108
    0.655
    >>> round(gemm_efficiency(2048, 2048, 96, a100, "bf16"), 3)     # k = 96: 88 FLOP/B, memory-bound
    0.574
    """
    hw, whole = _checked(m, n, k, hw, batch)
    eta = 2.0 * batch * m * n * k / (hw.peak(precision) * tile_time(m, n, k, hw, precision, batch, roofline))
    return eta if whole is None else np.where(whole, eta, np.nan)


# --- the matrix multiplies of a Transformer layer (used by the training step and by prefill) ---
def layer_matmuls(m) -> tuple[float, float, float, float]:
    """Per layer of a :class:`~mlsysim.workloads.Transformer`: attention and MLP weights
    multiplied per token (dense, MoE active), and the attention FLOPs per query–key pair;
    cached on the record."""
    cached = m.__dict__.get("_layer_matmuls")
    if cached is None:
        L = m.layers
        mlp_dense = m.dense_mlp_params
        mlp_moe = (m.experts_per_token + m.shared_experts) * m.expert_params + m.router_params
        attn = (m.matmul_params_per_token - (L - m.moe_layers) * mlp_dense - m.moe_layers * mlp_moe
                - m.vocab * m.d_model) / L
        cached = m.__dict__["_layer_matmuls"] = (attn, mlp_dense, mlp_moe, m.attention_flops_per_pair() / L)
    return cached


def layer_gemms(m) -> dict:
    """Per layer of a Transformer, unsplit: columns of the attention input projection (QKV, or MLA's down- and
    up-projections as one), rows of its output projection, columns of the MLP's up (and gate)
    projection and rows of its down projection, dense and per expert; cached on the record."""
    cached = m.__dict__.get("_layer_gemms")
    if cached is None:
        attn_mm, mlp_dense, _, _ = layer_matmuls(m)
        d = m.d_model
        out_k = m.heads * (m.v_head_dim if m.is_mla else m.head_dim)
        cached = m.__dict__["_layer_gemms"] = dict(
            in_n=(attn_mm - out_k * d) / d, out_k=out_k, up_n=mlp_dense / d - m.d_ff, down_k=m.d_ff,
            e_up_n=m.expert_params / d - m.moe_d_ff if m.is_moe else 0.0, e_down_k=m.moe_d_ff,
            qk=(m.qk_nope_dim + m.qk_rope_dim) if m.is_mla else m.head_dim)
    return cached
