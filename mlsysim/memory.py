"""Training memory per GPU: model states, activations, ZeRO sharding and model parallelism.

**Model states** (Rajbhandari et al., SC'20, "ZeRO", §3 and Fig. 1). Mixed-precision
training with Adam keeps, per parameter, 16-bit weights (2 B) and gradients (2 B) plus
K = 12 B of fp32 master weights and moments; Ψ parameters replicated on N data-parallel
ranks need, per GPU,

    DDP 16Ψ,   ZeRO-1 4Ψ + 12Ψ/N,   ZeRO-2 2Ψ + 14Ψ/N,   ZeRO-3 (FSDP) 16Ψ/N.

Other optimizers change K (``optimizers.training_state``). ``grad_precision="fp32"`` keeps the
gradients in 4 bytes, as bf16 runs usually do (Megatron-LM's distributed optimizer: 6Ψ + 12Ψ/N
for ZeRO-1). Tensor parallelism (TP, degree
t) splits every weight matrix of a layer t ways (norms stay replicated; K/V projections
are replicated when t exceeds the KV heads); pipeline parallelism (PP, p stages, each
of ⌈L/(p·v)⌉·v layers) keeps one stage per GPU, the embedding on the first stage and the
output head on the last; expert parallelism (EP, degree e, carved out of the data-parallel
ranks) spreads a MoE layer's routed experts over e GPUs, so their gradients and
optimizer states are sharded only over the N/e ranks that hold the same experts. Context
parallelism (CP, degree c) splits each sequence c ways; it joins the ZeRO group
(N = dp·cp), as in Megatron-LM's distributed optimizer. ZeRO-3 also keeps the gathered
weights of two layers (the one computing and the one prefetched).

**Activations** per layer of a micro-batch of b sequences of s tokens, per GPU:

* ``attention="eager"`` — Korthikanti et al. 2022, §4 and Table 2, for a GPT block with
  dropout (16-bit activations, 1-byte dropout masks): s·b·h·(34 + 5·a·s/h) bytes, of which
  5·a·s²·b are the attention scores, softmax output and its dropout mask. With TP only the
  10·s·b·h in the layer norms and dropouts stay replicated: s·b·h·(10 + 24/t + 5·a·s/(h·t));
  sequence parallelism (SP) splits those too: s·b·h·(34 + 5·a·s/h)/t. *Selective*
  recomputation drops the 5·a·s²·b term (recomputed in the backward pass); *full*
  recomputation keeps only each layer's input, 2·s·b·h (divided by t with SP, because the
  input is stored in the sequence-parallel layout).
* ``attention="flash"`` (default) — modern blocks (FlashAttention, GQA, SwiGLU, RMSNorm,
  no dropout) never store the score matrix. Of ``Transformer.saved_activation_elements``
  (everything a forward pass writes: 18·h per token for a GPT block) the backward pass
  reads all but the outputs of the attention and MLP output projections, whose gradient
  passes through the residual unchanged: a layer keeps saved_activation_elements − 2·h
  per token (the two norm inputs and outputs, Q/K/V, the attention output, the MLP up/gate
  and activation outputs; 16·h = 32 bytes per token for a GPT block in bf16, against
  Korthikanti's 34 with dropout masks) plus FlashAttention's fp32 log-sum-exp per head.
  Four h-sized tensors of them (norm inputs and outputs) stay replicated under TP without
  SP. Selective recomputation then equals none; full keeps the layer input (h elements).

Full recomputation also holds one layer's full activations while that layer is
recomputed and back-propagated. ``recompute_fraction`` r recomputes a share r of the other
layers in full (torchtitan's "selective layer" checkpointing, Megatron-LM's
``--recompute-num-layers``): those keep only their input, the rest what ``recompute`` keeps,
and the working copy of one full layer is held as soon as r > 0. The last stage stores the
output layer's input and the fp32 logits of the loss, 4·s·b·V/t bytes (Korthikanti §4.3).

**Pipeline in flight.** With 1F1B (PipeDream-Flush, Narayanan et al. 2021) the first stage
holds min(p, m) micro-batches of activations, i.e. the activations of L layers for one
micro-batch when m ≥ p; the last stage holds one. The interleaved schedule with v chunks
per GPU warms up with p·(v+1) − 1 chunk-micro-batches on the first GPU, i.e.
L·(1 + (p−1)/(p·v)) layers' worth (Korthikanti §4.2.3).

The peak is taken over the first and the last stage. Not counted: the CUDA context,
allocator fragmentation, communication buckets and temporary workspaces (a few GB).

Worked numbers (tested): GPT-3 175B layer (h = 12,288, a = 96, s = 2,048, b = 1), eager,
no parallelism: s·b·h·(34 + 5·a·s/h) = 2.87 GB; with t = 8, SP and selective
recomputation 34·s·b·h/t = 107 MB. Model states of a 7.5B model under pure DP: 120 GB.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from .tables import Record
from .errors import InfeasibleError, MlsysimError, UnknownNameError, check_count, check_integer, check_positive, \
    check_share, fractional_counts
from .optimizers import _optimizer, training_state
from .registry import hardware as _hardware, model as _model
from .units import BYTES_PER_ELEMENT, PRECISIONS, bytes_per, fmt
from .workloads import Transformer

RECOMPUTE = ("none", "selective", "full")
ATTENTION = ("flash", "eager")
ZERO_STAGES = (0, 1, 2, 3)

_SCALAR = SimpleNamespace(maximum=max, minimum=min, ceil=math.ceil,
                          where=lambda c, a, b: a if c else b)
_ARRAY = SimpleNamespace(maximum=np.maximum, minimum=np.minimum, ceil=np.ceil, where=np.where)


_PLAIN = frozenset((int, float, bool))


def record(cls, **values):
    """An instance of the frozen dataclass ``cls`` built without its per-field ``__init__``
    checks (every field must be given); about ten times faster for 40-field results."""
    obj = object.__new__(cls)
    obj.__dict__.update(values)
    return obj


def ops(*values):
    """Plain-float operations when every value is a Python number, NumPy's otherwise."""
    for v in values:
        if type(v) not in _PLAIN:
            return _ARRAY
    return _SCALAR


