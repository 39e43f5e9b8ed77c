"""Exercises of notebook 00 (hello, roofline)."""
from ..roofline import crossover_batch, roofline
from ..registry import hardware
from . import Exercise

EXERCISES = [
    Exercise("00.1", "Arithmetic intensity of one Llama-3-8B decode step, batch 1, bf16, empty cache (FLOP/B)",
             lambda: roofline("llama-3-8b", "h100", batch=1).intensity, rtol=0.03,
             hint="Work is 2 FLOP per weight per token; traffic is 2 bytes per weight read."),
    Exercise("00.2", "Ridge point of an A100-80GB in bf16 (FLOP/B)",
             lambda: hardware("a100-80gb").ridge("bf16"), rtol=0.02,
             hint="Dense bf16 peak divided by HBM bandwidth."),
    Exercise("00.3", "Smallest batch at which Llama-3-8B decode on an H100 (empty cache) is compute-bound",
             lambda: crossover_batch("llama-3-8b", "h100"), rtol=0.03,
             hint="Look for the batch where compute time overtakes memory time; it sits near the ridge point."),
    Exercise("00.4", "Llama-3-8B decode on an H100 at batch 64 with 4,096 cached tokens per sequence: "
             "'compute' or 'memory' bound?",
             lambda: roofline("llama-3-8b", "h100", batch=64, context_tokens=4096).bound,
             hint="Every sequence reads its own KV cache each step; that traffic grows with the batch too."),
    Exercise("00.5", "ResNet-50 bf16 inference on an A100-80GB at batch 256: images per second (roofline)",
             lambda: roofline("resnet-50", "a100-80gb", batch=256).tokens_per_s, rtol=0.03,
             hint="Images per second = batch / time per pass."),
]
