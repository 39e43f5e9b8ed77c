"""Step time of data × tensor × pipeline × expert × context parallel training, and the search.

One step processes ``global_batch`` sequences of ``seq_len`` tokens on ``c.accelerators``
GPUs split as tp × cp × pp × dp (expert parallelism ep is carved out of dp·cp). Ranks are
ordered tp, cp, ep, dp, pp from the innermost (Megatron-LM's order): TP stays inside a
node, a group that spans nodes talks over each GPU's share of the NICs. Each data-parallel
replica runs m = global_batch / (dp·b) micro-batches of b sequences through p pipeline
stages. Per micro-batch and stage (the busiest stage: ⌈L/(p·v)⌉·v layers plus the output
head), one GPU spends

* **compute** = GEMM + non-GEMM time. The GEMMs do F, the hardware FLOPs of its share
  (forward 2·N per token plus attention; backward twice the forward; recomputation re-runs
  the forward of the recomputed part; a causal FlashAttention kernel skips the masked half
  of the score pairs). By default every matrix multiply is timed from its own shape
  (:mod:`mlsysim.kernels`: tile and wave quantization over the SMs, and the GEMM's roofline):
  the QKV, attention-output, MLP up/gate and down projections and the output head with the
  micro-batch's b·s/cp rows after TP splitting, each as forward, input-gradient and
  weight-gradient products, expert GEMMs with the rows routed to them, and the attention
  core: an eager attention as the batched score and value GEMMs it launches, a fused
  (FlashAttention) kernel at the fraction ``Hardware.attention_efficiency`` of the peak that
  such kernels reach on the part, forward and backward together (FlashAttention-2 runs at about
  0.60 of an A100's peak but only 0.35 of an H100's: Dao 2023; Shah et al. 2024), or as
  batched GEMMs where the part has no published figure. A scalar ``efficiency`` η instead
  times all F at η·P.
  The non-GEMM kernels stream Q, their activation traffic (fused kernels: each activation
  written, read back and its gradient written, 3× the no-recompute activations; plain
  PyTorch, ``elementwise="eager"``: every operator's own reads and writes, counted kernel by
  kernel in :mod:`mlsysim.elementwise`), at the HBM bandwidth B
  (by default at the achievable fraction ``kernels.MEMORY_EFFICIENCY`` of it, plus
  ``kernels.LAYER_OVERHEAD_S`` of kernel launch gaps per layer and forward-pass equivalent;
  a given η lumps both into itself). ``recompute_fraction`` r re-runs the forward of a share
  r of the layers (torchtitan's every-second-layer checkpointing: r = 0.5): every per-layer
  term that full recomputation adds is added r times;
* **TP**: per layer 8 collectives of the activation tensor S = b·s·h·bytes/cp, each
  (t−1)/t·S/β over NVLink (2 all-reduces forward + 2 backward, or with sequence
  parallelism 4 all-gathers and 4 reduce-scatters: the same volume, Korthikanti et al.
  2022 §4.2.2), 4 more with full recomputation; exposed unless ``tp_overlap``;
* **EP**: per MoE layer 4 all-to-alls (dispatch and combine, forward and backward) of
  the b·s·k·h·bytes routed activations (Lepikhin et al. 2021, GShard; Fedus et al. 2022);
* **CP**: per layer an all-gather of K and V forward and an all-gather plus a
  reduce-scatter of their gradients backward (Llama 3 §3.3.2; Liu et al. 2023, ring
  attention), hidden behind the layer's attention compute where it is shorter;
* **PP**: a point-to-point send of the activations forward and of their gradients
  backward per model chunk (S/t per GPU: Narayanan et al. 2021's scatter/gather).

With 1F1B (PipeDream-Flush; Narayanan et al. 2021) the pipeline takes (m + (p−1)/v)
micro-batch slots: the **bubble** adds (p−1)/v slots, a fraction (p−1)/(v·m) of the ideal
time. **DP**: the gradients of the stage are all-reduced (hierarchically: reduce-scatter in
the node, all-reduce across nodes, all-gather in the node) after the last micro-batch,
overlapped with its backward pass (``overlap`` is the usable fraction of that window).
ZeRO-1 reduce-scatters the gradients and all-gathers the updated weights (the same volume;
the all-gather hides behind the next forward); ZeRO-2 reduce-scatters after every
micro-batch; ZeRO-3 also all-gathers the weights before every micro-batch's forward and
backward (1.5× the DDP volume per micro-batch, ZeRO §7). The optimizer update streams the
GPU's shard of the model states through HBM once.

MFU = 3·(2·N + F_att)·tokens / (step · GPUs · P) counts every query–key pair of the
sequence (PaLM App. B; Korthikanti Eq. 4); HFU counts what the hardware executes: it adds
what recomputation re-runs but, with causal FlashAttention, only half of the pairs — so a
run with little recomputation can show an HFU slightly *below* its MFU. The two agree in
ordering (HFU ≥ MFU) whenever attention is eager or not causal.

Assumptions: non-blocking fat-tree fabric and NVSwitch; α = 0 inside the node (MB-sized
messages make it negligible); identical stages except for layer rounding and the head;
no stragglers, failures, data-loading or checkpoint stalls (notebook 06 part 2).

Worked number (tested): GPT-3 175B, 64 A100s (t = 8, p = 8), batch 64 × 2,048 tokens,
eager attention with selective recomputation and SP, η = 0.70: step 13.8 s, MFU 51.3 %
(Korthikanti et al. 2022: 13.75 s, 51.4 %); the shape-aware default times its GEMMs at 0.69 of
peak on average and gives 14.2 s, MFU 49.6 %.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .collectives import all_gather_time, all_to_all_time, hierarchical_allreduce_time, p2p_time, \
    reduce_scatter_time
from .elementwise import ELEMENTWISE, layer_bytes, loss_bytes
from .kernels import LAYER_OVERHEAD_S, MEMORY_EFFICIENCY, layer_gemms, layer_matmuls, memoised, tile_time
from .errors import InfeasibleError, MlsysimError, UnknownNameError, check_count, check_fraction, check_integer, \
    check_positive, check_share, check_single_count, fractional_counts
from .memory import (ATTENTION, RECOMPUTE, TrainingMemory, _SCALAR, bytes_per_param, memory_core, ops,
                     raise_or_mask, record, recompute_code, structure_violations, zero_stage_rules)
from .optimizers import _optimizer
from .registry import cluster as _cluster, hardware as _hardware, model as _model
from .systems import Cluster
from .tables import Record, table
from .units import bytes_per, fmt
from .workloads import Transformer

#: What ``TrainStep.efficiency`` says when each GEMM's efficiency came from its shape.
SHAPE_AWARE = "shape-aware"


def _gcd(a, b):
    if type(a) is int and type(b) is int:
        return math.gcd(a, b)
    return np.gcd(np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64))


def _int(x):
    """A whole-number float as int (scalars), so the collectives take their fast path."""
    return int(x) if type(x) is float and x.is_integer() else x


def _hier(bytes_, group, inner, g, up_Bps, out_Bps, out_lat):
    """Hierarchical all-reduce of ``bytes_`` over ``group`` ranks placed ``inner`` apart."""
    xp = ops(group, inner)
    per_node = xp.maximum(1, g // inner) if xp is _SCALAR else np.maximum(1, g // inner)
    rpn = _gcd(group, per_node)
    nodes = group // rpn
    return hierarchical_allreduce_time(bytes_, _int(rpn), _int(nodes), up_Bps, out_Bps, 0.0, out_lat)


def _weight_gemms(T, k, n, hw, precision, full, batch=1):
    """Seconds of a weight's forward (twice with full recomputation), input-gradient and
    weight-gradient products for T rows (tokens) of a k × n weight."""
    fwd = tile_time(T, n, k, hw, precision, batch)
    return (1 + full) * fwd + tile_time(T, k, n, hw, precision, batch) + tile_time(k, n, T, hw, precision, batch)


def _gemm_seconds(m: Transformer, hw, precision, T, b, s, cp, tp, ep, full):
    """Shape-aware seconds of one micro-batch's matrix multiplies on one GPU (T = b·s/cp rows):
    per dense layer, per MoE layer, the output head, and the attention core per hardware FLOP
    (its batched score and value products; their memory traffic is counted with the
    memory-bound kernels). See :mod:`mlsysim.kernels`."""
    g, d = layer_gemms(m), m.d_model
    attn = (_weight_gemms(T, d, g["in_n"] / tp, hw, precision, full)
            + _weight_gemms(T, g["out_k"] / tp, d, hw, precision, full))
    dense = attn + (_weight_gemms(T, d, g["up_n"] / tp, hw, precision, full)
                    + _weight_gemms(T, g["down_k"] / tp, d, hw, precision, full))
    moe = 0.0
    if m.is_moe:   # E/ep experts on this GPU, each fed ep·T·k/E rows; shared experts see every token
        rows, local = ep * T * m.experts_per_token / m.experts, m.experts / ep
        moe = attn + _weight_gemms(T, d, m.experts, hw, precision, full)
        for expert_rows, experts in ((rows, local), (T, m.shared_experts)):
            if type(experts) is not int or experts > 0:
                moe = moe + (_weight_gemms(expert_rows, d, g["e_up_n"] / tp, hw, precision, full, experts)
                             + _weight_gemms(expert_rows, g["e_down_k"] / tp, d, hw, precision, full, experts))
    head = _weight_gemms(T, d, m.vocab / tp, hw, precision, 0)
    heads = b * m.heads / tp
    core = tile_time(s / cp, s, g["qk"], hw, precision, heads, roofline=False) / (2.0 * heads * s / cp * s * g["qk"])
    return dense, moe, head, core


def _gemm_seconds_cached(m, hw, precision, T, b, s, cp, tp, ep, full):
    """:func:`_gemm_seconds` memoised for plain-number configurations (the scalar path)."""
    return memoised(m, "_gemm_cache", hw, precision, (T, b, s, cp, tp, ep, full),
                    lambda: _gemm_seconds(m, hw, precision, T, b, s, cp, tp, ep, full))


def _gemm_seconds_swept(m, hw, precision, T, b, s, cp, tp, ep, full):
    """:func:`_gemm_seconds` of a large sweep, evaluated once per distinct GEMM shape (a sweep
    of a million layouts has a few hundred distinct micro-batch shapes)."""
    args = (T, b, s, cp, tp, ep, full)
    shape = np.broadcast_shapes(*(np.shape(x) for x in args))
    if math.prod(shape) < 4096:
        return _gemm_seconds(m, hw, precision, *args)
    code = np.zeros(shape, dtype=np.int64)
    for x in args:   # one integer per distinct combination of the varying inputs
        if np.ndim(x):
            values, inv = np.unique(np.asarray(x), return_inverse=True)
            code = code * values.size + np.broadcast_to(inv.reshape(np.shape(x)), shape)
            code = np.unique(code, return_inverse=True)[1].reshape(shape)   # keep the codes dense
    _, first, inverse = np.unique(code.ravel(), return_index=True, return_inverse=True)
    picked = [np.broadcast_to(x, shape).ravel()[first] if np.ndim(x) else x for x in args]
    parts = _gemm_seconds(m, hw, precision, *picked)
    return tuple(np.asarray(y)[inverse].reshape(shape) if np.ndim(y) else y for y in parts)


def _comm_s(m: Transformer, c: Cluster, xp, mem, per_param, tokens, b, s, tp, pp, dp, cp, ep, v, zero, sp, ab,
            Ls, n_moe, full, attn_per_layer, compute, overlap, tp_overlap):
    """Exposed TP, EP, CP, PP time of one micro-batch; DP time per micro-batch slot and after the last one."""
    hw, g = c.accelerator, c.accelerators_per_node
    up = c.scaleup_Bps if g > 1 else hw.memory_bw_Bps  # one GPU per node never uses it
    out, lat = c.scaleout_Bps_per_accelerator, c.fabric.latency_s
    d = m.d_model
    # tensor, expert, context and pipeline communication of one micro-batch
    S = tokens * d * ab
    tp_mb = Ls * (8 + 4 * full) * reduce_scatter_time(S, _int(tp), up) * (1 - tp_overlap)
    ep_mb = 0.0
    if m.is_moe:
        inner = tp * cp
        ep_in = xp.minimum(ep, xp.maximum(1, g // inner))
        s_ep = tokens * m.experts_per_token * d * ab / xp.where(sp, tp, 1)
        inside = all_to_all_time(s_ep, _int(ep), up)
        across = all_to_all_time(s_ep * (ep - ep_in) / xp.maximum(ep - 1, 1), _int(ep), out, lat)
        ep_mb = n_moe * (4 + 2 * full) * xp.where(ep_in >= ep, inside, across)
    cp_mb = 0.0
    if (cp > 1) if type(cp) is int else np.any(np.asarray(cp) > 1):
        kv_per_rank = m.kv_elements_per_token / m.layers / (tp if m.is_mla else xp.minimum(tp, m.kv_heads))
        s_kv = b * s * kv_per_rank * ab
        bw = xp.where(tp * cp <= g, up, out)
        gather = all_gather_time(s_kv, _int(cp), bw, xp.where(tp * cp <= g, 0.0, lat))
        cp_mb = Ls * xp.maximum(0.0, (3 + full) * gather - attn_per_layer)
    stride = tp * cp * dp
    same_node = stride < g
    pp_mb = (pp > 1) * 2 * v * p2p_time(S / tp, xp.where(same_node, up, out), xp.where(same_node, 0.0, lat))
    # data-parallel gradient reduction (and ZeRO-3 weight gathers)
    grad_B = per_param[1]
    ar = _hier(mem["psi_dense"] * grad_B, dp * cp, tp, g, up, out, lat)
    if m.is_moe:
        # (at least one replica: where ep > dp·cp, an entry a sweep masks, the arithmetic stays valid)
        ar = ar + _hier(mem["psi_experts"] * grad_B, xp.maximum(dp * cp // ep, 1), tp * cp * ep, g, up, out, lat)
    rs = ar / 2
    ag = rs * per_param[0] / grad_B   # the weights come back in their own format
    w_bwd = compute * (2 + full) / (3 + full) * overlap
    w_fwd = compute / (3 + full) * overlap
    mx = xp.maximum
    rs_b, ag_f = mx(0.0, rs - w_bwd), mx(0.0, ag - w_fwd)   # what the windows leave exposed
    slot_dp = (zero == 2) * rs_b + (zero == 3) * (ag_f + mx(0.0, ag + rs - w_bwd))
    tail_dp = (zero == 0) * mx(0.0, ar - w_bwd) + (zero == 1) * (rs_b + ag_f) + (zero == 2) * ag_f
    return tp_mb, ep_mb, cp_mb, pp_mb, slot_dp, tail_dp


def step_core(m: Transformer, c: Cluster, per_param, precision: str, gb, s, tp, pp, dp, cp, ep, b, M, v,
              zero, rc, sp, eager: bool, eta, overlap, tp_overlap, causal: bool = True, share=0.0,
              unfused: bool = False) -> dict:
    """Step time and its parts for broadcastable configurations (see the module docstring)."""
    xp = ops(gb, s, tp, pp, dp, cp, ep, b, M, v, zero, rc, sp, 0.0 if eta is None else eta, overlap, tp_overlap,
             share)
    hw = c.accelerator
    n_gpu = c.accelerators
    peak, hbm = hw.peak(precision), hw.memory_bw_Bps
    ab = bytes_per(precision)
    mem = memory_core(m, per_param, zero, tp, pp, dp, cp, ep, b, s, rc, sp, v, M, ab, eager, share)
    full = (rc == 2) + (rc != 2) * share   # the share of the layers whose forward runs twice
    # FLOPs of one micro-batch on one GPU of the busiest (last) stage
    L, d, V = m.layers, m.d_model, m.vocab
    attn_mm, mlp_dense, mlp_moe, pair_per_key = layer_matmuls(m)
    Ls = mem["stage_layers"]
    n_moe = xp.minimum(Ls, m.moe_layers)
    stage_mm = (Ls - n_moe) * (attn_mm + mlp_dense) + n_moe * (attn_mm + mlp_moe)
    # hardware attention FLOPs per token and layer: eager kernels compute the whole masked
    # score matrix; causal FlashAttention skips the tiles above the diagonal (half of them)
    pair = pair_per_key * s * (0.5 if causal and not eager else 1.0)
    again = (rc >= 1) + (rc == 0) * share   # share of the layers whose attention core runs twice
    att_mult = (3 + again) if eager else (3.5 + full)  # FlashAttention's backward: 2.5× forward
    tokens = b * s / cp
    flops = tokens * (2 * stage_mm * (3 + full) + 6 * V * d + Ls * pair * att_mult) / tp
    if eta is None:   # shape-aware kernel efficiency (mlsysim.kernels)
        plain = xp is _SCALAR and np.ndim(peak) == 0 and np.ndim(hbm) == 0   # specs may be swept too
        gs = _gemm_seconds_cached if plain else _gemm_seconds_swept
        dense_s, moe_s, head_s, core_s = gs(m, hw, precision, tokens, b, s, cp, tp, ep, full)
        if not eager and hw.attention_efficiency is not None:   # a fused kernel, not two GEMMs
            core_s = 1.0 / (hw.attention_efficiency * peak)
        attn_per_layer = tokens * pair * att_mult / tp * core_s
        gemm = (Ls - n_moe) * dense_s + n_moe * moe_s + head_s + Ls * attn_per_layer
    else:
        gemm = flops / (eta * peak)
        attn_per_layer = tokens * pair * att_mult / tp / (eta * peak)
    # memory-bound kernels: each activation written, read back and its gradient written; an
    # eager attention also streams its b·a·s² score tensors through HBM (fp16): 13 bytes per
    # score forward (QKᵀ out, softmax in/out, dropout in/out/mask, PV in), 21 backward, and
    # the forward again when recomputed
    scores = (ab / 2 * m.heads * s * (34 + 13 * again) / tp) if eager else 0.0
    if unfused:   # one kernel per PyTorch operator (mlsysim.elementwise), and an fp32 loss
        fwd_B, bwd_B = layer_bytes(m, ab, tp, sp)
        traffic = Ls * tokens * (fwd_B * (1 + full) + bwd_B + scores) + tokens * loss_bytes(m, ab, tp)
    else:
        traffic = Ls * (mem["layer_linear_B"] * (3 + full) + tokens * scores)
    stream = hbm if eta is not None else hbm * MEMORY_EFFICIENCY   # a given η lumps this in
    nongemm = traffic / stream + (0.0 if eta is not None else Ls * (3 + full) * LAYER_OVERHEAD_S)
    compute = gemm + nongemm
    tp_mb, ep_mb, cp_mb, pp_mb, slot_dp, tail_dp = _comm_s(m, c, xp, mem, per_param, tokens, b, s, tp, pp, dp, cp,
                                                           ep, v, zero, sp, ab, Ls, n_moe, full, attn_per_layer,
                                                           compute, overlap, tp_overlap)
    update = mem["grads_B"] + 2 * (mem["master_B"] + mem["optimizer_B"]) + mem["weights_B"]
    optimizer = update / stream
    slot = compute + tp_mb + ep_mb + cp_mb + pp_mb + slot_dp
    bubble = (pp - 1) / v * slot
    step = M * slot + bubble + tail_dp + optimizer
    # utilisation
    tokens_step = gb * s
    model_flops = tokens_step * 3 * (2 * m.matmul_params_per_token + pair_per_key * L * s)
    layers_mm = m.matmul_params_per_token - V * d
    hw_flops = tokens_step * (2 * layers_mm * (3 + full) + 6 * V * d + pair * L * att_mult)
    denominator = step * n_gpu * peak
    return dict(step_s=step, compute_s=M * compute, gemm_s=M * gemm, nongemm_s=M * nongemm,
                gemm_efficiency=flops / (gemm * peak), tp_comm_s=M * tp_mb, ep_comm_s=M * ep_mb,
                cp_comm_s=M * cp_mb, pp_comm_s=M * pp_mb, dp_comm_s=M * slot_dp + tail_dp, bubble_s=bubble,
                optimizer_s=optimizer, bubble_fraction=(pp - 1) / (v * M), model_flops=model_flops,
                hardware_flops=hw_flops, mfu=model_flops / denominator, hfu=hw_flops / denominator,
                tokens_per_s=tokens_step / step, memory_per_gpu_B=mem["total_B"], memory=mem)


# --- inputs -----------------------------------------------------------------
def _num(x, _plain=frozenset((int, float, bool))):
    return x if type(x) in _plain else np.asarray(x)


def _layout(c: Cluster, gb, tp, pp, dp, cp, micro_batch, microbatches, v):
    """Resolve dp, micro_batch b and micro-batch count M; (mask, reason) pairs for bad layouts."""
    n, g = c.accelerators, c.accelerators_per_node
    if dp is None:
        dp = n // (tp * pp * cp) if ops(tp, pp, cp) is _SCALAR else n // (np.asarray(tp) * pp * cp)
        dp = xp_max1(dp)
    bad = [(tp > g, f"tp exceeds the {g} GPUs of a node (tensor parallelism across nodes)"),
           (g % tp != 0, f"tp must divide the {g} GPUs of a node"),
           (tp * pp * dp * cp != n, f"tp × pp × dp × cp must equal the {n:,} GPUs of the cluster")]
    if microbatches is not None:
        M = microbatches
        b = gb // (dp * M) if ops(gb, dp, M) is _SCALAR else gb // (np.asarray(dp) * M)
        b = xp_max1(b)
    else:
        b = 1 if micro_batch is None else micro_batch
        M = gb // (dp * b) if ops(gb, dp, b) is _SCALAR else gb // (np.asarray(dp) * b)
        M = xp_max1(M)
    bad.append((dp * b * M != gb, "dp × micro_batch × microbatches must equal global_batch "
                                  "(micro-batches that do not divide the batch)"))
    bad.append(((v > 1) & (M % pp != 0), "the interleaved schedule needs microbatches divisible by pp"))
    return dp, b, M, bad


def xp_max1(x):
    return max(x, 1) if type(x) is int else np.maximum(x, 1)


@dataclass(frozen=True)
class TrainStep(Record):
    """Result of :func:`train_step`. Times in seconds per step; scalar or array fields.

    ``comm_s`` is the communication left exposed on the critical path (TP + EP + CP + PP
    + DP), ``bubble_s`` the pipeline's fill and drain; the parts add up to ``step_s``.
    """

    model: str
    cluster: str
    accelerators: int
    precision: str
    efficiency: object
    recompute: object
    attention: str
    zero_stage: object
    tp: object
    pp: object
    dp: object
    cp: object
    ep: object
    micro_batch: object
    microbatches: object
    interleave: object
    global_batch: object
    seq_len: object
    step_s: object
    compute_s: object
    gemm_s: object
    nongemm_s: object
    gemm_efficiency: object
    tp_comm_s: object
    ep_comm_s: object
    cp_comm_s: object
    pp_comm_s: object
    dp_comm_s: object
    bubble_s: object
    optimizer_s: object
    bubble_fraction: object
    model_flops: object
    hardware_flops: object
    mfu: object
    hfu: object
    tokens_per_s: object
    memory_per_gpu_B: object
    memory: TrainingMemory
    feasible: object
    reason: str = ""
    recompute_fraction: object = 0.0
    elementwise: str = "fused"
    grad_precision: str = ""      # the gradients' format where it is not ``precision``

    @property
    def comm_s(self):
        return self.tp_comm_s + self.ep_comm_s + self.cp_comm_s + self.pp_comm_s + self.dp_comm_s

    @property
    def achieved_flops_per_gpu(self):
        """Model FLOP/s per GPU (the "TFLOP/s per GPU" that papers report use their own count)."""
        return self.model_flops / (self.step_s * self.accelerators)

    def parts(self) -> dict:
        """The step time split into compute, exposed communication, bubble and optimizer (s)."""
        return {"compute": self.compute_s, "TP comm": self.tp_comm_s, "EP comm": self.ep_comm_s,
                "CP comm": self.cp_comm_s, "PP comm": self.pp_comm_s, "DP comm": self.dp_comm_s,
                "bubble": self.bubble_s, "optimizer": self.optimizer_s}

    def breakdown(self) -> dict:
        """The step time in eight parts that add up to ``step_s`` (s): GEMM compute, non-GEMM
        (memory-bound) kernels, exposed TP, PP, DP and CP + EP communication, the pipeline
        bubble and the optimizer update."""
        return {"GEMM": self.gemm_s, "non-GEMM memory": self.nongemm_s, "TP comm": self.tp_comm_s,
                "PP comm": self.pp_comm_s, "DP comm": self.dp_comm_s,
                "CP/EP comm": self.cp_comm_s + self.ep_comm_s, "bubble": self.bubble_s,
                "optimizer": self.optimizer_s}

    def rows(self) -> list[tuple[str, str]]:
        if np.ndim(self.step_s):
            return [("shape", str(np.shape(self.step_s))), ("feasible", f"{np.mean(self.feasible):.0%}"),
                    ("reason", self.reason or "-")]
        layout = (f"tp {self.tp} × cp {self.cp} × pp {self.pp} × dp {self.dp}"
                  + (f" (ep {self.ep})" if self.ep > 1 else "") + f" = {self.accelerators:,} GPUs")
        rows = [("model", self.model), ("cluster", self.cluster), ("layout", layout),
                ("batch", f"{self.global_batch} × {self.seq_len} tokens = {self.microbatches} micro-batches "
                          f"of {self.micro_batch}, interleave {self.interleave}"),
                ("settings", f"{self.precision}"
                             + (f" ({self.grad_precision} gradients)" if self.grad_precision else "")
                             + f", ZeRO-{self.zero_stage}, recompute {self.recompute}"
                             + (f" (+ {self.recompute_fraction:.0%} of the layers in full)"
                                if self.recompute_fraction and self.recompute != "full" else "")
                             + f", {self.attention} attention, {self.elementwise} element-wise kernels"),
                ("GEMM efficiency", f"{self.gemm_efficiency:.2f} of peak"
                                    + (" (shape-aware)" if self.efficiency == SHAPE_AWARE else " (given)")),
                ("step time", fmt(self.step_s, "s"))]
        rows += [(f"  {k}", f"{fmt(v, 's')} ({v / self.step_s:.1%})") for k, v in self.breakdown().items() if v > 0]
        rows += [("bubble (p−1)/(v·m)", f"{self.bubble_fraction:.3g}"),
                 ("tokens/s", fmt(self.tokens_per_s)), ("MFU", f"{self.mfu:.1%}"), ("HFU", f"{self.hfu:.1%}"),
                 ("memory per GPU", f"{fmt(self.memory_per_gpu_B, 'B')} of {fmt(self.memory.capacity_B, 'B')}")]
        return rows


_TIMES = ("step_s", "compute_s", "gemm_s", "nongemm_s", "gemm_efficiency", "tp_comm_s", "ep_comm_s", "cp_comm_s", "pp_comm_s", "dp_comm_s", "bubble_s",
          "optimizer_s", "bubble_fraction", "mfu", "hfu", "tokens_per_s", "memory_per_gpu_B")


def _prepare(m, c, precision, optimizer, attention, efficiency, overlap, tp_overlap, recompute_fraction=0.0,
             elementwise="fused", grad_precision=None):
    m, c = _model(m), _cluster(c)
    if not isinstance(m, Transformer):
        raise MlsysimError(f"train_step models Transformers; {m.name} is a {type(m).__name__}")
    if not isinstance(attention, str) or attention not in ATTENTION:
        raise UnknownNameError("attention", attention, ATTENTION)
    if not isinstance(elementwise, str) or elementwise not in ELEMENTWISE:
        raise UnknownNameError("elementwise", elementwise, ELEMENTWISE)
    check_share("recompute_fraction", recompute_fraction)
    if efficiency is not None:
        check_fraction("efficiency", efficiency)
    check_share("overlap", overlap)
    check_share("tp_overlap", tp_overlap)
    c.accelerator.peak(precision)
    opt = _optimizer_cached(optimizer) if isinstance(optimizer, str) else _optimizer(optimizer)
    return m, c, opt, bytes_per_param(m, opt, precision, grad_precision)


@functools.lru_cache(maxsize=64)
def _optimizer_cached(name: str):
    return _optimizer(name)


def _fit_or_mask(m, c, r, bad, reason, scalar):
    """Raise where a scalar step does not fit in memory; for arrays, NaN the times of bad or unfitting entries."""
    mem = r.pop("memory")
    fits = mem["total_B"] <= c.accelerator.memory_B
    if scalar:
        if not fits:
            raise InfeasibleError(
                f"{m.name} needs {fmt(mem['total_B'], 'B', 4)} per GPU ({fmt(mem['activations_B'], 'B')} of "
                f"activations, {fmt(mem['weights_B'] + mem['grads_B'] + mem['master_B'] + mem['optimizer_B'], 'B')}"
                f" of model states) but {c.accelerator.name} has {fmt(c.accelerator.memory_B, 'B', 4)}: "
                f"raise tp, pp or the ZeRO stage, recompute more, or shrink the micro-batch")
        feasible = True
    else:
        feasible = ~np.asarray(bad) & fits
        if not np.all(fits | np.asarray(bad)):
            n = int(np.count_nonzero(~fits & ~np.asarray(bad)))
            reason = "; ".join(filter(None, [reason, f"does not fit in {fmt(c.accelerator.memory_B, 'B')} ({n})"]))
        shape = np.broadcast_shapes(*(np.shape(v_) for v_ in r.values() if not isinstance(v_, dict)))
        feasible = np.broadcast_to(feasible, shape)
        r = {k: (np.where(feasible, np.broadcast_to(val, shape), np.nan) if k in _TIMES else val)
             for k, val in r.items()}
    return mem, r, feasible, reason


def _memory_record(m, c, mem, opt, precision, rc, attention, zero, tp, pp, dp, cp, ep, b, s, v, feasible, share):
    """The :class:`~mlsysim.memory.TrainingMemory` record of a step's memory dictionary."""
    return record(
        TrainingMemory, model=m.name, optimizer=opt.name, precision=precision, recompute=_names(rc),
        attention=attention, zero_stage=zero, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, micro_batch=b, seq_len=s, interleave=v,
        weights_B=mem["weights_B"], grads_B=mem["grads_B"], master_B=mem["master_B"],
        optimizer_B=mem["optimizer_B"], activations_B=mem["activations_B"], buffers_B=mem["buffers_B"],
        total_B=mem["total_B"], params_per_gpu=mem["params_per_gpu"], layer_activation_B=mem["layer_activation_B"],
        layers_in_flight=mem["layers_in_flight"], capacity_B=c.accelerator.memory_B, feasible=feasible, reason="",
        recompute_fraction=share)