@dataclass(frozen=True)
class _Params:
    """A bare parameter count, for the model-state formula without a model record."""

    params: float

    def weight_matrices(self):
        raise MlsysimError("a factored optimizer (Adafactor) needs a model record, not a parameter count")


@functools.lru_cache(maxsize=256)
def bytes_per_param(model, optimizer="adamw", precision: str = "bf16",
                    grad_precision: str | None = None) -> tuple[float, float, float, float]:
    """(weights, gradients, master, optimizer) bytes per parameter, from ``training_state``."""
    if grad_precision is not None and (type(grad_precision) is not str
                                       or grad_precision.lower() not in BYTES_PER_ELEMENT):
        raise UnknownNameError("grad_precision", grad_precision, PRECISIONS)
    st = training_state(model, optimizer, precision, grad_precision)
    p = model.params
    return st.weights_B / p, st.grads_B / p, st.master_B / p, st.optimizer_B / p


def recompute_code(recompute):
    """0, 1, 2 for "none", "selective", "full" (an array for a list of names)."""
    if isinstance(recompute, str):
        try:
            return RECOMPUTE.index(recompute)
        except ValueError:
            raise UnknownNameError("recompute strategy", recompute, RECOMPUTE) from None
    return np.array([recompute_code(r) for r in np.ravel(recompute)]).reshape(np.shape(recompute))


def model_states_B(params, zero_stage: int = 0, dp: int = 1, optimizer: str = "adamw",
                   precision: str = "bf16"):
    """Per-GPU bytes of weights + gradients + master copy + optimizer states of ``params``
    parameters (a count, a model record or name) replicated over ``dp`` ranks (ZeRO §3).
    ``dp`` may be an array: NaN at its fractional entries.

    >>> round(model_states_B(7.5e9) / 1e9), round(model_states_B(7.5e9, 3, 64) / 1e9, 3)
    (120, 1.875)
    """
    whole = check_count("dp", dp)                # an array: NaN at its fractional entries
    check_integer("zero_stage", zero_stage, minimum=0)
    if zero_stage not in ZERO_STAGES:
        raise MlsysimError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage!r}")
    m = _model(params) if isinstance(params, str) else params
    if not hasattr(m, "params"):
        check_positive("params", m)
        m = _Params(float(m))
    check_positive("params", m.params)
    w, g, ms_, o = bytes_per_param(m, optimizer, precision)
    f = [1.0 if zero_stage < k else 1.0 / _num(dp) for k in (1, 2, 3)]
    out = (w * f[2] + g * f[1] + (ms_ + o) * f[0]) * m.params
    return out if whole is None else np.where(whole, out, np.nan)


