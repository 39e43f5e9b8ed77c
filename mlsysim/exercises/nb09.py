"""Exercises of notebook 09 (sensitivity and the inverse roofline)."""
from ..roofline import roofline
from ..sensitivity import hardware_sensitivity, inverse_roofline
from ..serving import decode
from . import Exercise

MODEL = "llama-3-8b"

EXERCISES = [
    Exercise("09.1", "Elasticity of a Llama-3-8B decode step (batch 1, 2,048 tokens of context) to the "
                     "H100's peak FLOP/s",
             lambda: hardware_sensitivity(roofline, MODEL, "h100", batch=1, context_tokens=2048)["peak"].elasticity,
             rtol=0.02, hint="Is the step compute-bound or memory-bound? What does 10 % more FLOP/s change?"),
    Exercise("09.2", "Bandwidth (B/s) a device with the H100's FLOP/s needs for a 5 ms Llama-3-8B ITL "
                     "(serving model), 32 sequences at 8,192 tokens of context",
             lambda: inverse_roofline(MODEL, "h100", target_s=5e-3, solver=decode, batch=32,
                                      context_tokens=8192).bandwidth_Bps,
             rtol=0.02, unit="B/s",
             hint="ms.inverse_roofline(..., solver=ms.decode): the memory term must shrink until the step fits."),
    Exercise("09.3", "Elasticity of the decode step time to the batch, Llama-3-8B, 16 sequences at 16,384 "
                     "tokens of context, B200",
             lambda: hardware_sensitivity(roofline, MODEL, "b200", specs=(), inputs={"batch": 16},
                                          context_tokens=16384)["batch"].elasticity,
             rtol=0.02, hint="Which share of the traffic grows with the batch: weights or KV cache?"),
    Exercise("09.4", "Spec to invest in for a 4,096-token Llama-3-8B prefill on a B200: 'peak', 'bandwidth' "
                     "or 'capacity'",
             lambda: hardware_sensitivity(roofline, MODEL, "b200", phase="prefill", seq_len=4096).most_influential,
             hint="Prefill multiplies every weight by thousands of tokens."),
    Exercise("09.5", "Shortest decode step (s) any bandwidth allows, Llama-3-8B, 512 sequences at 512 tokens "
                     "of context, H100",
             lambda: roofline(MODEL, "h100", batch=512, context_tokens=512).compute_s, rtol=0.02, unit="s",
             hint="With infinite bandwidth only the compute term is left."),
]
