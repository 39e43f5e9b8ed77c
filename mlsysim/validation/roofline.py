"""The roofline as a bound on published single-device measurements, and generational speed-ups."""
from __future__ import annotations

import numpy as np

from ..roofline import roofline
from . import Case

# NVIDIA NeMo Framework user guide, "Performance: Llama" (inference, Llama-2-7B, TP=1, one GPU,
# 128 input and 20 output tokens): average request latency in ms, A100 80GB SXM4 vs H100 80GB HBM3.
NEMO_SOURCE = ("NVIDIA NeMo Framework user guide, Performance > Llama 2 inference table "
               "(docs.nvidia.com/nemo-framework/user-guide/latest/performance/llama.html)")
NEMO_LLAMA2_7B_MS = {1: (234.0, 153.8), 2: (249.6, 160.8), 4: (272.6, 174.8), 8: (329.5, 199.2)}
NEMO_PROMPT, NEMO_OUTPUT = 128, 20


def request_latency_bound(model: str, hardware: str, batch: int, prompt: int, output: int,
                          precision: str = "bf16") -> float:
    """Roofline lower bound on a request: prefill of ``prompt`` tokens (which yields the first
    output token), then ``output - 1`` decode steps over a growing cache."""
    prefill = roofline(model, hardware, batch=batch, phase="prefill", seq_len=prompt, precision=precision).time_s
    steps = roofline(model, hardware, batch=batch, precision=precision,
                     context_tokens=prompt + np.arange(output - 1)).time_s
    return float(prefill + np.sum(steps))


def _nemo_speedup(batch: int) -> float:
    return (request_latency_bound("llama-2-7b", "a100-80gb", batch, NEMO_PROMPT, NEMO_OUTPUT) /
            request_latency_bound("llama-2-7b", "h100-sxm", batch, NEMO_PROMPT, NEMO_OUTPUT))


CASES = [
    Case(id="V1", area="roofline", title="Llama-2-7B decode, batch 1, bf16, A100-80GB (tokens/s)",
         published=104.9, unit="tok/s",
         predict=lambda: roofline("llama-2-7b", "a100-80gb", batch=1, context_tokens=0).tokens_per_s,
         kind="bound", direction="upper", tolerance=0.40,
         source="pytorch-labs/gpt-fast README (A100-80GB, power-capped at 330 W): 104.9 tok/s",
         note="The roofline streams 13.5 GB of weights at the full 2,039 GB/s; gpt-fast reaches 68 % of that "
              "(1.4 TB/s effective), the usual gap between spec and achieved HBM bandwidth plus kernel overheads."),
    Case(id="V4", area="roofline", title="LLaMA-7B prefill of 2,048 tokens, fp16, A100 (TTFT, s)",
         published=0.133, unit="s",
         predict=lambda: roofline("llama-2-7b", "a100-40gb", phase="prefill", seq_len=2048,
                                  precision="fp16").time_s,
         kind="bound", direction="lower", tolerance=0.40,
         source="NVIDIA TensorRT-LLM performance table: LLaMA-7B, batch 1, 2,048 input tokens, TTFT 133 ms",
         note="Prefill is compute-bound: 27.6 TFLOP at 312 TFLOP/s takes 88 ms; the measured 133 ms is 66 % "
              "of peak, typical of large fp16 GEMMs plus attention and launch overheads."),
]

CASES += [
    Case(id=f"NeMo-b{b}", area="roofline",
         title=f"H100 over A100 speed-up, Llama-2-7B, batch {b}, {NEMO_PROMPT} in / {NEMO_OUTPUT} out",
         published=a100 / h100, unit="x", predict=lambda b=b: _nemo_speedup(b), tolerance=0.15,
         source=NEMO_SOURCE,
         note="Decode-dominated requests speed up by about the bandwidth ratio (1.64x). Measured speed-ups "
              "fall short at batch 1, where fixed per-kernel launch costs do not shrink with faster memory.")
    for b, (a100, h100) in NEMO_LLAMA2_7B_MS.items()
] + [
    Case(id=f"NeMo-lat-b{b}", area="roofline",
         title=f"Llama-2-7B request latency on H100, batch {b} (s)", published=h100 / 1e3, unit="s",
         predict=lambda b=b: request_latency_bound("llama-2-7b", "h100-sxm", b, NEMO_PROMPT, NEMO_OUTPUT),
         kind="bound", direction="lower", tolerance=0.55, source=NEMO_SOURCE,
         note="At batch 1 the measured request takes about twice the roofline time: each of the 20 steps "
              "launches hundreds of small kernels, a cost the bandwidth bound does not see.")
    for b, (_, h100) in NEMO_LLAMA2_7B_MS.items()
]