# --- the broadcastable core ------------------------------------------------
def layer_params(m: Transformer, tp):
    """Per-GPU parameters of one dense layer, and of one MoE layer split into its
    replicated part and its routed experts (before dividing the experts by EP)."""
    kv_w = 0 if m.is_mla else 2 * m.d_model * m.kv_heads * m.head_dim
    xp = ops(tp)
    attn = (m.attention_params - kv_w) / tp + kv_w / xp.minimum(tp, m.kv_heads)
    base = attn + m.layer_norm_params
    dense = base + m.dense_mlp_params / tp
    moe_shared = base + m.router_params + m.shared_experts * m.expert_params / tp
    experts = m.experts * m.expert_params / tp
    return dense, moe_shared, experts


def stage_layers(m: Transformer, pp, v):
    """Layers of the busiest pipeline stage: ⌈L/(p·v)⌉ per chunk, v chunks."""
    return ops(pp, v).ceil(m.layers / (pp * v)) * v


def memory_core(m: Transformer, per_param, zero, tp, pp, dp, cp, ep, b, s, rc, sp, v, M,
                abytes: float, eager: bool, share=0.0) -> dict:
    """Per-GPU training memory of the heavier of the first and last pipeline stage.

    Every numeric argument may be an array (they broadcast); ``rc`` is 0/1/2 for
    none/selective/full recomputation, ``sp`` is 0/1, ``M`` the micro-batches per step,
    ``share`` the fraction of the other layers that recompute in full all the same.
    """
    xp = ops(zero, tp, pp, dp, cp, ep, b, s, rc, sp, v, M, share)
    w, g, mst, opt = per_param
    d, heads, V, L = m.d_model, m.heads, m.vocab, m.layers
    # parameters on one GPU of the busiest stage
    dense, moe_shared, experts = layer_params(m, tp)
    Ls = stage_layers(m, pp, v)
    n_moe = xp.minimum(Ls, m.moe_layers)
    psi_layers = (Ls - n_moe) * dense + n_moe * moe_shared
    psi_e = n_moe * experts / ep
    one = pp == 1
    head_copy = m.head_params if m.head_params else V * d
    first_extra = m.embedding_params / tp + one * (m.head_params / tp + d)
    last_extra = xp.where(one, first_extra, head_copy / tp + d)
    # ZeRO shards over dp·cp ranks (routed experts over dp·cp/ep): the fraction of each state kept
    n_d, n_e = dp * cp, dp * cp / ep
    z1, z2, z3 = zero >= 1, zero >= 2, zero >= 3
    f1d, f2d, f3d = 1 + z1 * (1 / n_d - 1), 1 + z2 * (1 / n_d - 1), 1 + z3 * (1 / n_d - 1)
    f1e, f2e, f3e = 1 + z1 * (1 / n_e - 1), 1 + z2 * (1 / n_e - 1), 1 + z3 * (1 / n_e - 1)
    per_dense = w * f3d + g * f2d + (mst + opt) * f1d      # bytes per replicated parameter
    experts_B = psi_e * (w * f3e + g * f2e + (mst + opt) * f1e)
    gather = z3 * (n_d > 1) * 2 * w * xp.maximum(dense, moe_shared + experts / ep)
    # activations of one layer and one micro-batch
    tokens = b * s / cp
    seq_div = xp.where(sp, tp, 1)
    if eager:  # Korthikanti's constants are bytes for 16-bit activations
        k = abytes / 2
        linear = k * xp.where(sp, 34 * d / tp, 10 * d + 24 * d / tp)
        scores = k * 5 * heads * s / tp
        stored_input = k * 2 * d / seq_div
    else:
        e = m.saved_activation_elements - 2 * d  # the projections' outputs are never read back
        linear = abytes * (4 * d / seq_div + (e - 4 * d) / tp) + 4 * heads / tp
        scores = 0.0
        stored_input = abytes * d / seq_div
    full_layer = tokens * (linear + scores)
    f = (rc == 2) + (rc != 2) * share   # fraction of the layers that keep only their input
    kept = tokens * ((1 - f) * xp.where(rc == 0, linear + scores, linear) + f * stored_input)
    working = (f > 0) * full_layer
    logits = tokens * (4 * V / tp + abytes * d / seq_div)
    chunk = xp.ceil(L / (pp * v))
    first_layers = xp.where(v == 1, Ls * xp.minimum(pp, M), chunk * xp.minimum(pp * (v + 1) - 1, M * v))
    last_layers = xp.where(v == 1, Ls, chunk * xp.minimum((v - 1) * pp + 1, M * v))
    act_first = kept * first_layers + working + one * logits
    act_last = kept * last_layers + working + logits
    t_first = (psi_layers + first_extra) * per_dense + experts_B + act_first + gather
    t_last = (psi_layers + last_extra) * per_dense + experts_B + act_last + gather
    first = t_first >= t_last
    if xp is _SCALAR:
        psi, act, layers = ((psi_layers + first_extra, act_first, first_layers) if first
                            else (psi_layers + last_extra, act_last, last_layers))
        total = t_first if first else t_last
    else:
        psi = psi_layers + np.where(first, first_extra, last_extra)
        act, layers = np.where(first, act_first, act_last), np.where(first, first_layers, last_layers)
        total = np.maximum(t_first, t_last)
    return dict(weights_B=w * (psi * f3d + psi_e * f3e), grads_B=g * (psi * f2d + psi_e * f2e),
                master_B=mst * (psi * f1d + psi_e * f1e), optimizer_B=opt * (psi * f1d + psi_e * f1e),
                activations_B=act, buffers_B=gather, total_B=total, params_per_gpu=psi + psi_e,
                layer_activation_B=kept, layers_in_flight=layers, psi_dense=psi_layers + last_extra,
                psi_experts=psi_e, layer_linear_B=tokens * linear, stage_layers=Ls)


