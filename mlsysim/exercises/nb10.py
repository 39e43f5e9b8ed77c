"""Exercises of notebook 10 (GPU against wafer)."""
from ..registry import hardware
from ..wafer import wafers_needed, weight_streaming, weights_resident
from . import Exercise

EXERCISES = [
    Exercise("10.1", "Tokens on one CS-3 at which weight-streamed Llama-3-8B training (2,048-token sequences, "
                     "fp16) turns compute-bound",
             lambda: float(weight_streaming("llama-3-8b", "cs-3", batch=1, seq_len=2048,
                                            recompute="full").compute_bound_batch) * 2048,
             rtol=0.03, hint="Forward FLOP per streamed weight byte must reach peak / injection bandwidth."),
    Exercise("10.2", "CS-3 wafers needed to hold Llama-3.1-405B with 16-bit weights",
             lambda: wafers_needed("llama-3.1-405b", "cs-3"), rtol=0.001,
             hint="Weights (and a little KV cache) over 44 GB per wafer, rounded up."),
    Exercise("10.3", "Is the compute-bound batch of Llama-3-70B training (2,048-token sequences, full "
                     "recomputation) reachable on one CS-3? (True or False)",
             lambda: bool(weight_streaming("llama-3-70b", "cs-3", batch=1, seq_len=2048,
                                           recompute="full").reachable),
             hint="Compare compute_bound_batch with max_batch."),
    Exercise("10.4", "Largest number of 8,192-token conversations Llama-3-70B can hold on the four CS-3s "
                     "that store its weights",
             lambda: float(weights_resident("llama-3-70b", "cs-3", context_tokens=8192).max_batch), rtol=0.001,
             hint="What is left of 4 x 44 GB after the weights, over the KV cache of one conversation."),
    Exercise("10.5", "Streaming ridge of a CS-2 in fp16 (FLOP per streamed byte)",
             lambda: hardware("cs-2").peak("fp16") / hardware("cs-2").host_link_Bps, rtol=0.02,
             hint="Peak FLOP/s over the injection bandwidth per direction."),
]
