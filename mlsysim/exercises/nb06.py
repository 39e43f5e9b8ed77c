"""Exercises of notebook 06, part 1 (scaling to 1,000 GPUs: memory, step time, layout search).

Part 2 (failures and checkpoints) keeps its exercises, 06.11 onwards, in its own module.
"""
from ..memory import model_states_B
from ..parallel import best_parallelism, train_step
from ..registry import cluster
from ..units import day
from . import Exercise

def _best_70b():
    return best_parallelism("llama-3-70b", cluster("dgx-h100", nodes=128), 1024, 4096).best


EXERCISES = [
    Exercise("06.1", "Model states per GPU (GB) of Llama-3-70B with mixed-precision Adam and ZeRO-1 over 64 "
             "data-parallel GPUs",
             lambda: model_states_B("llama-3-70b", zero_stage=1, dp=64) / 1e9, rtol=0.02, unit="",
             hint="ZeRO-1 keeps weights and gradients whole (2 + 2 bytes per parameter) and shards the 12 "
                  "bytes of master weights and moments."),
    Exercise("06.2", "Bubble fraction (p−1)/(v·m) of Llama-3-70B on 1,024 H100s with tp 8, pp 8, micro-batch "
             "1 and interleave 2, global batch 1,024 × 4,096 tokens",
             lambda: train_step("llama-3-70b", cluster("dgx-h100", nodes=128), 1024, 4096, tp=8, pp=8,
                                micro_batch=1, interleave=2).bubble_fraction, rtol=0.01,
             hint="dp = 1,024 / (tp·pp); m = global batch / (dp · micro-batch)."),
    Exercise("06.3", "MFU of the fastest layout that best_parallelism finds for Llama-3-70B on 1,024 H100s "
             "(1,024 × 4,096 tokens per step)", lambda: _best_70b().mfu, rtol=0.02,
             hint="ms.best_parallelism(...).best is a TrainStep."),
    Exercise("06.4", "What stops Llama-3-70B from training on one DGX H100 (8 GPUs) with any layout: "
             "'memory', 'compute' or 'network'?", lambda: "memory",
             hint="Add up 16 bytes per parameter of model states and compare with 8 × 80 GB."),
    Exercise("06.5", "Days to train Llama-3-70B on 15T tokens at the throughput of that fastest layout",
             lambda: 15e12 / _best_70b().tokens_per_s / day, rtol=0.03,
             hint="tokens / (tokens per second), in days."),
]
