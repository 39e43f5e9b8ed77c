"""One iteration of a serving engine: some prompt chunks and some decoding sequences in one pass.

A continuous-batching engine (Orca, Yu et al. 2022; vLLM; TensorRT-LLM's in-flight batching)
runs one forward pass per *iteration* over every token it scheduled: the new tokens of the
prompts it admits (whole, or a chunk with chunked prefill) and one token of each sequence
that is decoding. The time of that pass on each of the ``tp`` GPUs is the **sum** of
components, each with its own limit (none hidden under a max over the whole pass):

    T_iter = T_linear(n) + T_norms(n) + T_prefill-attn + T_decode-attn + T_comm(n) + L·t_layer + T_head

* n — tokens in the iteration (prompt tokens + decoding sequences).
* T_linear(n) — per layer, the QKV, output, MLP up/gate and down GEMMs with n rows after the TP
  split (experts: n·k/E rows each), each timed as the longer of its tile compute
  (:mod:`mlsysim.kernels`, the precision's ``Hardware`` efficiency: fp8 GEMMs on an H100 reach
  62 % of the fp8 peak) and its own traffic (weights plus its input and output rows) at
  η_mem = 0.83 of the HBM bandwidth. A few rows stream the weights; thousands are compute-bound.
* T_norms(n) — the element-wise kernels between the GEMMs, fused as serving engines fuse them:
  two residual-add + RMSNorm + quantise kernels (read 2 × 2 B, write 2 B + the GEMM input) per
  element of d_model, and one SiLU-and-multiply (read 2 × 2 B, write one GEMM input) per element
  of the MLP width; at η_mem.
* T_prefill-attn — the causal 128 × 128 query × key blocks each prompt chunk computes
  (``mlsysim.serving.step._causal_blocks``, earlier chunks' keys included) at
  :data:`PREFILL_ATTENTION_EFFICIENCY` of the KV precision's peak.
* T_decode-attn — each decoding sequence reads its own cache: Σ context · KV bytes per token
  (this GPU's KV heads) at :data:`DECODE_ATTENTION_BW_EFFICIENCY` of the bandwidth, plus
  :data:`DECODE_ATTENTION_BLOCK_S` per (sequence, KV head, layer) work block spread over the
  SMs: many short caches cost more than their bytes (the achieved fraction of the bandwidth
  rises with batch × context, as the kernels measured do).
* T_comm(n) — two all-reduces per layer of n · d_model 16-bit activations over the node's
  links (:mod:`mlsysim.serving.step`), when tp > 1.
* L·t_layer — the fixed cost per layer of launching and draining its kernels
  (:data:`~mlsysim.serving.step.DEFAULT_LAYER_OVERHEAD_S`, measured with CUDA graphs). An
  iteration that holds only decoding sequences replays a captured CUDA graph (both engines
  capture decode-only batch sizes); one that holds a prompt runs eagerly and pays
  :data:`EAGER_LAUNCH_S` per kernel more, unless the GPU work hides the launches.
* T_head — the output projection for the rows that produce a token (the decoding sequences and
  the prompts that finish in this iteration).

Assumptions: one node, the GPUs of the TP group equal; weights, KV cache and activations in HBM;
the GEMM's weights re-read once per iteration (no L2 reuse across layers).

Worked number (tested): Llama-3.1-8B in fp8 on one H100 SXM, an iteration of 256 decoding
sequences at 1,024 tokens of context each: linear 4.4 ms, decode attention 6.4 ms, 12.8 ms in
all.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels import THIN_ROWS, _params, tile_time
from ..units import bytes_per
from ..collectives import allreduce_time
from ..errors import check_count
from .step import ATTENTION_BLOCK, _causal_blocks, _setup, layers_gemm_s

PREFILL_ATTENTION_EFFICIENCY = {"fp8": 0.33, "16-bit": 0.54}
"""Fraction of the attention precision's dense peak that a fused prefill-attention kernel reaches on long
prompts: 656 of 1,979 TFLOP/s in fp8 and 537 of 989 in bf16 — the medians over prompts of at least
4,096 tokens (head dim 128, at least 32 heads) of TensorRT-LLM's context-attention kernels in NVIDIA
aiconfigurator 0.12.0's H100 SXM database (TensorRT-LLM 1.3.0rc20). FlashAttention-3 reports 1.2 PFLOP/s
in fp8 and up to 740 TFLOP/s in bf16 in its best cases (Shah et al. 2024); FlashAttention-2 forward
reaches 50–73 % of an A100's peak (Dao 2023)."""