# --- structure checks shared with parallel.py -------------------------------
def zero_stage_rules(zero_stage) -> list[tuple[object, str]]:
    """(mask, reason) pairs for a ZeRO stage array's entries that are not 0, 1, 2 or 3 (a
    fraction, or a stage above 3), for a sweep to mask; a scalar that is not a stage raises."""
    if type(zero_stage) is int and zero_stage in ZERO_STAGES:
        return []
    out = fractional_counts(minimum=0, zero_stage=zero_stage)   # NaN, bools, text, negatives raise
    if np.ndim(zero_stage) == 0:
        if zero_stage not in ZERO_STAGES:
            raise MlsysimError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage!r}")
        return out
    return out + [(np.asarray(zero_stage, dtype=float) > 3, "zero_stage must be 0, 1, 2 or 3")]


def structure_violations(m: Transformer, tp, pp, cp, ep, dp, v, s) -> list[tuple[object, str]]:
    """(mask, reason) pairs for degrees the model's shape cannot take; mask True = violated."""
    out = [(m.heads % tp != 0, f"tp does not divide the {m.heads} attention heads")]
    if not m.is_mla:
        kv = m.kv_heads
        out.append(((kv % tp != 0) & (tp % kv != 0), f"tp neither divides nor is a multiple of the {kv} KV heads"))
    out.append((pp * v > m.layers, f"pp × interleave exceeds the {m.layers} layers"))
    out.append(((v > 1) & (pp == 1), "interleaving needs pipeline parallelism (pp > 1)"))
    out.append((s % cp != 0, "cp does not divide seq_len"))
    if m.learned_positions:
        out.append((s > m.learned_positions, f"seq_len exceeds the {m.learned_positions:,} learned positions"))
    if m.is_moe:
        out.append(((m.experts % ep != 0) | (dp * cp % ep != 0),
                    f"ep must divide the {m.experts} experts and dp × cp"))
    else:
        out.append((ep != 1, f"{m.name} has no experts: ep must be 1"))
    return out


def raise_or_mask(violations, scalar: bool, context=None):
    """Raise the first violation for scalar inputs (``context()`` names the configuration);
    return (bad mask, reason text with counts) for arrays."""
    if scalar:
        for bad, reason in violations:
            if bool(bad):
                raise InfeasibleError(f"{reason} ({context()})" if context else reason)
        return False, ""
    bad, reasons = False, []
    for mask, reason in violations:
        n = int(np.count_nonzero(mask))
        if n:
            reasons.append(f"{reason} ({n})")
        bad = bad | np.asarray(mask)
    return bad, "; ".join(reasons)


