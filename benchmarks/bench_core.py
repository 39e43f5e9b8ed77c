"""Import time, one roofline call, and a one-million-point roofline sweep."""
import subprocess
import sys

import numpy as np

import mlsysim as ms
from run import Bench

_model, _hw = ms.model("llama-3-8b"), ms.hardware("h100")
_batches = np.arange(1, 1_000_001, dtype=float)


def _import_once():
    """A fresh interpreter that imports mlsysim (its start-up time is included)."""
    subprocess.run([sys.executable, "-c", "import mlsysim"], check=True)


BENCHMARKS = [
    Bench("python -c 'import mlsysim' (start-up included)", _import_once, "<= 0.3 s", calls=1, repeats=5),
    Bench("roofline(), one decode step", lambda: ms.roofline(_model, _hw, batch=8, context_tokens=1024),
          "<= 50 µs"),
    Bench("roofline(), by registry names", lambda: ms.roofline("llama-3-8b", "h100", batch=8), "<= 50 µs"),
    Bench("roofline() sweep over 1e6 batch sizes", lambda: ms.roofline(_model, _hw, batch=_batches),
          ">= 1e6 points/s", points=_batches.size, calls=1),
]
