"""How steady the writer probes timed at a checkpoint's cadence are: each write's CPU time, on this machine.

    python benchmarks/bench_lab_writer_samples.py --json out.json     # 2 ranks at 61 MB, three trials, ~4 min

The refined model charges the training, per checkpoint, the writers' CPU time per byte timed beside processes
that churn memory at the job's rate, each write a checkpoint's gap after the one before: this package's
windowed writers (u_c) and writers that leave their whole file cached, as DCP's does (u_f;
:func:`mlsysim.lab.distributed.beside.beside`). At the lab's smallest point the gaps are shorter than the
2 s after which the kernel hands freed memory back to the host, and a write finds the memory the write before
freed still backed or not. This runs the probe ``--trials`` times at the point of a kept run (its state, world
size, churn and both jobs' gaps) and keeps every write's CPU time: the median of the first three (what the
probe took up to ``lab_dist-2026-12-05e``), the mean of the first twelve (what it took up to ``-05k``: as many
as span 10 s, at most twelve) against the mean of all of them (what it takes since,
:func:`~mlsysim.lab.distributed.beside.cadence_writes` of them). A measurement, not a test.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lab_report import finish, record_head

RECORDS = Path(__file__).resolve().parent / "records"


def point_of(record: dict, index: int) -> dict:
    """The probe's arguments at point ``index`` of a kept distributed run: its state, world size, churn, gaps."""
    q = record["points"][index]
    every = record["every"]
    return {"size_B": q["state_B"], "world": q["world_size"], "churn_Bps": q["terms"]["churn_Bps"],
            "churn_period_s": every * q["concurrent"]["plain_step_s"],
            "period_s": every * q["dcp_async"]["plain_step_s"]}


def trial(args: dict, directory) -> dict:
    """One run of the probe: each write's CPU seconds per byte, u_c's and u_f's, and u's (alone, the median)."""
    from mlsysim.lab.distributed.beside import beside
    b = beside(directory, args["size_B"], args["world"], churn_Bps=args["churn_Bps"], period_s=args["period_s"],
               churn_period_s=args["churn_period_s"], checkpoints=args.get("checkpoints"))
    per_B = lambda xs: [x / b["size_B"] for x in xs]
    return {"u_s_per_B": b["writers_cpu_s"] / b["size_B"],
            "u_c_s_per_B": per_B(b["writers_cpu_churned_samples_s"]),
            "u_f_s_per_B": per_B(b["writers_cpu_cached_samples_s"])}


EARLIER_MOST = 12             # the writes the probe took at most up to lab_dist-2026-12-05k
SUMMARIES = ("median_of_three", "mean_of_twelve", "mean")


def summary(samples: list, span: int | None = None) -> dict:
    """The median of the first three writes, the mean of the first twelve and the mean of all; with ``span`` (the
    writes :func:`~mlsysim.lab.distributed.beside.cadence_writes` takes without the job's checkpoints), the mean
    of that many, the first write and the mean of those after it."""
    out = {"median_of_three": statistics.median(samples[:3]),
           "mean_of_twelve": statistics.mean(samples[:EARLIER_MOST]), "mean": statistics.mean(samples)}
    if span is not None and len(samples) > 1:
        out.update(mean_of_span=statistics.mean(samples[:span]), first=samples[0],
                   after_first=statistics.mean(samples[1:]))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--run", default=str(RECORDS / "lab_dist-2026-12-05e.json"), help="a kept distributed run")
    p.add_argument("--point", type=int, default=0, help="its point (0: 2 ranks at the smallest state)")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--checkpoints", type=int, default=None,
                   help="as many writes as a job's checkpoints (the probe of lab_dist runs since -06j)")
    p.add_argument("--json", action="append", default=[])
    a = p.parse_args(argv)
    t0 = time.time()
    args = {**point_of(json.loads(Path(a.run).read_text()), a.point), "checkpoints": a.checkpoints}
    trials = []
    with tempfile.TemporaryDirectory(prefix="mlsysim-samples-") as tmp:
        for i in range(a.trials):
            trials.append(trial(args, tmp))
            t = trials[-1]
            print(f"trial {i + 1}: u {t['u_s_per_B'] * 1e9:.2f} ns/B; "
                  + "; ".join(f"{k[:3]} {[round(x * 1e9, 2) for x in t[k]]}" for k in ("u_c_s_per_B", "u_f_s_per_B")))
    from mlsysim.lab.distributed.beside import cadence_writes
    span = {"u_c_s_per_B": cadence_writes(args["churn_period_s"], 3),
            "u_f_s_per_B": cadence_writes(args["period_s"], 3)}
    sums = {k: [summary(t[k], span[k] if a.checkpoints else None) for t in trials] for k in span}
    spread = {k: {e: max(s[e] for s in v) / min(s[e] for s in v) for e in SUMMARIES} for k, v in sums.items()}
    result = {**record_head("lab_writer_samples/1", "bench_lab_writer_samples.py", argv, t0),
              "run": Path(a.run).name, "point": a.point, **args, "trials": trials, "summaries": sums,
              "spread": spread, "wall_s": time.time() - t0}
    targets = [(f"{k[:3]}: the mean of all writes steadier from trial to trial than the mean of twelve",
                s["mean"] <= s["mean_of_twelve"], f"largest / smallest: mean {s['mean']:.2f}, mean of twelve "
                f"{s['mean_of_twelve']:.2f}, median of three {s['median_of_three']:.2f}") for k, s in spread.items()]
    if a.checkpoints:             # the first write finds no memory a write before it freed, as a job's first checkpoint
        targets += [(f"{k[:3]}: the first write costs more than the mean of those after it, in every trial",
                     all(x["first"] > x["after_first"] for x in v), "; ".join(
                         f"{x['first'] * 1e9:.2f} vs {x['after_first'] * 1e9:.2f} ns/B" for x in v))
                    for k, v in sums.items()]
    return finish(targets, result, a.json)


if __name__ == "__main__":
    sys.exit(main())
