"""The disk shared by N ranks (no PyTorch): N writers at once (W_N) and N readers at once (r_N, r_1N) of
:mod:`mlsysim.lab.distributed.terms`.

**New files, not rewritten ones.** The job's writers write each checkpoint into a file of its own, and the
checkpoint before is deleted once the newer one is durable. Rewriting a file in place (``O_TRUNC``) is not
the same write: the file's old blocks are released before the new ones are allocated, inside the timed
write. On the machine the lab was last recorded on it took 1.2 to 1.8 times as long as writing new files
(1, 2 and 4 writers, 256 MB and 1013 MB in all, two trials: ``benchmarks/records/lab_disk_rewrite-2026-12-05``
and ``-05b``), so :func:`shared_write_Bps` writes new files each round, the round before deleted, as the job
does; the kept runs up to ``lab_dist-2026-12-05l`` rewrote the same files, at most 256 MB in all, and scaled
that by the bytes.

**At the job's own size.** One write + ``fsync`` carries costs that do not grow with its bytes (the first
chunk's way to the disk, the journal's commit at the ``fsync``), so a rate timed at 256 MB and scaled to a
gigabyte counts them four times over; in the same records 1013 MB of new files took less than 1013/256 times
as long as 256 MB in 5 of the 6 cases. :func:`shared_write_Bps` times the job's own bytes.
"""
from __future__ import annotations

import os
import statistics

import numpy as np

from ...errors import check_integer, check_positive
from .beside import together_s


def shared_write_Bps(directory, size_B: float, world: int, rounds: int = 3) -> float:
    """Bytes per second of the disk shared by ``world`` threads at once, each writing a new file of
    ``size_B / world`` bytes in ``directory`` (:func:`mlsysim.lab.floors.write_once`: 16 MB writes, writeback
    started chunk by chunk, ``fsync``), the files of the round before deleted first, as the job deletes its
    older checkpoint; ``size_B`` over the time until the last writer is done, the median of ``rounds`` (the disk
    drifts). The last round's files are removed.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     rate = shared_write_Bps(d, 8e6, 2, rounds=2)
    ...     left = os.listdir(d)
    >>> rate > 0, left
    (True, [])
    """
    from ..floors import write_once
    check_positive("size_B", size_B)
    check_integer("world", world)
    check_integer("rounds", rounds)
    data = np.full(max(int(size_B) // world, 1), 7, dtype=np.uint8)
    times, before = [], []
    for r in range(rounds):
        paths = [os.path.join(directory, f"shared-w{r}-{i}.bin") for i in range(world)]
        for p in before:
            os.remove(p)
        times.append(together_s(lambda i: write_once(paths[i], data), world))
        before = paths
    for p in before:
        os.remove(p)
    return data.nbytes * world / statistics.median(times)


def shared_reads_Bps(directory, size_B: float, world: int) -> tuple[float, float]:
    """(read, same-file read) bytes per second of the disk shared by ``world`` threads at once: each reading
    cold (pages dropped first) a file of ``size_B / world`` bytes in ``directory``, the best of two; then every
    thread reading all the files, cold, at once (``size_B`` / the time until all have them; best of two). The
    files are written first, untimed, and removed at the end."""
    from ...measure import drop_page_cache
    from ..floors import write_once
    check_positive("size_B", size_B)
    check_integer("world", world)
    n = max(int(size_B) // world, 1)
    data = np.full(n, 7, dtype=np.uint8)
    bufs = [np.zeros(n, dtype=np.uint8) for _ in range(world)]
    paths = [os.path.join(directory, f"shared-r{i}.bin") for i in range(world)]
    for p in paths:
        write_once(p, data)

    def read(i):
        with open(paths[i], "rb", buffering=0) as f:
            f.readinto(memoryview(bufs[i]))

    def read_all(i):
        for p in paths:
            with open(p, "rb", buffering=0) as f:
                f.readinto(memoryview(bufs[i]))

    def cold(fn) -> float:
        for p in paths:
            drop_page_cache(p)
        return together_s(fn, world)

    try:
        reads = min(cold(read) for _ in range(2))
        same = min(cold(read_all) for _ in range(2))
    finally:
        for p in paths:
            os.remove(p)
    return n * world / reads, n * world / same