DECODE_ATTENTION_BW_EFFICIENCY = 0.90
"""Fraction of the HBM bandwidth that decode attention reaches once batch × context is large: 2.9–3.0 of
3.35 TB/s for TensorRT-LLM's generation-attention kernels on an H100 SXM (aiconfigurator 0.12.0
database, 8 KV heads, head dim 128, batch ≥ 64 at contexts ≥ 2,048, fp8 and bf16 caches)."""

DECODE_ATTENTION_BLOCK_S = 1.5e-6
"""Fixed time of one decode-attention work block, one (sequence, KV head) of one layer, on one SM (s):
the same database's decode attention over 2,048 sequences of 2 tokens takes 0.183 ms per layer with
8 KV heads — 16,384 blocks over 132 SMs, 1.5 µs each — where its bytes would take 0.2 µs."""

EAGER_LAUNCH_S = 4e-6
"""Host time to launch one kernel from an eager PyTorch loop (s): a CUDA kernel launch costs about
4–5 µs of CPU time through the driver and the framework's dispatcher (NVIDIA CUDA C++ Best Practices
Guide, "asynchronous launch overhead"; PyTorch profiler traces of eager LLM forward passes). A
prompt-holding iteration launches about ten kernels per layer."""

KERNELS_PER_LAYER = 10
"""Kernels of one decoder layer in a serving forward pass: two fused norms, QKV GEMM, attention,
output GEMM, up/gate GEMM, activation, down GEMM and, with tp > 1, two all-reduces."""


def _linear_s(s, hw, rows, head_rows):
    """Per-GPU seconds of the GEMMs of one iteration with ``rows`` tokens (array), each GEMM the
    longer of its tiles and its own traffic at η_mem; ``head_rows`` rows through the output head."""
    m, tp, p = s.m, s.tp, s.precision
    d = m.d_model
    bw = hw.memory_bw_Bps * s.mem_eff
    wb, ab = bytes_per(s.wp), bytes_per(p)
    thin_rate = _params(hw, p)[0]        # the precision's achieved GEMM rate, as the tiles use it

    def gemm(r, n, k, count=1.0, experts_read=None):
        tiles = np.where(r <= THIN_ROWS, count * 2.0 * r * n * k / thin_rate,
                         tile_time(np.maximum(r, 1.0), n, k, hw, p, count, roofline=False))
        read = count if experts_read is None else experts_read
        traffic = (read * n * k * wb + count * r * (n + k) * ab) / bw
        return np.maximum(tiles, traffic)

    return layers_gemm_s(m, tp, rows, gemm), gemm(head_rows, m.vocab / tp, d)


def _norm_bytes_per_token(s) -> float:
    """Bytes the fused element-wise kernels of all layers move per token on one GPU."""
    m = s.m
    gin = bytes_per(s.precision)
    mlp = (m.d_ff if m.moe_layers < m.layers else 0.0) or m.moe_d_ff * (m.experts_per_token + m.shared_experts)
    per_layer = 2 * m.d_model * (3 * 2 + gin) + mlp / s.tp * (2 * 2 + gin)
    return float(m.layers * per_layer)


