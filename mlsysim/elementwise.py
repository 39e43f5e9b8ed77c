"""Memory traffic of a Transformer layer's element-wise kernels when nothing is fused.

A training framework either **fuses** the element-wise work between two matrix multiplies
into a few kernels (Megatron-LM and Transformer Engine: one kernel per norm, bias +
activation, rotary embedding, softmax and cross-entropy) or runs it **eagerly**: every
PyTorch operator of the model's ``forward`` is its own kernel that reads its inputs from HBM
and writes its output back, and autograd runs one backward kernel per operator. The step
model (:mod:`mlsysim.parallel`) charges fused kernels 3 × the activations a layer saves
(each written, read back, its gradient written); this module counts the eager kernels one by
one, for the block as the reference PyTorch Llama code writes it (Meta's ``llama/model.py``,
torchtitan's ``models/llama/model.py``, 2024):

* **RMSNorm** upcasts to fp32 and runs six operators per norm — cast, square, mean, multiply
  by the reciprocal root, cast back, multiply by the weight; a LayerNorm (GPT blocks) is one
  native PyTorch kernel;
* **rotary embedding** casts Q and K to fp32, multiplies them as complex numbers by the
  cached angles and casts back;
* **grouped-query attention** materialises K and V repeated to every query head before the
  attention kernel (``repeat_kv``), and the attention output is transposed back into a
  contiguous copy;
* **SwiGLU** is a SiLU kernel and a multiply (GeLU: one kernel); the two **residual adds**;
* the normalised input feeds the separate **Q, K and V projections** (``wq``, ``wk``, ``wv``)
  and, in a gated MLP, the gate and up projections (``w1``, ``w3``): autograd adds their
  input gradients, three binary passes of width d (at full width under TP, whose input is
  replicated);
* the **loss** upcasts the logits to fp32 and runs log-softmax and the NLL on them.

Each operator's forward moves its inputs and output once; its backward reads the output
gradient and the saved inputs it needs and writes one gradient per input (a unary
operator 3 passes, a binary one 5); where a tensor feeds two operators, autograd adds the
two gradients (one more binary pass). A backward kernel that only reduces (a mean, the
weight gradient of a norm) is counted with the tensor it reads. The attention kernel itself
(FlashAttention) and the GEMMs are timed elsewhere.

Assumptions: activations in 16-bit (``abytes``), norm statistics and angles negligible
(one value per token, or cached), no dropout (Llama trains without it), torch.compile off,
every kernel at the same streaming bandwidth as a fused one, and launch gaps as for the fused
block's kernels (the step model's ``LAYER_OVERHEAD_S``): a GPU-bound step queues plain
PyTorch's several times as many kernels ahead of the GPU. The projections are Llama's separate
Q, K, V and gate, up matrices (the norm's output feeds three and two of them, and autograd adds
their input gradients); a block with a fused QKV projection saves two of those adds. Time
only: the activation memory stays that of the fused block (autograd's fp32 copies inside an
eager RMSNorm are not added). A latent-attention (MLA) block is not modelled here.

Worked number (tested): a Llama-3-8B layer (d = 4,096, Q 4,096, K/V 1,024 wide, repeated 4
times, d_ff = 14,336) moves 627 kB per token forward and 1,016 kB backward in eager kernels,
1.64 MB in all, 3.93 times the 418 kB that the fused accounting charges (3 × its 139 kB of
saved activations); the fp32 loss on its 128,256 logits adds 4.6 MB per token once per
micro-batch.
"""
from __future__ import annotations

from .errors import MlsysimError
from .memory import ops

#: "fused" (one kernel per norm, activation, rotary, loss: Megatron-LM, Transformer Engine,
#: torch.compile) or "eager" (one kernel per PyTorch operator: plain PyTorch).
ELEMENTWISE = ("fused", "eager")

# bytes per element moved by one operator, (forward, backward): inputs + output forward;
# output gradient + saved inputs read, input gradients written backward
_FP32 = 4.0


