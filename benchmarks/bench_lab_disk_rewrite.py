"""How fast N writers at once make their bytes durable, written as new files or rewritten in place, and at the
job's own size or scaled from a smaller one: the term W_N of the lab's model.

    python benchmarks/bench_lab_disk_rewrite.py --json out.json      # about a minute

The distributed job's writers write each checkpoint into a new file and delete the older checkpoint once the
newer is durable. For every number of writers in ``--writers`` and every total in ``--sizes-mb`` this times
``--rounds`` rounds of the writers at once, each writing ``total / writers`` bytes
(:func:`mlsysim.lab.floors.write_once`: 16 MB writes, writeback started chunk by chunk, ``fsync``), two ways:
``new`` (:func:`mlsysim.lab.distributed.disk.shared_write_Bps`: each round new files, the round before deleted)
and ``rewrite`` (each round the same files again, ``O_TRUNC``, as W_N's probe did in the kept runs up to
``lab_dist-2026-12-05l``). Each rate is the total over the median round. Targets: rewriting in place is not
faster than writing new files, and a gigabyte written new takes less than four times 256 MB does (a write's
costs that do not grow with its bytes, counted once). A measurement, not a test.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from lab_report import finish, record_head


def rewrite_Bps(directory, size_B: float, world: int, rounds: int) -> float:
    """As :func:`mlsysim.lab.distributed.disk.shared_write_Bps`, but every round rewrites the same files."""
    import numpy as np
    from mlsysim.lab.distributed.beside import together_s
    from mlsysim.lab.floors import write_once
    data = np.full(int(size_B) // world, 7, dtype=np.uint8)
    paths = [os.path.join(directory, f"rewrite-{i}.bin") for i in range(world)]
    times = [together_s(lambda i: write_once(paths[i], data), world) for _ in range(rounds)]
    for p in paths:
        os.remove(p)
    return data.nbytes * world / statistics.median(times)


def main(argv=None) -> int:
    from mlsysim.lab.distributed.disk import shared_write_Bps
    p = argparse.ArgumentParser()
    p.add_argument("--writers", default="1,2,4")
    p.add_argument("--sizes-mb", default="256,1013", help="bytes written in all by the writers of a round, MB")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--dir", default=None, help="where the files go (default: the temporary directory)")
    p.add_argument("--json", action="append", default=[])
    a = p.parse_args(argv)
    t0 = time.time()
    rows = []
    with tempfile.TemporaryDirectory(dir=a.dir, prefix="disk-rewrite-") as tmp:
        for n in (int(x) for x in a.writers.split(",")):
            for size in (float(x) * 1e6 for x in a.sizes_mb.split(",")):
                row = {"writers": n, "size_B": size, "new_Bps": shared_write_Bps(tmp, size, n, a.rounds),
                       "rewrite_Bps": rewrite_Bps(tmp, size, n, a.rounds)}
                rows.append(row)
                print(f"{n} writer(s), {size / 1e6:.0f} MB in all: new files {row['new_Bps'] / 1e9:.2f} GB/s, "
                      f"rewritten {row['rewrite_Bps'] / 1e9:.2f} GB/s", flush=True)
    result = {**record_head("lab_disk_rewrite/1", "bench_lab_disk_rewrite.py", argv, t0), "rounds": a.rounds,
              "rows": rows, "wall_s": time.time() - t0}
    slower = [r for r in rows if r["rewrite_Bps"] <= r["new_Bps"]]
    targets = [(f"rewriting in place is not faster than writing new files ({len(rows)} cases)",
                len(slower) == len(rows), f"{len(slower)} of {len(rows)}")]
    for n in {r["writers"] for r in rows}:
        by = {round(r["size_B"] / 1e6): r["new_Bps"] for r in rows if r["writers"] == n}
        if 256 in by and 1013 in by:
            t256, t1g = 256e6 / by[256], 1013e6 / by[1013]
            targets.append((f"{n} writer(s): 1013 MB new takes less than 1013/256 times 256 MB",
                            t1g < t256 * 1013 / 256, f"{t1g:.3f} s against {t256 * 1013 / 256:.3f} s"))
    return finish(targets, result, a.json)


if __name__ == "__main__":
    sys.exit(main())