def train_step(m, c, global_batch, seq_len, tp=8, pp=8, dp=None, microbatches=None, interleave=1,
               precision: str = "bf16", efficiency=None, *, micro_batch=None, cp=1, ep=1,
               zero_stage=1, optimizer: str = "adam", recompute="selective", sequence_parallel=True,
               attention: str = "flash", causal: bool = True, overlap=1.0, tp_overlap=0.0, recompute_fraction=0.0,
               elementwise: str = "fused", grad_precision: str | None = None) -> TrainStep:
    """Time of one training step of ``m`` on cluster ``c`` (see the module docstring).

    Parameters
    ----------
    global_batch : sequences per step; seq_len : tokens per sequence.
    tp, pp, dp, cp, ep : parallel degrees; ``dp=None`` takes the GPUs left over.
    microbatches or micro_batch : micro-batches per step and replica (m), or sequences per
        micro-batch (b); b = 1 when neither is given. global_batch = dp · b · m.
    interleave : model chunks per GPU (v) of the interleaved 1F1B schedule.
    precision : the format of weights, activations and the peak used.
    efficiency : ``None`` (default) times each matrix multiply from its shape
        (:mod:`mlsysim.kernels`); a number η in (0, 1] times all of them at η · peak.
    zero_stage, optimizer, recompute, recompute_fraction, sequence_parallel, attention, grad_precision :
        as in :func:`~mlsysim.memory.training_memory` (``recompute_fraction`` re-runs the forward of that
        share of the other layers; ``grad_precision`` also sets the bytes the data-parallel
        gradient reduction moves).
    elementwise : "fused" (default: Megatron-LM, Transformer Engine, torch.compile) charges the
        memory-bound kernels 3 × the saved activations; "eager" counts plain PyTorch's
        one-kernel-per-operator traffic and its fp32 loss (:mod:`mlsysim.elementwise`).
    overlap : usable fraction of the backward (forward) pass that hides the data-parallel
        gradient reduce-scatter/all-reduce (weight all-gather); 0 means fully exposed.
    tp_overlap : fraction of the TP collectives hidden behind GEMMs (0 in Megatron-LM 2022;
        Transformer Engine's comm–GEMM overlap hides most of it).
    causal : a causal FlashAttention kernel skips the masked half of the scores (the MFU
        convention still counts every pair).

    Every numeric argument may be an array. A scalar configuration that breaks a rule (TP
    across nodes, TP not dividing the heads, PP deeper than the layers, micro-batches that do
    not divide the batch, degrees whose product is not the GPU count) or does not fit in
    memory raises a :class:`~mlsysim.errors.MlsysimError`; arrays give NaN and ``feasible`` False
    there, and at fractional entries of a count (a fractional scalar count raises).

    >>> import mlsysim as ms
    >>> c = ms.cluster("dgx-a100", nodes=8)
    >>> r = ms.train_step("gpt-3", c, global_batch=64, seq_len=2048, tp=8, pp=8, attention="eager",
    ...                   efficiency=0.70)
    >>> round(r.step_s, 1), round(r.mfu, 3)   # Korthikanti et al. 2022: 13.75 s, 51.4 %
    (13.8, 0.513)
    """
    m, c, opt, per_param = _prepare(m, c, precision, optimizer, attention, efficiency, overlap, tp_overlap,
                                    recompute_fraction, elementwise, grad_precision)
    fractional = fractional_counts(global_batch=global_batch, seq_len=seq_len, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep,
                                   micro_batch=micro_batch, microbatches=microbatches, interleave=interleave)
    fractional += zero_stage_rules(zero_stage)
    if microbatches is not None and micro_batch is not None:
        raise MlsysimError("give microbatches or micro_batch, not both")
    rc = recompute_code(recompute)
    gb, s, tp, pp, cp, ep, v, zero = [_num(x) for x in (global_batch, seq_len, tp, pp, cp, ep, interleave,
                                                         zero_stage)]
    dp, b, M, bad_layout = _layout(c, gb, tp, pp, _num_or_none(dp), cp, _num_or_none(micro_batch),
                                   _num_or_none(microbatches), v)
    sp, ov, tov, share = [_num(x) for x in (sequence_parallel, overlap, tp_overlap, recompute_fraction)]
    eta = None if efficiency is None else _num(efficiency)
    scalar = ops(gb, s, tp, pp, dp, cp, ep, b, M, v, zero, rc, sp, 0.0 if eta is None else eta, ov, tov,
                 share) is _SCALAR
    bad, reason = raise_or_mask(fractional + bad_layout[:2] + structure_violations(m, tp, pp, cp, ep, dp, v, s)
                                + bad_layout[2:], scalar,
                                lambda: f"tp {tp}, pp {pp}, dp {dp}, cp {cp}, ep {ep}, micro_batch {b}, "
                                        f"microbatches {M}, interleave {v}")
    if not scalar:  # keep the arithmetic valid where the layout is impossible; masked below
        dp, b, M = (np.where(bad, 1, x) for x in np.broadcast_arrays(dp, b, M))
        tp = np.where(bad, 1, tp)
    r = step_core(m, c, per_param, precision, gb, s, tp, pp, dp, cp, ep, b, M, v, zero, rc, sp,
                  attention == "eager", eta, ov, tov, causal, share, elementwise == "eager")
    mem, r, feasible, reason = _fit_or_mask(m, c, r, bad, reason, scalar)
    memory = _memory_record(m, c, mem, opt, precision, rc, attention, zero, tp, pp, dp, cp, ep, b, s, v, feasible,
                            share)
    return record(TrainStep, model=m.name, cluster=c.name, accelerators=c.accelerators, precision=precision,
                     efficiency=SHAPE_AWARE if eta is None else eta, recompute=_names(rc), attention=attention, zero_stage=zero, tp=tp, pp=pp,
                     dp=dp, cp=cp, ep=ep, micro_batch=b, microbatches=M, interleave=v, global_batch=gb,
                     seq_len=s, memory=memory, feasible=feasible, reason=reason, recompute_fraction=share,
                     elementwise=elementwise, grad_precision=_other(grad_precision, precision), **r)


