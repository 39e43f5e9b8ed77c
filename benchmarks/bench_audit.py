"""The full-stack audit (target: well under 100 ms, fast enough to redraw a widget) and the CLI."""
import subprocess
import sys

import mlsysim as ms
from run import Bench

_c = ms.cluster("dgx-h100", nodes=64)


def _help():
    subprocess.run([sys.executable, "-m", "mlsysim.cli", "--help"], check=True, capture_output=True)


BENCHMARKS = [
    Bench("audit(), Llama-3-70B on 512 H100s (searches 9,600 layouts twice)",
          lambda: ms.audit("llama-3-70b", _c, global_batch=512), "<= 100 ms", repeats=5),
    Bench("audit(), fixed checkpoint strategy",
          lambda: ms.audit("llama-3-70b", _c, global_batch=512, strategy="async"), "<= 100 ms", repeats=5),
    Bench("audit() of an infeasible run (reason and fix)", lambda: _infeasible(), "<= 100 ms", repeats=3),
    Bench("mlsysim --help (start-up included)", _help, "<= 1 s", calls=1, repeats=3),
]


def _infeasible():
    try:
        ms.audit("llama-3-70b", ms.cluster("dgx-h100", nodes=1))
    except ms.InfeasibleError:
        pass