def _rmsnorm(a: float) -> tuple[float, float]:
    """Bytes per element of the normalised width, forward and backward, of an eager RMSNorm:
    x.float() (2 → 4 B), x² , mean, x · rsqrt(mean + ε), cast back (4 → 2 B), · weight."""
    f = _FP32
    fwd = (a + f) + (f + f) + f + (f + f) + (f + a) + (a + a)
    bwd = ((f + a) + (f + f + f) + f + (f + f + f + f) + (a + f) + (a + a + a + a)
           + (f + f + f))   # the two gradient paths into the fp32 input meet in one add
    return fwd, bwd


def layer_bytes(m, abytes: float, tp=1, sp=0) -> tuple[float, float]:
    """Bytes per token of one layer's eager element-wise kernels, (forward, backward), on one
    GPU: norms and residuals of width d (split by TP only with sequence parallelism), Q, K/V
    and MLP widths split by TP. See the module docstring.

    >>> import mlsysim as ms
    >>> f, b = layer_bytes(ms.model("llama-3-8b"), 2.0)
    >>> round(f / 1e3), round(b / 1e3)
    (627, 1016)
    """
    if m.is_mla:
        raise MlsysimError(f"the eager element-wise kernels of {m.name}'s latent attention are not modelled; "
                           "use elementwise='fused'")
    xp = ops(tp, sp)
    a, d = abytes, m.d_model
    seq = xp.where(sp, tp, 1)
    q = m.heads * m.head_dim / tp
    kv = m.kv_heads * m.head_dim / xp.minimum(tp, m.kv_heads)   # K/V heads are replicated past kv_heads
    width = ((m.experts_per_token + m.shared_experts) * m.moe_d_ff if m.is_moe else m.d_ff) / tp
    if m.norm == "rms":
        nf, nb = _rmsnorm(a)
    else:   # torch.nn.LayerNorm: one kernel, x in, y out; backward reads dy and x, writes dx
        nf, nb = 2 * a, 3 * a
    fwd, bwd = 2 * nf * d / seq, 2 * nb * d / seq
    fwd += 2 * 3 * a * d / seq          # two residual adds
    bwd += 2 * 3 * a * d / seq          # their gradients meet the branches' gradients
    bwd += (2 + m.gated_mlp) * 3 * a * d   # input gradients of wq, wk, wv (and w1, w3) added
    if m.learned_positions == 0:        # rotary: cast, complex multiply, cast back, on Q and K
        per = (a + _FP32) + (_FP32 + _FP32) + (_FP32 + a)
        fwd += per * (q + kv)
        bwd += per * (q + kv)
    rep = q / kv                        # K and V copied to every query head, gradients summed back
    fwd += (rep > 1) * 2 * (a + a * rep) * kv
    bwd += (rep > 1) * 2 * (a * rep + a) * kv
    fwd += 2 * a * q                    # the attention output made contiguous again
    bwd += 2 * a * q
    if m.gated_mlp:                     # SiLU(gate), then SiLU(gate) · up
        fwd += (2 * a + 3 * a) * width
        bwd += (3 * a + 5 * a) * width
    else:                               # GeLU
        fwd += 2 * a * width
        bwd += 3 * a * width
    return fwd, bwd


def loss_bytes(m, abytes: float, tp=1) -> float:
    """Bytes per token of an eager fp32 cross-entropy on the logits, forward and backward:
    cast the logits to fp32, log-softmax (read, write); the loss gathers one entry per token.
    Backward: the gather's gradient is written as a full row (zeros and the one target),
    log-softmax's backward reads it and its output and writes the logits' gradient, which is
    cast back.

    >>> import mlsysim as ms
    >>> round(loss_bytes(ms.model("llama-3-8b"), 2.0) / 1e6, 1)
    4.6
    """
    a, f = abytes, _FP32
    v = m.vocab / tp
    fwd = (a + f) + (f + f)
    bwd = f + (f + f + f) + (f + a)
    return (fwd + bwd) * v