def _other(grad_precision, precision) -> str:
    """The gradients' format when it differs from ``precision``, else ""."""
    if grad_precision is None or bytes_per(grad_precision) == bytes_per(precision):
        return ""
    return grad_precision


def _num_or_none(x):
    return None if x is None else _num(x)


def _names(rc):
    return RECOMPUTE[rc] if type(rc) is int or np.ndim(rc) == 0 else tuple(RECOMPUTE[i] for i in np.ravel(rc))


# --- the search --------------------------------------------------------------
def _divisors(n: int) -> list[int]:
    return [k for k in range(1, int(n) + 1) if n % k == 0]


@dataclass(frozen=True)
class ParallelSearch:
    """Result of :func:`best_parallelism`: the fastest feasible layout, a ranked table of the
    ``top`` fastest, and how many candidates each rule excluded."""

    best: TrainStep
    ranking: object        # a Table
    evaluated: int
    feasible: int
    excluded: dict

    def rows(self) -> list[tuple[str, str]]:
        b = self.best
        return [("candidates", f"{self.evaluated:,} ({self.feasible:,} feasible)"),
                ("best layout", f"tp {b.tp}, cp {b.cp}, pp {b.pp}, dp {b.dp}, ep {b.ep}, micro-batch {b.micro_batch}, "
                                f"interleave {b.interleave}, ZeRO-{b.zero_stage}, {b.recompute} recompute"),
                ("step time", fmt(b.step_s, "s")), ("MFU", f"{b.mfu:.1%}"),
                ("memory per GPU", fmt(b.memory_per_gpu_B, "B"))] + \
            [(f"excluded: {k}", f"{v:,}") for k, v in self.excluded.items()]

    def __str__(self) -> str:
        rows = self.rows()
        w = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{w}}  {v}" for k, v in rows) + "\n\n" + str(self.ranking)

    def _repr_html_(self) -> str:
        cells = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{v}</td></tr>" for k, v in self.rows())
        return f"<table>{cells}</table>" + self.ranking._repr_html_()


