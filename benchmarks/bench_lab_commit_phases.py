"""Where the `concurrent` engine's time to durable goes in the distributed job, beside the writers timed alone
and beside busy processes: the terms W_N, o_b and B of the lab's model, next to the job's own phases.

    python benchmarks/bench_lab_commit_phases.py --json out.json      # about a quarter of an hour

For each point of ``--points`` (ranks x MB) it runs the job as ``bench_lab_dist.py`` does (the ``concurrent``
engine, storage only, a checkpoint every four steps after four plain ones) and takes from rank 0's commit events
each checkpoint's stall, the moment rank 0's own shard was durable (``shard_s``, from the start of ``save``) and
the global commit (``durable_s``): the data phase is ``shard_s`` less the stall, the commit phase ``durable_s``
less ``shard_s`` (the other ranks' shards, gathered to rank 0, and the global record written). Right after the
job, in the same minute, it times the N writers of the same bytes alone, each a new file
(:func:`mlsysim.lab.distributed.disk.shared_write_Bps`), and with their CRC-32 alone and beside N spinning
processes (:func:`mlsysim.lab.distributed.beside.beside`, its wait shortened: only the writers' times are
kept). Medians over the checkpoints. Target: the data phase lies between the writers alone and the writers
beside busy processes, at every point (the training's ranks are busy part of each step). A measurement, not a
test.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_lab_dist import EVERY, JOB_TIMEOUT_S, PLAIN, steps_for
from lab_report import finish, record_head


def phases(nproc: int, size_B: float, layers: int = 2) -> dict:
    """The job's phases at one point and the writers' probes right after it."""
    from mlsysim.lab.distributed.beside import beside
    from mlsysim.lab.distributed.disk import shared_write_Bps
    from mlsysim.lab.distributed.launcher import launch
    from mlsysim.lab.distributed.restore import config_for
    steps = steps_for(size_B)
    cfg = config_for(size_B, 32, layers, steps)
    with tempfile.TemporaryDirectory(prefix="commit-phases-") as d:
        run = launch(Path(d), nproc, steps, every=EVERY, engine="concurrent", d_model=cfg.d_model, layers=layers,
                     plain_steps=PLAIN, timeout_s=JOB_TIMEOUT_S)
    commits = [e for e in run.events if "commit" in e]
    stalls = [e for e in run.events if "done" in e][-1]["stall_s"]
    with tempfile.TemporaryDirectory(prefix="commit-phases-probe-") as d:
        alone_Bps = shared_write_Bps(d, cfg.state_B, nproc)
        b = beside(d, cfg.state_B, nproc, reclaim_wait_s=0.1, reclaimed=1)
    return {"world_size": nproc, "state_B": cfg.state_B, "checkpoints": len(commits),
            "stall_s": statistics.median(stalls),
            "data_s": statistics.median(e["shard_s"] - s for e, s in zip(commits, stalls)),
            "commit_s": statistics.median(e["durable_s"] - e["shard_s"] for e in commits),
            "durable_s": statistics.median(e["durable_s"] for e in commits),
            "disk_alone_s": cfg.state_B / alone_Bps, "writers_alone_s": b["writers_alone_s"],
            "writers_beside_s": b["writers_beside_s"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--points", default="2x254,4x254,2x1013", help="ranks x MB, comma-separated")
    p.add_argument("--json", action="append", default=[])
    a = p.parse_args(argv)
    t0 = time.time()
    rows = []
    for point in a.points.split(","):
        n, mb = point.split("x")
        r = phases(int(n), float(mb) * 1e6)
        rows.append(r)
        print(f"{r['world_size']} ranks, {r['state_B'] / 1e6:.0f} MB: stall {r['stall_s']:.3f} s, data "
              f"{r['data_s']:.3f} s, commit {r['commit_s']:.3f} s (durable {r['durable_s']:.3f}); the disk alone "
              f"{r['disk_alone_s']:.3f} s, the writers alone {r['writers_alone_s']:.3f} s, beside busy processes "
              f"{r['writers_beside_s']:.3f} s", flush=True)
    result = {**record_head("lab_commit_phases/1", "bench_lab_commit_phases.py", argv, t0), "every": EVERY,
              "plain_steps": PLAIN, "rows": rows, "wall_s": time.time() - t0}
    between = [r for r in rows if r["writers_alone_s"] <= r["data_s"] <= r["writers_beside_s"]]
    targets = [(f"the data phase between the writers alone and beside busy processes ({len(rows)} points)",
                len(between) == len(rows), f"{len(between)} of {len(rows)}")]
    return finish(targets, result, a.json)


if __name__ == "__main__":
    sys.exit(main())
