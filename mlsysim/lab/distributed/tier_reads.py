"""The memory tier read back (no PyTorch): a shard's file mapped in place and read through its CRC-32, by one
process (M) and by N processes at once (M_N), terms of :mod:`mlsysim.lab.distributed.terms`.

**N processes at once, not one scaled.** After a node loss every rank reads its shard back from its node's
memory tier at the same moment: N processes, each mapping a file of its own (a minor fault per 4 KB page, in
page tables of its own) and checking it. One process's best of three, shared by N ranks on C cores
(N / C times as long), leaves out whatever N processes at once cost beyond their turns on the cores, and the
read phase of the recovery on 2 nodes x 2 took 1.4 to 2.2 times that in the five runs on the machine the lab was
last recorded on (``benchmarks/records/lab_dist-2026-12-05j`` to ``lab_dist-2026-12-06``; on 2 nodes x 1, two
ranks on two cores, 0.7 to 1.3 times). :func:`parallel_map_read_Bps` times N processes at once, each its own
file of a rank's bytes, the median of its rounds (the job reads once, not at its best). In the first run to time
it (``lab_dist_one_point-2026-12-06``) the read phase lay between N R / M_N and share(N) R / M; in the first full
run (``lab_dist-2026-12-06b``) it took 0.99 times N R / M_N on 2 nodes x 2 (1.42 times share(N) R / M) and 1.42 times
on 2 nodes x 1 (1.29), the recovery 1.00 and 1.09 times the model. Without M_N that run's recovery on 2 nodes x 2
would have come to 1.08: whether M_N is the term the misses before it lacked, the runs to come say.
"""
from __future__ import annotations

import math
import multiprocessing
import queue
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from ...errors import MlsysimError, check_integer, check_positive

WAIT_S = 120.0         # the longest a round waits for its processes to start, or to finish


def map_read_Bps(size_B: float, directory=None, repeats: int = 3) -> float:
    """Bytes per second of mapping a file of ``size_B`` bytes of the memory tier in place and reading it
    through its CRC-32 (:func:`mlsysim.lab.store.map_file`, as a recovery reads a shard from a node's memory
    tier: the page cache's own pages, no buffer filled), in ``directory`` (default: where memory tiers go,
    :func:`~mlsysim.lab.distributed.tiers.memory_base`); the best of ``repeats``, the file removed."""
    from ..store import crc32, map_file
    from .tiers import memory_base
    check_positive("size_B", size_B)
    check_integer("repeats", repeats)
    with tempfile.TemporaryDirectory(dir=directory or memory_base(), prefix="map-") as tmp:
        path = Path(tmp) / "tier.bin"
        np.full(int(size_B), 7, dtype=np.uint8).tofile(path)
        best = math.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            crc32(map_file(path, int(size_B)))
            best = min(best, time.perf_counter() - t0)
    return int(size_B) / best


def _map_and_check(path: str, size: int, ready, out) -> None:
    """One reader: map ``path``, wait for the others, then read it through its CRC-32; put its (start, end)
    on the system-wide monotonic clock. A reader that cannot map its file breaks the barrier: no one waits."""
    from ..store import crc32, map_file
    try:
        data = map_file(path, size)
    except Exception:
        ready.abort()
        raise
    ready.wait(WAIT_S)
    t0 = time.monotonic()
    crc32(data)
    out.put((t0, time.monotonic()))


def _round_s(paths: list, size: int) -> float:
    """Seconds from the first reader's start to the last one's end, ``len(paths)`` processes at once."""
    ctx = multiprocessing.get_context("spawn")        # a process of its own each, as the job's ranks
    ready, out = ctx.Barrier(len(paths) + 1), ctx.Queue()
    procs = [ctx.Process(target=_map_and_check, args=(str(p), size, ready, out), daemon=True) for p in paths]
    for p in procs:
        p.start()
    try:
        ready.wait(WAIT_S)
        spans = [out.get(timeout=WAIT_S) for _ in procs]
    except (threading.BrokenBarrierError, queue.Empty):
        raise MlsysimError(f"a reader of the memory tier failed or did not finish within {WAIT_S:.0f} s "
                           f"(files {[str(p) for p in paths]})") from None
    finally:
        for p in procs:
            p.join(WAIT_S)
            if p.is_alive():                            # only a reader that hung: stopped by its own handle
                p.kill()
                p.join()
    if any(p.exitcode != 0 for p in procs):
        raise MlsysimError(f"a reader of the memory tier failed (exit codes {[p.exitcode for p in procs]})")
    return max(e for _, e in spans) - min(s for s, _ in spans)


def parallel_map_read_Bps(rank_B: float, world: int, directory=None, rounds: int = 3) -> float:
    """Bytes per second, all together, of ``world`` processes at once each mapping a file of ``rank_B`` bytes of
    the memory tier in place and reading it through its CRC-32 (as :func:`map_read_Bps` does in one), in
    ``directory`` (default: where memory tiers go); ``world`` x ``rank_B`` over the time from the first
    reader's start to the last one's end, the median of ``rounds``, each with new processes. The files are
    removed.

    >>> rate = parallel_map_read_Bps(2e6, 2, rounds=1)
    >>> 1e6 < rate < 1e13
    True
    """
    from .tiers import memory_base
    check_positive("rank_B", rank_B)
    check_integer("world", world)
    check_integer("rounds", rounds)
    size = int(rank_B)
    if size < 1:
        raise MlsysimError(f"rank_B must be at least one byte, got {rank_B!r}")
    with tempfile.TemporaryDirectory(dir=directory or memory_base(), prefix="map-n-") as tmp:
        paths = [Path(tmp) / f"tier-{i}.bin" for i in range(world)]
        for p in paths:
            np.full(size, 7, dtype=np.uint8).tofile(p)
        times = [_round_s(paths, size) for _ in range(rounds)]
    return world * size / statistics.median(times)