def _screen(m, n, g, global_batch, seq_len, cands):
    """Apply the layout rules to the candidate grid: the passing layouts, the grid size, counts excluded per rule."""
    names, fractional = dict(b="micro_batch", v="interleave", zero="zero_stage"), []
    for k, vals in cands.items():
        one = isinstance(vals, (str, bytes)) or np.ndim(vals) == 0
        if one:   # one value: a single candidate, refused if it is not a whole number
            cands[k] = vals = [vals]
        if len(vals) == 0:
            raise MlsysimError(f"no candidates given for {names.get(k, k)}")
        if k not in ("rc", "rf"):
            low = 0 if k == "zero" else 1
            if one:
                check_integer(names.get(k, k), vals, minimum=low)
            elif check_count(names.get(k, k), vals, minimum=low) is not None:
                fractional.append(k)   # a list with fractional candidates: those are excluded below
    grids = np.meshgrid(*(np.asarray(v, dtype=float if fractional or k == "rf" else np.int64)
                          for k, v in cands.items()), indexing="ij")
    tp_, pp_, cp_, ep_, b_, v_, z_, rc_, rf_ = flat = [a.ravel() for a in grids]
    total = tp_.size
    dp_ = n // (tp_ * pp_ * cp_)
    M_ = global_batch // np.maximum(dp_ * b_, 1)
    rules = [(flat[list(cands).index(k)] % 1 != 0, f"{names.get(k, k)} must be a whole number") for k in fractional]
    rules += [(tp_ * pp_ * cp_ * dp_ != n, "tp × pp × cp does not divide the GPU count"),
             (tp_ > g, "tensor parallelism across nodes"), (g % tp_ != 0, "tp does not divide the GPUs per node"),
             (dp_ * b_ * M_ != global_batch, "dp × micro-batch does not divide the global batch")]
    rules += structure_violations(m, tp_, pp_, cp_, ep_, dp_, v_, seq_len)
    rules += [((v_ > 1) & (M_ % pp_ != 0), "interleaving needs micro-batches divisible by pp"),
              ((v_ > 1) & (M_ < pp_), "interleaving needs at least pp micro-batches"),
              ((rc_ == 2) & (rf_ > 0), "full recomputation already re-runs every layer")]
    excluded, bad = {}, np.zeros(total, dtype=bool)
    for mask, reason in rules:
        new = np.asarray(mask) & ~bad
        if new.any():
            excluded[reason] = excluded.get(reason, 0) + int(new.sum())
            bad |= new
    keep = np.flatnonzero(~bad)
    if keep.size == 0:
        raise InfeasibleError(f"no layout of {m.name} on {n:,} GPUs passes the rules: "
                              + "; ".join(f"{k} ({v:,})" for k, v in excluded.items()))
    sel = {k: a[keep] for k, a in dict(tp=tp_, pp=pp_, cp=cp_, ep=ep_, b=b_, v=v_, z=z_, rc=rc_, rf=rf_,
                                        dp=dp_, M=M_).items()}
    return sel, total, excluded


