"""How fast this machine copies a checkpoint's bytes, by the size of each copy: the term c_N of the lab's model.

    python benchmarks/bench_lab_copy_pieces.py --json out.json      # about a minute

The ``concurrent`` engine's stall is a rank's copy of its state into a snapshot buffer, tensor by tensor
(:func:`mlsysim.lab.store.fill`): at a gigabyte on 2 ranks, 30 tensors of 16.8 MB and some small ones a rank.
glibc's ``memcpy`` writes a copy of at least its non-temporal threshold with streaming stores that skip the
cache, and a smaller one through it (each line of the destination read before it is written); the threshold
is 3/4 of the last-level cache it counts per thread (glibc 2.33 on). A virtual machine that reports its
host's whole L3 to two vCPUs puts the threshold above a rank's tensors, so one thread copying a rank's bytes
in one piece measures the faster way and the job copies the slower one. This times ``--threads`` threads
copying ``--per-thread-mb`` each, in pieces of every size of ``--pieces-mb`` and in one piece
(:func:`mlsysim.lab.distributed.terms.parallel_copy_Bps`), beside the threshold this machine's cache gives.
Target: a piece at least the threshold copies at least 1.25 times as fast as one under it, one thread alone,
where both fit in a thread's part. A measurement, not a test.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from lab_report import finish, record_head

JOB_PIECE_B = 16822272       # a rank's largest tensor at a gigabyte on 2 ranks (the lab's job, 2 layers)


def l3_B() -> int | None:
    """The last-level cache this machine reports to cpu0 (sysfs), bytes; None where it reports none."""
    caches = sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"))
    sizes = {}
    for c in caches:
        try:
            level, text = int((c / "level").read_text()), (c / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        scale = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30}.get(text[-1:], 1)
        sizes[level] = int(text.rstrip("KMG")) * scale
    return sizes[max(sizes)] if sizes else None


def shared_by() -> int:
    """The CPUs that share cpu0's last-level cache (sysfs), else this machine's CPUs."""
    caches = sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"))
    try:
        text = (caches[-1] / "shared_cpu_list").read_text().strip()
    except (OSError, IndexError):
        return os.cpu_count() or 1
    count = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count


def main(argv=None) -> int:
    from mlsysim.lab.distributed.terms import parallel_copy_Bps
    p = argparse.ArgumentParser()
    p.add_argument("--per-thread-mb", type=float, default=506.5, help="bytes each thread copies (a 1 GB job's rank)")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--pieces-mb", default=f"4.19,{JOB_PIECE_B / 1e6},67.1,134.2",
                   help="piece sizes, MB (the default holds the job's largest tensor exactly)")
    p.add_argument("--json", action="append", default=[])
    a = p.parse_args(argv)
    t0 = time.time()
    l3, sharing = l3_B(), shared_by()
    threshold = None if l3 is None else 0.75 * l3 / sharing
    pieces = [float(x) * 1e6 for x in a.pieces_mb.split(",")] + [None]
    rows = []
    for n in (int(x) for x in a.threads.split(",")):
        size = a.per_thread_mb * 1e6 * n
        for piece in pieces:
            rate = parallel_copy_Bps(size, n, piece_B=piece)
            rows.append({"threads": n, "piece_B": piece, "rate_Bps": rate})
            print(f"{n} thread(s), pieces of {'one' if piece is None else f'{piece / 1e6:.1f} MB'}: "
                  f"{rate / 1e9:.1f} GB/s")
    result = {**record_head("lab_copy_pieces/1", "bench_lab_copy_pieces.py", argv, t0),
              "glibc": os.confstr("CS_GNU_LIBC_VERSION"), "l3_B": l3, "l3_shared_by": sharing,
              "threshold_B": threshold, "job_piece_B": JOB_PIECE_B, "per_thread_B": a.per_thread_mb * 1e6,
              "rows": rows, "wall_s": time.time() - t0}
    alone = {r["piece_B"]: r["rate_Bps"] for r in rows if r["threads"] == 1 and r["piece_B"] is not None}
    below = [b for b in alone if threshold is not None and b < threshold]
    above = [b for b in alone if threshold is not None and threshold <= b <= a.per_thread_mb * 1e6]
    targets = []
    if below and above:
        lo, hi = max(below), min(above)
        targets.append((f"one thread: a {hi / 1e6:.0f} MB piece (at least the threshold, {threshold / 1e6:.0f} MB) "
                        f"copies 1.25 times as fast as a {lo / 1e6:.0f} MB one", alone[hi] >= 1.25 * alone[lo],
                        f"{alone[hi] / 1e9:.1f} against {alone[lo] / 1e9:.1f} GB/s"))
    return finish(targets, result, a.json)


if __name__ == "__main__":
    sys.exit(main())
