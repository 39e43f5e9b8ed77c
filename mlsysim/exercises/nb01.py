"""Exercises of notebook 01 (the memory wall)."""
from ..roofline import roofline
from ..registry import hardware
from . import Exercise


def _speedup(new: str, old: str, **kw) -> float:
    return roofline("llama-3-8b", old, **kw).time_s / roofline("llama-3-8b", new, **kw).time_s


EXERCISES = [
    Exercise("01.1", "Speed-up of an H200 over an H100 for Llama-3-8B decode at batch 1 (bf16, empty cache)",
             lambda: _speedup("h200", "h100", batch=1), rtol=0.02,
             hint="At batch 1 decode is memory-bound: which spec changed between the two?"),
    Exercise("01.2", "Speed-up of a B200 over an H100 for a Llama-3-8B prefill of 2,048 tokens (bf16)",
             lambda: _speedup("b200", "h100", phase="prefill", seq_len=2048), rtol=0.02,
             hint="Prefill is compute-bound."),
    Exercise("01.3", "Factor by which the bf16 ridge point grew from the A100-80GB to the B200 (HGX)",
             lambda: hardware("b200").ridge("bf16") / hardware("a100-80gb").ridge("bf16"), rtol=0.02,
             hint="Compare peak/bandwidth of both."),
    Exercise("01.4", "Which spec sets batch-1 decode speed: 'bandwidth', 'flops' or 'capacity'?",
             lambda: "bandwidth", hint="Look at which time term is larger at batch 1."),
]