def best_parallelism(m, c, global_batch: int, seq_len: int, *, tp=None, pp=None, cp=(1,), ep=None,
                     micro_batch=None, interleave=(1, 2, 4), zero_stage=(0, 1, 2, 3), recompute=None,
                     precision: str = "bf16", efficiency=None, optimizer: str = "adam",
                     sequence_parallel: bool = True, attention: str = "flash", causal: bool = True,
                     overlap=1.0, tp_overlap=0.0, recompute_fraction=0.0, elementwise: str = "fused",
                     grad_precision: str | None = None, top: int = 10) -> ParallelSearch:
    """Evaluate every valid (tp, cp, pp, dp, ep, micro-batch, interleave, ZeRO stage,
    recomputation) layout of ``m`` on ``c`` at once and rank the feasible ones by step time.

    Candidates default to: tp the divisors of the GPUs per node, pp the divisors of the GPU
    count, dp the GPUs left over, micro-batches the divisors of ``global_batch``, ep 1 (the
    divisors of the expert count for a MoE), recomputation none and full (and selective for
    eager attention; with FlashAttention it equals none) and no share of the other layers
    recomputed in full (``recompute_fraction``). Each may be given as a sequence
    (``recompute_fraction=(0, 0.25, 0.5)`` lets the search weigh recomputing more against a
    smaller step). The whole grid is one broadcast evaluation of the step model of :func:`train_step`.
    Excluded candidates are counted under the first rule they break (a fractional candidate in
    a sequence, under "… must be a whole number"; a single fractional value raises).

    >>> import mlsysim as ms
    >>> s = ms.best_parallelism("llama-3-70b", ms.cluster("dgx-h100", nodes=128), 1024, 4096)
    >>> s.evaluated, s.feasible, s.best.tp * s.best.pp * s.best.dp   # 4 tp × 11 pp × 11 b × 3 v × 4 × 2
    (11616, 1112, 1024)
    """
    m, c, opt, per_param = _prepare(m, c, precision, optimizer, attention, efficiency, overlap, tp_overlap,
                                    recompute_fraction, elementwise, grad_precision)
    for name, value in (("global_batch", global_batch), ("seq_len", seq_len)):
        check_single_count(name, value, why=": one search per batch and sequence length")
    check_single_count("top", top)
    for name, value in (("efficiency", efficiency), ("overlap", overlap), ("tp_overlap", tp_overlap)):
        if np.ndim(value) != 0:
            raise MlsysimError(f"{name} must be one number in a search (sweep it with train_step), "
                               f"got {np.shape(value)} values")
    n, g = c.accelerators, c.accelerators_per_node
    if recompute is None:
        recompute = RECOMPUTE if attention == "eager" else ("none", "full")
    pick = lambda given, default: default if given is None else given  # noqa: E731
    cands = dict(tp=pick(tp, _divisors(g)), pp=pick(pp, _divisors(n)), cp=cp,
                 ep=pick(ep, _divisors(m.experts) if m.is_moe else (1,)),
                 b=pick(micro_batch, _divisors(global_batch)), v=interleave, zero=zero_stage,
                 rc=[recompute_code(r) for r in ([recompute] if isinstance(recompute, str) else recompute)],
                 rf=np.atleast_1d(np.asarray(recompute_fraction, dtype=float)).ravel())
    sel, total, excluded = _screen(m, n, g, global_batch, seq_len, cands)
    r = step_core(m, c, per_param, precision, global_batch, seq_len, sel["tp"], sel["pp"], sel["dp"], sel["cp"],
                  sel["ep"], sel["b"], sel["M"], sel["v"], sel["z"], sel["rc"], sequence_parallel,
                  attention == "eager", efficiency, overlap, tp_overlap, causal, sel["rf"],
                  elementwise == "eager")
    mem = r["memory_per_gpu_B"]
    fits = mem <= c.accelerator.memory_B
    if (~fits).any():
        excluded[f"does not fit in {fmt(c.accelerator.memory_B, 'B')}"] = int((~fits).sum())
    if not fits.any():
        raise InfeasibleError(f"no layout of {m.name} on {n:,} GPUs fits in the {fmt(c.accelerator.memory_B, 'B')}"
                              f" of an {c.accelerator.name} ({sel['tp'].size:,} candidates pass the other rules)")
    ok = np.flatnonzero(fits)
    order = ok[np.lexsort((mem[ok], r["step_s"][ok]))]
    rows = []
    for i in order[:top]:
        rows.append({"tp": int(sel["tp"][i]), "cp": int(sel["cp"][i]), "pp": int(sel["pp"][i]),
                     "dp": int(sel["dp"][i]), **({"ep": int(sel["ep"][i])} if m.is_moe else {}),
                     "micro-batch": int(sel["b"][i]), "micro-batches": int(sel["M"][i]), "v": int(sel["v"][i]),
                     "ZeRO": int(sel["z"][i]),
                     "recompute": RECOMPUTE[int(sel["rc"][i])] + (f" + {sel['rf'][i]:.0%} full" if sel["rf"][i] else ""),
                     "step": fmt(r["step_s"][i], "s"), "MFU": f"{r['mfu'][i]:.1%}",
                     "bubble": f"{r['bubble_s'][i] / r['step_s'][i]:.0%}",
                     "comm": f"{(r['step_s'][i] - r['compute_s'][i] - r['bubble_s'][i]) / r['step_s'][i]:.0%}",
                     "memory": fmt(mem[i], "B")})
    i = order[0]
    best = train_step(m, c, global_batch, seq_len, tp=int(sel["tp"][i]), pp=int(sel["pp"][i]),
                      dp=int(sel["dp"][i]), micro_batch=int(sel["b"][i]), interleave=int(sel["v"][i]),
                      precision=precision, efficiency=efficiency, cp=int(sel["cp"][i]), ep=int(sel["ep"][i]),
                      zero_stage=int(sel["z"][i]), optimizer=opt, recompute=RECOMPUTE[int(sel["rc"][i])],
                      sequence_parallel=sequence_parallel, attention=attention, causal=causal, overlap=overlap,
                      tp_overlap=tp_overlap, recompute_fraction=float(sel["rf"][i]), elementwise=elementwise,
                      grad_precision=grad_precision)
    title = f"{m.name} on {n:,} × {c.accelerator.name}, {global_batch} × {seq_len} tokens per step: fastest layouts"
    return ParallelSearch(best=best, ranking=table(rows, title=title), evaluated=total, feasible=int(fits.sum()),
                          excluded=excluded)


