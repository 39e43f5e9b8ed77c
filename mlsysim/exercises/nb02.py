"""Exercises of notebook 02 (two phases: prefill and decode)."""
from ..serving import decode, expected_accepted_tokens, min_tp, prefill, serving_plan
from . import Exercise


def _itl_speedup(new: str, old: str) -> float:
    return decode("llama-3-8b", old, batch=1).time_s / decode("llama-3-8b", new, batch=1).time_s


EXERCISES = [
    Exercise("02.1", "Time to first token of Llama-3-8B for a 4,096-token prompt on one H100 (bf16, default "
             "efficiencies), in seconds",
             lambda: prefill("llama-3-8b", "h100", prompt_tokens=4096).time_s, rtol=0.02, unit="s",
             hint="ms.prefill(...).time_s; a prompt this long is compute-bound."),
    Exercise("02.2", "Speed-up of an H200 over an H100 in time per output token, Llama-3-8B, batch 1, "
             "2,048 cached tokens",
             lambda: _itl_speedup("h200", "h100"), rtol=0.02,
             hint="Decode is memory-bound: compare bandwidths, then remember the fixed per-layer time."),
    Exercise("02.3", "Fewest H100s (tensor parallelism) that hold Llama-3-70B in bf16 with 4,608 cached tokens",
             lambda: min_tp("llama-3-70b", "h100", context_tokens=4608), rtol=0.0,
             hint="ms.min_tp: the weights alone are about 141 GB."),
    Exercise("02.4", "Largest batch of Llama-3-8B on one H100 whose time per output token stays within 20 ms "
             "after 4,096 prompt + 512 output tokens",
             lambda: serving_plan("llama-3-8b", "h100", itl_s=0.02, prompt_tokens=4096, output_tokens=512,
                                  tp=1).candidates[0]["max_batch"], rtol=0.0,
             hint="Sweep ms.decode over an array of batches at 4,608 cached tokens and keep those under 20 ms "
                  "that fit in memory."),
    Exercise("02.5", "Expected tokens per verification step with a draft of k = 5 tokens and acceptance rate 0.7",
             lambda: expected_accepted_tokens(5, 0.7), rtol=0.01,
             hint="(1 - a^(k+1)) / (1 - a)."),
    Exercise("02.6", "Which spec sets the TTFT of a 4,096-token prompt: 'flops', 'bandwidth' or 'capacity'?",
             lambda: "flops" if prefill("llama-3-8b", "h100", prompt_tokens=4096).bound == "compute"
             else "bandwidth",
             hint="Look at the bound of the prefill."),
]
