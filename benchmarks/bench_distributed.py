"""One train_step and training_memory call, a broadcast sweep, and the full layout search."""
import numpy as np

import mlsysim as ms
from run import Bench

_m, _c = ms.model("llama-3-70b"), ms.cluster("dgx-h100", nodes=128)
_mb = np.tile(np.array([1, 2, 4, 8]), 25_000).astype(float)   # 1e5 configurations


def _step():
    return ms.train_step(_m, _c, global_batch=1024, seq_len=4096, tp=8, pp=8, dp=16)


BENCHMARKS = [
    Bench("train_step(), 70B on 1,024 H100s", _step, "<= 50 µs"),
    Bench("train_step(), by registry names", lambda: ms.train_step("llama-3-8b", "dgx-h100", global_batch=16,
                                                                   seq_len=4096, tp=8, pp=1), "<= 50 µs"),
    Bench("training_memory(), one configuration", lambda: ms.training_memory(_m, tp=8, pp=8, dp=16), "<= 50 µs"),
    Bench("train_step() sweep over 1e5 micro-batch sizes",
          lambda: ms.train_step(_m, _c, global_batch=1024, seq_len=4096, tp=8, pp=8, micro_batch=_mb),
          ">= 1e6 points/s", points=_mb.size, calls=1),
    Bench("best_parallelism(), 70B on 1,024 GPUs (full space)",
          lambda: ms.best_parallelism(_m, _c, 1024, 4096), "<= 100 ms", calls=1, repeats=7),
]