# --- FLOP accounting ---------------------------------------------------------
def training_flops(m, tokens, seq_len, recompute=None, attention: str = "flash", causal: bool = True,
                   include_attention: bool = True):
    """FLOPs to train on ``tokens`` tokens of sequences of ``seq_len``.

    ``recompute=None`` gives the *model* FLOPs of MFU: 3 × (2·N_matmul + F_att·seq_len) per
    token, every query–key pair counted (PaLM App. B: 6N + 12·L·H·Q·T). A strategy name
    gives the *hardware* FLOPs of HFU: full recomputation re-runs the layers' forward;
    eager attention re-runs the score computation under selective recomputation;
    FlashAttention's backward re-computes the scores (2.5× its forward) and a causal
    kernel skips half of the pairs.

    >>> import mlsysim as ms
    >>> round(training_flops("gpt-3", 300e9, 2048) / 1e23, 2)   # 6·N·T = 3.14e23 plus attention
    3.23
    """
    m = _model(m)
    check_positive("tokens", tokens)          # a token budget (or a rate in mfu), not a count of items
    check_integer("seq_len", seq_len)
    pairs = m.attention_flops_per_pair() * seq_len if include_attention else 0.0
    if recompute is None:
        return tokens * 3 * (2 * m.matmul_params_per_token + pairs)
    rc = recompute_code(recompute)
    if attention not in ATTENTION:
        raise UnknownNameError("attention", attention, ATTENTION)
    eager = attention == "eager"
    hw_pairs = pairs * (0.5 if causal and not eager else 1.0)
    att = (3 + (rc >= 1)) if eager else (3.5 + (rc == 2))
    head = m.vocab * m.d_model
    return tokens * (2 * (m.matmul_params_per_token - head) * (3 + (rc == 2)) + 6 * head + hw_pairs * att)