# --- the public function ----------------------------------------------------
_PARTS = ("weights_B", "grads_B", "master_B", "optimizer_B", "activations_B", "buffers_B", "total_B")


@dataclass(frozen=True)
class TrainingMemory(Record):
    """Result of :func:`training_memory`: bytes per GPU of the busiest pipeline stage.

    Scalar inputs give floats; array inputs give arrays, NaN where ``feasible`` is False
    (``reason`` says why, with counts).
    """

    model: str
    optimizer: str
    precision: str
    recompute: object
    attention: str
    zero_stage: object
    tp: object
    pp: object
    dp: object
    cp: object
    ep: object
    micro_batch: object
    seq_len: object
    interleave: object
    weights_B: object
    grads_B: object
    master_B: object
    optimizer_B: object
    activations_B: object
    buffers_B: object
    total_B: object
    params_per_gpu: object
    layer_activation_B: object
    layers_in_flight: object
    capacity_B: float | None
    feasible: object
    reason: str = ""
    recompute_fraction: object = 0.0

    @property
    def model_states_B(self):
        """Weights + gradients + master copy + optimizer states (ZeRO's 'model states')."""
        return self.weights_B + self.grads_B + self.master_B + self.optimizer_B

    def parts(self) -> dict:
        """The components of ``total_B`` by name."""
        return {"weights": self.weights_B, "gradients": self.grads_B, "master weights": self.master_B,
                "optimizer states": self.optimizer_B, "activations": self.activations_B,
                "ZeRO-3 gather buffers": self.buffers_B}

    def rows(self) -> list[tuple[str, str]]:
        if np.ndim(self.total_B):
            return [("shape", str(np.shape(self.total_B))), ("feasible", f"{np.mean(self.feasible):.0%}"),
                    ("reason", self.reason or "-")]
        cfg = (f"tp {self.tp}, pp {self.pp}, dp {self.dp}, cp {self.cp}, ep {self.ep}, "
               f"v {self.interleave}, ZeRO-{self.zero_stage}")
        rows = [("model", self.model), ("layout", cfg),
                ("micro-batch", f"{self.micro_batch} × {self.seq_len} tokens, {self.recompute} recompute, "
                                f"{self.attention} attention"),
                ("parameters per GPU", fmt(self.params_per_gpu))]
        rows += [(k, fmt(v, "B")) for k, v in self.parts().items()]
        rows.append(("total", fmt(self.total_B, "B")))
        if self.capacity_B is not None:
            rows.append(("fits", f"{'yes' if self.feasible else 'no'}: {fmt(self.total_B, 'B')} of "
                                 f"{fmt(self.capacity_B, 'B')}"))
        return rows



def _num(x):
    return x if type(x) in (int, float, bool) else np.asarray(x)


