"""The roofline: is one pass of a workload bound by compute or by memory traffic?

For a pass that performs W FLOP and moves Q bytes to and from main memory on a
device with peak P (FLOP/s) and bandwidth B (bytes/s) (Williams, Waterman &
Patterson, CACM 2009):

    T_compute = W / (η·P),   T_memory = Q / (η_mem·B),   T = max(T_compute, T_memory)
    intensity I = W / Q (FLOP/byte),   ridge I* = η·P / (η_mem·B)

The pass is compute-bound when I ≥ I*. η and η_mem (``efficiency``,
``mem_efficiency``) are the achievable fractions of peak and bandwidth; both
default to 1, which makes T a lower bound on the real time.

What a pass counts (1 multiply-add = 2 FLOP):

* **Transformer decode** — ``batch`` sequences each add one token after
  ``context_tokens`` cached ones. FLOP = batch·(2·N_matmul + F_pair·(c+1)).
  Bytes = weights touched once + KV cache read (batch·c·kv) + new KV written
  + activations. For a MoE, a batch of n tokens touches E·(1−(1−k/E)^n)
  experts per layer (uniform routing), so weight traffic grows with batch.
* **Transformer prefill** — ``seq_len`` new tokens per sequence, causal
  attention over context + themselves (t·c + t(t+1)/2 pairs), logits for the
  last token only.
* **training** — forward + backward = 3 × forward FLOP (backward = 2 ×
  forward); traffic = weights read twice, gradients written, an optimizer
  update reading gradients and reading and writing master weights and states,
  and 3 × the forward activation traffic.
* **CNN inference / training** — FLOP from the layer shapes (ResNet-50:
  8.18 GFLOP per image), weights plus per-layer activation reads and writes:
  batch norm is folded into the convolutions for inference, and makes its own
  passes over every activation in training (``CNN.training_activation_elements``).

The memory the pass needs (weights, KV cache, activations, training states) is
checked against the device capacity: a configuration that does not fit raises
:class:`~mlsysim.errors.InfeasibleError` (scalar call) or comes back as NaN
with ``feasible`` False (array call).

Transformer inference counts, as activation traffic, each block reading and
writing the residual stream (4·d per token per layer); intermediates inside a
block (Q/K/V, the MLP hidden state) are taken to stay on chip, as in fused
kernels — true for decode batches whose tensors fit in tens of MB of L2, and
immaterial for prefill, which is compute-bound either way. Training writes the
activations saved for backward, reads them back, and writes their gradients.

Worked number (tested): Llama-3-8B decode, batch 1, bf16 on an H100 SXM reads
15.0 GB of weights per token (the 0.5 GB embedding table is only indexed), so
T = 4.48 ms (memory-bound; intensity ≈ 1 FLOP/B vs. a ridge of 295 FLOP/B).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .tables import Record
from .errors import InfeasibleError, MlsysimError, UnknownNameError, check_count, check_fraction
from .optimizers import training_state
from .registry import hardware as _hardware, model as _model
from .systems import Hardware
from .units import bytes_per, fmt
from .workloads import CNN, Transformer

PHASES = {Transformer: ("decode", "prefill", "training"), CNN: ("inference", "training")}


@dataclass(frozen=True)
class PassCost:
    """FLOP, memory traffic (by kind) and memory footprint of one pass (floats or arrays)."""

    flops: object
    weight_bytes: object
    kv_bytes: object
    activation_bytes: object
    footprint_B: object

    @property
    def bytes(self):
        return self.weight_bytes + self.kv_bytes + self.activation_bytes


class RooflineTerms:
    """Intensity, ridge and bound of a result that has ``flops``, ``bytes``, ``peak_flops``,
    ``bandwidth_Bps``, ``compute_s``, ``memory_s`` and ``feasible`` (roofline and serving)."""

    @property
    def intensity(self):
        """Arithmetic intensity, FLOP per byte of memory traffic."""
        return self.flops / self.bytes

    @property
    def ridge(self):
        """Intensity at which compute time equals memory time, FLOP/byte."""
        return self.peak_flops / self.bandwidth_Bps

    @property
    def compute_bound(self):
        return np.asarray(self.compute_s) >= np.asarray(self.memory_s)

    @property
    def bound(self):
        """"compute" or "memory" (an array of them for array inputs; "infeasible" where it does not fit)."""
        b = np.where(self.compute_bound, "compute", "memory")
        b = np.where(self.feasible, b, "infeasible")
        return str(b) if b.ndim == 0 else b


@dataclass(frozen=True)
class Roofline(RooflineTerms, Record):
    """Result of :func:`roofline`. Times in seconds, traffic in bytes, rates per second.

    Scalar inputs give floats; array inputs give arrays. A list of devices or
    precisions adds leading axes (devices, then precisions).
    """

    workload: str
    hardware: object          # name, or tuple of names
    phase: str
    precision: object         # name, or tuple of names
    batch: object
    flops: object
    bytes: object
    weight_bytes: object
    kv_bytes: object
    activation_bytes: object
    peak_flops: object        # achievable: efficiency × dense peak
    bandwidth_Bps: object     # achievable: mem_efficiency × spec bandwidth
    compute_s: object
    memory_s: object
    time_s: object
    footprint_B: object
    capacity_B: object
    tokens_per_sequence: object
    feasible: object
    reason: str = ""

    @property
    def achieved_flops(self):
        """FLOP/s the pass attains at the roofline time."""
        return self.flops / self.time_s

    @property
    def utilization(self):
        """Achieved FLOP/s as a fraction of the achievable peak."""
        return self.achieved_flops / self.peak_flops

    @property
    def tokens_per_s(self):
        """New tokens (images for a CNN) processed per second: batch × tokens per sequence / time."""
        return self.batch * self.tokens_per_sequence / self.time_s

    def rows(self) -> list[tuple[str, str]]:
        """(label, formatted value) pairs for a scalar result."""
        if np.ndim(self.time_s):
            return [("shape", str(np.shape(self.time_s)))]
        return [("workload", self.workload), ("hardware", str(self.hardware)), ("phase", self.phase),
                ("precision", str(self.precision)), ("batch", f"{self.batch:g}"),
                ("work", fmt(self.flops, "FLOP")), ("memory traffic", fmt(self.bytes, "B")),
                ("intensity", f"{self.intensity:.3g} FLOP/B"), ("ridge", f"{self.ridge:.3g} FLOP/B"),
                ("compute time", fmt(self.compute_s, "s")), ("memory time", fmt(self.memory_s, "s")),
                ("time", fmt(self.time_s, "s")), ("bound", self.bound),
                ("achieved", fmt(self.achieved_flops, "FLOP/s")),
                ("memory needed", f"{fmt(self.footprint_B, 'B')} of {fmt(self.capacity_B, 'B')}")]



# --- pass costs ------------------------------------------------------------
def _touched_experts(m: Transformer, tokens):
    """Expected distinct routed experts per layer hit by ``tokens`` tokens (uniform top-k routing)."""
    e, k = m.experts, m.experts_per_token
    return e * (1.0 - (1.0 - k / e) ** tokens)


def _transformer_weight_reads(m: Transformer, tokens, wb: float):
    """Bytes of weights read in one forward pass over ``tokens`` tokens."""
    expert_total = m.moe_layers * (m.experts + m.shared_experts) * m.expert_params
    always = m.params - m.embedding_params - m.head_params - expert_total + m.vocab * m.d_model
    rows = (min(tokens, m.vocab) if isinstance(tokens, float) else np.minimum(tokens, m.vocab)) * m.d_model
    moe = 0.0
    if m.is_moe:
        moe = m.moe_layers * (_touched_experts(m, tokens) + m.shared_experts) * m.expert_params
    return (always + rows + moe) * wb


def transformer_cost(m: Transformer, phase: str, batch, tokens, context, precision: str,
                     weight_precision: str, kv_precision: str, optimizer: str = "adamw") -> PassCost:
    """FLOP, traffic and footprint of one pass of a Transformer (see the module docstring)."""
    wb, ab, kb = bytes_per(weight_precision), bytes_per(precision), bytes_per(kv_precision)
    n = batch * tokens
    pairs = tokens * context + tokens * (tokens + 1) / 2.0
    f_pair = m.attention_flops_per_pair(absorbed=(phase == "decode"))
    head = 2.0 * m.vocab * m.d_model
    residual_io = m.layers * 4.0 * m.d_model  # each block reads and writes the residual stream
    if phase == "training":
        fwd = n * 2.0 * m.matmul_params_per_token + batch * pairs * f_pair
        st = training_state(m, optimizer, weight_precision)
        update = st.grads_B + 2.0 * (st.master_B + st.optimizer_B) + st.weights_B
        weights = 2.0 * _transformer_weight_reads(m, n, wb) + st.grads_B + update
        saved = n * m.layers * m.saved_activation_elements * ab
        logits = n * m.vocab * ab
        return PassCost(flops=3.0 * fwd, weight_bytes=weights, kv_bytes=0.0 * n,
                        activation_bytes=3.0 * saved, footprint_B=st.total_B + saved + logits)
    flops = n * 2.0 * m.matmul_params_per_token - (n - batch) * head + batch * pairs * f_pair
    kv_tok = m.kv_bytes_per_token(kv_precision)
    kv = batch * (context + 2.0 * tokens) * kv_tok
    live = n * (2 * m.d_model + (2 if m.gated_mlp else 1) * max(m.d_ff, m.moe_d_ff)) * ab
    footprint = m.params * wb + batch * (context + tokens) * kv_tok + live
    return PassCost(flops=flops, weight_bytes=_transformer_weight_reads(m, n, wb), kv_bytes=kv,
                    activation_bytes=n * residual_io * ab, footprint_B=footprint)


def cnn_cost(m: CNN, phase: str, batch, precision: str, weight_precision: str,
             optimizer: str = "adamw") -> PassCost:
    """FLOP, traffic and footprint of one CNN pass over ``batch`` images."""
    wb, ab = bytes_per(weight_precision), bytes_per(precision)
    fwd = batch * m.flops_per_sample
    if phase == "training":
        st = training_state(m, optimizer, weight_precision)
        update = st.grads_B + 2.0 * (st.master_B + st.optimizer_B) + st.weights_B
        return PassCost(flops=3.0 * fwd, weight_bytes=2.0 * st.weights_B + st.grads_B + update + 0.0 * batch,
                        kv_bytes=0.0 * batch, activation_bytes=batch * m.training_activation_elements * ab,
                        footprint_B=st.total_B + batch * m.saved_activation_elements * ab)
    return PassCost(flops=fwd, weight_bytes=m.params * wb + 0.0 * batch, kv_bytes=0.0 * batch,
                    activation_bytes=batch * m.activation_io_elements * ab,
                    footprint_B=m.params * wb + batch * m.peak_layer_elements * ab)


def _maximum(a, b):
    return max(a, b) if isinstance(a, float) and isinstance(b, float) else np.maximum(a, b)


def _num(x):
    """A float for a scalar, a float array otherwise (None stays None)."""
    if x is None:
        return None
    if type(x) in (int, float):   # fast path for plain numbers
        return float(x)
    return float(x) if np.ndim(x) == 0 else np.asarray(x, dtype=float)


def _whole(*masks):
    """The product of count masks from :func:`~mlsysim.errors.check_count` (None: all whole)."""
    masks = [mk for mk in masks if mk is not None]
    if not masks:
        return None
    out = masks[0]
    for mk in masks[1:]:
        out = out & mk
    return out


COUNTS_REASON = "counts (batch, tokens, GPUs, ...) must be whole numbers"


def _pass(workload, phase: str | None = None, batch=1, seq_len=None, context_tokens=0,
          precision: str = "bf16", weight_precision: str | None = None,
          kv_precision: str | None = None, optimizer: str = "adamw"):
    """Validated (phase, PassCost, tokens per sequence, mask of whole counts or None)."""
    m = _model(workload)
    phases = PHASES[type(m)]
    phase = phases[0] if phase is None else phase
    if phase not in phases:
        raise UnknownNameError(f"phase for {m.name}", phase, phases)
    bytes_per(precision)
    whole = check_count("batch", batch)
    batch = _num(batch)
    weight_precision = weight_precision or precision
    kv_precision = kv_precision or precision
    if isinstance(m, CNN):
        if seq_len is not None or np.any(np.asarray(context_tokens) != 0):
            raise MlsysimError(f"{m.name} is a CNN: seq_len and context_tokens do not apply")
        return phase, cnn_cost(m, phase, batch, precision, weight_precision, optimizer), 1, whole
    whole = _whole(whole, check_count("context_tokens", context_tokens, minimum=0))
    context_tokens = _num(context_tokens)
    if phase == "decode":
        if seq_len is not None and (isinstance(seq_len, (bool, str)) or np.any(np.asarray(seq_len) != 1)):
            raise MlsysimError(f"decode adds one token per sequence; got seq_len={seq_len!r}")
        tokens = 1
    else:
        tokens = 2048 if seq_len is None else seq_len
        whole = _whole(whole, check_count("seq_len", tokens))
        tokens = _num(tokens)
    longest = context_tokens + tokens
    longest = longest if isinstance(longest, float) else float(np.max(longest))
    if longest > m.max_context:
        raise InfeasibleError(f"{m.name} has a context window of {m.max_context:,} tokens; "
                              f"context_tokens + new tokens reaches {longest:,.0f}")
    return phase, transformer_cost(m, phase, batch, tokens, context_tokens, precision, weight_precision,
                                   kv_precision, optimizer), tokens, whole


def pass_cost(workload, phase: str | None = None, batch=1, seq_len=None, context_tokens=0,
              precision: str = "bf16", weight_precision: str | None = None,
              kv_precision: str | None = None, optimizer: str = "adamw") -> tuple[str, PassCost, object]:
    """Validate the inputs and return (phase, PassCost, tokens per sequence).

    ``batch``, ``seq_len`` and ``context_tokens`` are counts: a fractional scalar raises,
    and the cost is NaN at the fractional entries of an array.
    """
    phase, c, tokens, whole = _pass(workload, phase, batch, seq_len, context_tokens, precision,
                                    weight_precision, kv_precision, optimizer)
    if whole is not None:
        c = PassCost(**{f.name: np.where(whole, getattr(c, f.name), np.nan) for f in dataclasses.fields(c)})
    return phase, c, tokens


_FIELDS = ("flops", "bytes", "weight_bytes", "kv_bytes", "activation_bytes", "footprint_B", "capacity_B",
           "peak_flops", "bandwidth_Bps", "compute_s", "memory_s", "time_s", "feasible")


def _evaluate(m, hw: Hardware, precision: str, args: dict, efficiency, mem_efficiency):
    phase, c, tokens, whole = _pass(precision=precision, **args)
    peak = hw.peak(precision) * efficiency
    bw = hw.memory_bw_Bps * mem_efficiency
    compute_s, memory_s = c.flops / peak, c.bytes / bw
    time_s, fits = _maximum(compute_s, memory_s), c.footprint_B <= hw.memory_B
    if np.ndim(time_s) > np.ndim(fits):  # array-valued hardware specs: one verdict per element
        fits = np.broadcast_to(fits, np.broadcast_shapes(np.shape(fits), np.shape(time_s)))
    values = dict(flops=c.flops, bytes=c.bytes, weight_bytes=c.weight_bytes, kv_bytes=c.kv_bytes,
                  activation_bytes=c.activation_bytes, footprint_B=c.footprint_B, capacity_B=hw.memory_B,
                  peak_flops=peak, bandwidth_Bps=bw, compute_s=compute_s, memory_s=memory_s,
                  time_s=time_s, feasible=fits)
    return phase, tokens, values, whole


def roofline(workload, hardware, batch=1, precision="bf16", phase: str | None = None, seq_len=None,
             context_tokens=0, weight_precision: str | None = None, kv_precision: str | None = None,
             efficiency=1.0, mem_efficiency=1.0, optimizer: str = "adamw") -> Roofline:
    """Roofline time of one pass of ``workload`` on ``hardware`` (see the module docstring).

    Parameters
    ----------
    workload, hardware : name or record. ``hardware`` may be a list (adds a leading axis).
    batch : sequences (Transformer) or images (CNN); float or array.
    precision : compute format whose dense peak applies ("bf16", "fp8", "int8", …);
        a list adds an axis after the devices. Weights, activations and KV cache
        are stored in it unless ``weight_precision`` / ``kv_precision`` say otherwise.
    phase : "decode" (default), "prefill" or "training" for a Transformer;
        "inference" (default) or "training" for a CNN.
    seq_len : new tokens per sequence for prefill and training (default 2,048).
    context_tokens : tokens already in the KV cache (decode and chunked prefill).
    efficiency, mem_efficiency : achievable fractions of peak FLOP/s and bandwidth, in (0, 1].
    optimizer : optimizer whose states a training pass updates (default AdamW).

    >>> import mlsysim as ms
    >>> r = ms.roofline("llama-3-8b", "h100", batch=1)
    >>> r.bound, round(r.time_s * 1e3, 2)
    ('memory', 4.48)
    """
    check_fraction("efficiency", efficiency)
    check_fraction("mem_efficiency", mem_efficiency)
    m = _model(workload)
    one_hw, one_p = isinstance(hardware, (str, Hardware)), isinstance(precision, str)
    hws = [_hardware(h) for h in ([hardware] if one_hw else list(hardware))]
    precisions = [precision] if one_p else list(precision)
    if not hws or not precisions:
        raise MlsysimError("hardware and precision lists must not be empty")
    args = dict(workload=m, phase=phase, batch=batch, seq_len=seq_len, context_tokens=context_tokens,
                weight_precision=weight_precision, kv_precision=kv_precision, optimizer=optimizer)
    grid = [[_evaluate(m, h, p, args, efficiency, mem_efficiency) for p in precisions] for h in hws]
    phase, tokens, values, whole = grid[0][0]
    if not (one_hw and one_p):
        shape = np.broadcast_shapes(*(np.shape(v["time_s"]) for row in grid for _, _, v, _ in row))
        values = {k: np.array([[np.broadcast_to(v[k], shape) for _, _, v, _ in row] for row in grid])
                  for k in _FIELDS}
        values = {k: (a[0] if one_hw else a[:, 0] if one_p else a) for k, a in values.items()}
    feasible = values.pop("feasible")
    reason = ""
    if whole is not None:
        fits = feasible
        feasible = np.broadcast_to(feasible, np.broadcast_shapes(np.shape(feasible), np.shape(whole))) & whole
        keep = ("footprint_B", "capacity_B")
        values = {k: (v if k in keep else np.where(feasible, v, np.nan)) for k, v in values.items()}
        reason = "; ".join(([] if np.all(fits | ~whole) else ["needs more memory than the device has"])
                           + [COUNTS_REASON]) + " where feasible is False"
    elif np.ndim(feasible) == 0:
        if not feasible:
            raise InfeasibleError(
                f"{m.name} {phase} at batch {np.asarray(batch).item():g} needs {fmt(values['footprint_B'], 'B', 4)} "
                f"of memory but {hws[0].name} has {fmt(hws[0].memory_B, 'B', 4)}")
        values = {k: float(v) for k, v in values.items()}
        feasible = True
    elif not np.all(feasible):
        keep = ("footprint_B", "capacity_B")
        values = {k: (v if k in keep else np.where(feasible, v, np.nan)) for k, v in values.items()}
        reason = "needs more memory than the device has where feasible is False"
    return Roofline(workload=m.name, hardware=hws[0].name if one_hw else tuple(h.name for h in hws),
                    phase=phase, precision=precision if one_p else tuple(precisions), batch=batch,
                    tokens_per_sequence=tokens, feasible=feasible, reason=reason, **values)


def crossover_batch(workload, hardware, precision: str = "bf16", context_tokens=0, **kw) -> float:
    """Smallest whole batch at which a decode step (or pass) becomes compute-bound.

    Found by doubling then bisection on :func:`roofline`; ``inf`` if the pass is still
    memory-bound at 2**24 sequences (e.g. when KV-cache traffic grows as fast as the work).
    Memory capacity is ignored here: compare with the largest batch that fits.

    >>> import mlsysim as ms
    >>> ms.crossover_batch("llama-3-8b", "h100")   # near the ridge, 295 FLOP/B
    304
    """
    hw, eff, mem_eff = _hardware(hardware), kw.pop("efficiency", 1.0), kw.pop("mem_efficiency", 1.0)

    def bound(b):
        _, c, _ = pass_cost(workload, batch=b, context_tokens=context_tokens, precision=precision, **kw)
        return c.flops / (hw.peak(precision) * eff) >= c.bytes / (hw.memory_bw_Bps * mem_eff)
    lo, hi = 0, 1
    while not bound(hi):
        lo, hi = hi, hi * 2
        if hi > 2 ** 24:
            return float("inf")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if bound(mid) else (mid, hi)
    return hi