def mfu(m, hardware, accelerators, tokens_per_s, seq_len, precision: str = "bf16", recompute=None,
        include_attention: bool = True, **kw):
    """Model FLOPs utilisation of a run that trains ``tokens_per_s`` on ``accelerators`` devices
    (HFU with a ``recompute`` strategy; see :func:`training_flops`).

    >>> round(mfu("palm", "tpu-v4", 6144, 238.3e3, 2048), 3)   # PaLM Table 3: 46.2 %
    0.462
    """
    check_integer("accelerators", accelerators)
    check_positive("tokens_per_s", tokens_per_s)
    flops = training_flops(m, tokens_per_s, seq_len, recompute, include_attention=include_attention, **kw)
    return flops / (accelerators * _hardware(hardware).peak(precision))


def time_to_train_s(flops, accelerators, flops_per_s_per_accelerator):
    """Wall time to perform ``flops`` at a sustained rate per device: F / (n · X).

    With F = 8·T·P (forward, backward and a recomputed forward) this is Narayanan et al.
    2021's Eq. 4: GPT-3 (P = 175e9, T = 300e9) on 1,024 A100s at 140 TFLOP/s takes 34 days.

    >>> round(time_to_train_s(8 * 300e9 * 175e9, 1024, 140e12) / 86400, 1)
    33.9
    """
    check_positive("flops", flops)
    check_integer("accelerators", accelerators)
    check_positive("flops_per_s_per_accelerator", flops_per_s_per_accelerator)
    return flops / (accelerators * flops_per_s_per_accelerator)