def training_memory(m, optimizer: str = "adam", precision: str = "bf16", zero_stage=0, tp=1, pp=1, dp=1,
                    micro_batch=1, seq_len=4096, recompute="selective", *, ep=1, cp=1,
                    sequence_parallel=True, interleave=1, microbatches=None, attention: str = "flash",
                    hardware=None, recompute_fraction=0.0, grad_precision: str | None = None) -> TrainingMemory:
    """Per-GPU training memory of model ``m`` (see the module docstring for every formula).

    Parameters
    ----------
    optimizer : registry name ("adam", "sgd", "adafactor", …); precision : weights,
        gradients and activations ("bf16", "fp16", "fp32", …).
    zero_stage : 0 (DDP), 1 (optimizer states sharded), 2 (+ gradients), 3 (+ weights; FSDP).
    tp, pp, dp, cp, ep : tensor-, pipeline-, data-, context- and expert-parallel degrees.
    micro_batch, seq_len : sequences per micro-batch and tokens per sequence.
    recompute : "none", "selective" or "full" activation recomputation.
    recompute_fraction : share of the remaining layers that recompute in full all the same
        (0 to 1; torchtitan's "selective layer" checkpointing of every second layer is 0.5,
        Megatron-LM's ``--recompute-num-layers`` k of a stage's n layers is k/n).
    sequence_parallel : split the layer-norm and dropout activations over the TP ranks.
    interleave : model chunks per GPU (v) of the interleaved 1F1B schedule.
    microbatches : micro-batches per step (m); fewer than p keeps fewer in flight.
    attention : "flash" (no stored scores) or "eager" (Korthikanti's GPT-block constants).
    hardware : a device name or record: ``feasible`` compares ``total_B`` with its memory.
    grad_precision : the format gradients are accumulated and reduced in; ``None`` (default)
        keeps them in ``precision`` (ZeRO's 2 bytes). bf16 runs usually keep them in "fp32":
        Megatron-LM forces it with bf16 (its distributed optimizer then holds 6 + 12/N bytes per
        parameter), Llama 3 accumulates and reduce-scatters in fp32 (Dubey et al. 2024 §3.3.2).

    A scalar configuration that does not fit raises
    :class:`~mlsysim.errors.InfeasibleError`; array inputs broadcast and give NaN there, and at
    fractional entries of a count (``feasible`` False; a fractional scalar count raises).

    >>> import mlsysim as ms
    >>> r = ms.training_memory("gpt-3", tp=8, pp=8, micro_batch=1, seq_len=2048, attention="eager")
    >>> round(r.layer_activation_B / 1e6)   # 34·s·b·h/t with SP and selective recompute
    107
    """
    m = _model(m)
    if not isinstance(m, Transformer):
        raise MlsysimError(f"training_memory models Transformers; {m.name} is a {type(m).__name__}")
    if attention not in ATTENTION:
        raise UnknownNameError("attention", attention, ATTENTION)
    opt = _optimizer(optimizer)
    rc = recompute_code(recompute)
    fractional = fractional_counts(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, micro_batch=micro_batch, interleave=interleave,
                                   seq_len=seq_len, microbatches=microbatches)
    fractional += zero_stage_rules(zero_stage)
    check_share("recompute_fraction", recompute_fraction)
    share = _num(recompute_fraction)
    hw = _hardware(hardware) if hardware is not None else None
    args = [_num(a) for a in (zero_stage, tp, pp, dp, cp, ep, micro_batch, seq_len, interleave)]
    zero, tp, pp, dp, cp, ep, b, s, v = args
    sp = _num(sequence_parallel)
    M = _num(microbatches) if microbatches is not None else pp * (v + 1)
    scalar = ops(zero, tp, pp, dp, cp, ep, b, s, v, sp, M, rc, share) is _SCALAR
    bad, reason = raise_or_mask(fractional + structure_violations(m, tp, pp, cp, ep, dp, v, s), scalar,
                                lambda: f"tp {tp}, pp {pp}, dp {dp}, cp {cp}, ep {ep}, interleave {v}")
    per_param = bytes_per_param(m, opt, precision, grad_precision)
    out = memory_core(m, per_param, zero, tp, pp, dp, cp, ep, b, s, rc, sp, v, M, bytes_per(precision),
                      attention == "eager", share)
    capacity = hw.memory_B if hw is not None else None
    fits = True if capacity is None else out["total_B"] <= capacity
    if scalar:
        if not fits:
            raise InfeasibleError(f"{m.name} needs {fmt(out['total_B'], 'B', 4)} per GPU "
                                  f"({fmt(out['activations_B'], 'B')} of activations) but {hw.name} has "
                                  f"{fmt(capacity, 'B', 4)}")
        feasible = True
    else:
        feasible = np.broadcast_to(~np.asarray(bad) & fits, np.shape(out["total_B"]))
        if capacity is not None and not np.all(fits):
            reason = "; ".join(filter(None, [reason, f"does not fit in {fmt(capacity, 'B')} "
                                                     f"({int(np.count_nonzero(~np.asarray(fits)))})"]))
        out = {k: (np.where(feasible, val, np.nan) if k in _PARTS else val) for k, val in out.items()}
    for k in ("psi_dense", "psi_experts", "layer_linear_B", "stage_layers"):
        out.pop(k)
    names = RECOMPUTE[rc] if np.ndim(rc) == 0 else tuple(RECOMPUTE[i] for i in np.ravel(rc))
    return record(TrainingMemory, model=m.name, optimizer=opt.name, precision=precision, recompute=names,
                          attention=attention, zero_stage=zero, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep,
                          micro_batch=b, seq_len=s, interleave=v, capacity_B=capacity, feasible=feasible,
                          reason=reason, recompute_fraction=share, **out)
