"""A published training run audited end to end: Llama 3.1 405B's GPU-hours."""
from __future__ import annotations

from ..audit import audit
from ..registry import cluster
from . import Case

#: Llama 3 herd paper (Dubey et al. 2024) §3.3–3.4 and Table 4: 15.6T tokens of pre-training at an
#: 8K context on 16,384 H100s (TP 8, PP 16, DP 128, 16 sequences per data-parallel group); Tectonic
#: storage. The Llama 3.1 model card gives the GPU-hours of the whole 405B run.
LLAMA31_405B_TOKENS = 15.6e12
LLAMA31_405B_GPU_HOURS = 30.84e6
SOURCE = ("Llama 3.1 model card (2024-07), Training Time: 30.84 M H100-80GB GPU-hours for 405B; layout, "
          "tokens and storage: Llama 3 herd paper (Dubey et al. 2024) §3.3.1, §3.4 and Table 4")


def llama31_405b():
    """The audit of Llama 3.1 405B's pre-training in its published 16K-GPU layout."""
    return audit("llama-3.1-405b", cluster("llama3-24k-h100", nodes=2048), tokens=LLAMA31_405B_TOKENS,
                 grid="virginia", global_batch=128 * 16, seq_len=8192, tp=8, pp=16, storage="tectonic", recompute="full")


CASES = [
    Case(id="Audit-Llama3.1-405B", area="audit",
         title="Llama 3.1 405B pre-training on 16,384 H100s: GPU-hours (full-stack audit)",
         published=LLAMA31_405B_GPU_HOURS, unit="GPU-h", predict=lambda: llama31_405b().gpu_hours,
         tolerance=0.20, source=SOURCE,
         note="The audit counts the 8K-context pre-training with its failures and checkpoints; the card also "
              "counts the long-context stage (up to 128K tokens with CP 16, at a lower MFU), annealing, and "
              "whatever else ran on the GPUs. Kernel efficiencies come from each GEMM's shape. The audit recomputes "
              "every layer, more than the Llama 3 rows of the training cases, which keep fp32 gradients and "
              "recompute the least share of the layers that fits (Meta trimmed a layer from the first and last "
              "stages instead, which uniform stages cannot copy): that lowers its MFU below Meta's and puts its "
              "GPU-hours above the card's although it counts only part of the run.")
]
