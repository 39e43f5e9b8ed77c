"""Exercises of notebook 05 (quantization)."""
from ..quantization import quantized, quantized_footprint
from . import Exercise


def _overhead_s() -> float:
    from ..validation.quantization import fixed_overhead_s
    return fixed_overhead_s()


EXERCISES = [
    Exercise("05.1", "Speed-up of W8A16 over bf16 for Llama-2-7B decode at batch 1 on an A100-80GB",
             lambda: quantized("llama-2-7b", "a100-80gb", "w8a16").speedup, rtol=0.02,
             hint="Decode at batch 1 is memory-bound: compare the bytes read per step."),
    Exercise("05.2", "Speed-up of W4A16 over bf16 for a 2,048-token Llama-3-8B prefill on an H100",
             lambda: quantized("llama-3-8b", "h100", "w4a16", phase="prefill", seq_len=2048).speedup,
             rtol=0.02, hint="Prefill is compute-bound, and W4A16 still computes in bf16."),
    Exercise("05.3", "Bytes of Llama-3-70B weights in int4 with one 2-byte scale per 128 weights",
             lambda: quantized_footprint("llama-3-70b", "h100", "w4a16", group_size=128).weights_B,
             rtol=0.02, unit="B", hint="Parameters times (0.5 + 2/128) bytes."),
    Exercise("05.4", "Does Llama-3-70B decode with W8A16, batch 1 and 4,096 cached tokens fit on one "
             "80 GB H100? (True or False)",
             lambda: bool(quantized_footprint("llama-3-70b", "h100", "w8a16", context_tokens=4096).fits),
             hint="Add the int8 weights, the bf16 KV cache and the live activations."),
    Exercise("05.5", "W4A16 (group 32, 4-byte scale and zero point) speed-up for Llama-2-7B decode on an "
             "A100-80GB when every token also pays gpt-fast's fixed overhead",
             lambda: quantized("llama-2-7b", "a100-80gb", "w4a16", group_size=32, group_B=4.0,
                               overhead_s=_overhead_s()).speedup, rtol=0.02,
             hint="Amdahl: the fixed time per token does not shrink with the weights."),
]