@dataclass(frozen=True)
class IterationModel:
    """Per-GPU cost tables of one model on one GPU kind, TP degree and precision: everything an
    iteration's time needs, precomputed once (:func:`iteration_model`); :meth:`time` is then a few
    array look-ups, which keeps a simulation of 10,000 requests well under a second."""

    workload: str
    hardware: str
    tp: int
    precision: str
    kv_precision: str
    max_tokens: int
    linear_s: np.ndarray        # [n] GEMMs of an iteration with n tokens
    head_s: np.ndarray          # [r] output head for r rows
    norms_s_per_token: float
    comm_s: np.ndarray          # [n] the iteration's all-reduces
    layer_s: float              # L · t_layer
    eager_s: float              # host launch time of an iteration run without a CUDA graph
    prefill_attn_s_per_block: float   # one 128 × 128 causal block, all layers and this GPU's heads
    decode_attn_s_per_token: float    # one cached token read, all layers
    decode_attn_s_per_seq: float      # the fixed blocks of one sequence, all layers
    kv_bytes_per_token: float         # this GPU's share
    weights_B: float                  # per GPU

    def time(self, tokens, decode_seqs, decode_context, prefill_blocks, head_rows, graph: bool):
        """Seconds of one iteration: ``tokens`` scheduled (≤ max_tokens), ``decode_seqs`` sequences
        decoding over ``decode_context`` cached tokens in all, ``prefill_blocks`` causal attention
        blocks of the prompt chunks, ``head_rows`` rows through the output head; ``graph``: replayed
        from a CUDA graph. Plain numbers or NumPy arrays (whole tokens)."""
        n = np.asarray(tokens, dtype=np.int64)
        gpu = (self.linear_s[n] + self.norms_s_per_token * tokens + self.comm_s[n] + self.layer_s
               + self.head_s[np.asarray(head_rows, dtype=np.int64)]
               + self.prefill_attn_s_per_block * prefill_blocks
               + self.decode_attn_s_per_token * decode_context + self.decode_attn_s_per_seq * decode_seqs)
        return gpu if graph else np.maximum(gpu, self.eager_s)

    def breakdown(self, tokens: int, decode_seqs: int, decode_context: float, prefill_blocks: float,
                  head_rows: int) -> dict:
        """The components of :meth:`time` (s) for one iteration, by name."""
        return {"linear": float(self.linear_s[tokens]), "norms": self.norms_s_per_token * tokens,
                "prefill attention": self.prefill_attn_s_per_block * prefill_blocks,
                "decode attention": self.decode_attn_s_per_token * decode_context
                + self.decode_attn_s_per_seq * decode_seqs,
                "all-reduce": float(self.comm_s[tokens]), "layer overhead": self.layer_s,
                "output head": float(self.head_s[head_rows])}


def iteration_model(model, hardware, tp: int = 1, precision: str = "bf16", kv_precision: str | None = None,
                    max_tokens: int = 16384) -> IterationModel:
    """Cost tables for iterations of up to ``max_tokens`` tokens (see the module docstring).

    >>> it = iteration_model("llama-3.1-8b", "h100-sxm", precision="fp8")
    >>> round(float(it.time(256, 256, 256 * 1024, 0, 256, graph=True)) * 1e3, 1)
    12.8
    """
    check_count("max_tokens", max_tokens)
    s = _setup(model, hardware, precision, tp, None, kv_precision)
    if not s.one:
        raise ValueError("iteration_model takes one hardware name")
    hw, m = s.hws[0], s.m
    rows = np.arange(max_tokens + 1, dtype=float)
    linear, head = _linear_s(s, hw, rows, rows)
    head[0] = 0.0
    comm = np.zeros_like(rows)
    if tp > 1:
        comm = 2 * m.layers * (allreduce_time(rows * m.d_model * 2.0, tp, hw.scaleup_Bps, s.step_s) + s.base_s)
    kp = s.kp
    attn_peak = hw.peak(kp if kp in hw.peak_flops else s.precision)
    eff = PREFILL_ATTENTION_EFFICIENCY["fp8" if bytes_per(kp) == 1 else "16-bit"]
    block_flops = ATTENTION_BLOCK ** 2 * m.attention_flops_per_pair() / tp
    kv_token = m.kv_bytes_per_token(kp) * float(s.share)
    kv_heads = (1.0 if m.is_mla else m.kv_heads * float(s.share))
    blocks_per_sm = DECODE_ATTENTION_BLOCK_S / (hw.sms or 1)
    return IterationModel(
        workload=m.name, hardware=hw.name, tp=int(tp), precision=precision, kv_precision=kp,
        max_tokens=int(max_tokens), linear_s=linear, head_s=head,
        norms_s_per_token=_norm_bytes_per_token(s) / (hw.memory_bw_Bps * s.mem_eff), comm_s=comm,
        layer_s=m.layers * s.layer_s, eager_s=m.layers * KERNELS_PER_LAYER * EAGER_LAUNCH_S,
        prefill_attn_s_per_block=block_flops / (eff * attn_peak),
        decode_attn_s_per_token=kv_token / (DECODE_ATTENTION_BW_EFFICIENCY * hw.memory_bw_Bps),
        decode_attn_s_per_seq=m.layers * kv_heads * blocks_per_sm,
        kv_bytes_per_token=kv_token, weights_B=m.params * bytes_per(s.wp) / tp)


def prompt_blocks(chunk, before):
    """Causal 128 × 128 attention blocks of a prompt chunk of ``chunk`` tokens after ``before`` cached ones."""
    return _causal_blocks(chunk, before, ATTENTION_BLOCK)
