"""T, the start of a torchrun job of the distributed lab: the model's term for a restart's process start and
rendezvous (:func:`job_start_s`, the mean of two launches) and its measurement (:func:`start_s`)."""
from __future__ import annotations

import math
import tempfile
import time

from ...errors import MlsysimError


def job_start_s(first_s: float, apart_s: float | None = None) -> float:
    """T for a job's restarts, in seconds: the mean of the job's own first start (launch to its first resume)
    and, where one was timed (``apart_s``), a launch of the same job apart (``start_s`` here); ``first_s`` alone
    without it. A start is one sample of a noisy quantity: Python and PyTorch loaded from the page cache or
    from the disk, the rendezvous, the process groups, on cores the job's other processes share. In the ten
    kept runs ``lab_dist-2026-12-05j`` to ``-06g`` the two launches of one job differed by up to 3.9 s (5.8 and
    9.6 s on 2 nodes x 1), and its restarts fell on either side of its first start, so two samples bound the
    restarts better than one (the downtimes whose prediction lies within ±25 % of them: 39 of 40 with the mean, 36
    with the first start alone; in ``-06h``, recorded after, 4 of 4 against 1, its two launches on 2 x 1 taking 6.2
    and 15.1 s; in ``-06i`` 2 of 4 against 4, its restarts on 2 x 1, 8.7 and 7.6 s, below both launches, 9.5 and
    15.8 s; in ``-06j`` 1 of 4 against 3; in ``-07``, each loss timed three times, 3 of 4 either way, and in ``-07b``
    to ``-08b`` 4 of 4 either way: over the twenty-one runs 77 of 84 against 75).

    >>> job_start_s(6.65, 9.27), job_start_s(6.65)
    (7.96, 6.65)
    """
    for name, v in (("first_s", first_s), ("apart_s", apart_s)):
        if (v is not None or name == "first_s") and not (isinstance(v, (int, float)) and 0 < v < math.inf):
            raise MlsysimError(f"{name} must be a finite start in seconds > 0, got {v!r}")
    return first_s if apart_s is None else (first_s + apart_s) / 2


def start_s(launch, nproc: int, nodes: int = 1, d_model: int = 32, layers: int = 2, repeats: int = 1) -> tuple:
    """(seconds, of which the preparation) from launching a torchrun job of ``nodes`` agents x ``nproc`` ranks (this
    lab's worker, this package's engine, its memory tiers) to rank 0's resume event: the processes' start (Python,
    PyTorch), the rendezvous, the process groups and the job's setup, with the ``concurrent`` engine's preparation
    of its snapshot buffers (its ``prepared_s`` event; None without one); the least of ``repeats``. The benchmark
    takes T from it and the killed job's own start (``DistributedRun.start_s``). ``launch``: the launcher's
    ``launch`` (passed in: the launcher imports this module)."""
    best = (math.inf, None)
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="mlsysim-start-") as tmp:
            t0 = time.monotonic()
            run = launch(tmp, nproc, 1, every=2, engine="concurrent", nodes=nodes, memory=nodes > 1,
                         d_model=d_model, layers=layers)
            took = next(t for e, t in zip(run.events, run.times) if "resumed_from" in e) - t0
            best = min(best, (took, next((e["prepared_s"] for e in run.events if "prepared_s" in e), None)),
                       key=lambda x: x[0])
    return best
