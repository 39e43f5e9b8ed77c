"""PyTorch's checkpointing against this package's engines, at full size, on this machine.

    python benchmarks/bench_lab_torch.py                       # 1 GB of state, median of 3 rounds
    python benchmarks/bench_lab_torch.py --size-mb 256 --repeats 5 --json out.json

Runs :func:`mlsysim.lab.pytorch.compare.compare` (every engine on one state of the lab's
PyTorch transformer, with the machine's floors measured in the same run), prints a Markdown
table and checks the targets:

* the concurrent engine's stall is at most half of ``dcp.async_save``'s, and at most twice
  the memory-copy floor;
* the sync engine's time to durable is at most ``torch.save`` + fsync's, and at most 1.3 x
  the write + fsync floor;
* this package's ``load_latest`` (which verifies every byte) takes at most 1.2 x ``torch.load``'s
  time (which verifies none).

A measurement, not a test: it needs the torch extra, takes a few minutes and about 5 x the
size in memory. ``--record`` stores the result as ``mlsysim/lab/pytorch/data/benchmark.json``,
the recorded run the notebook ``06b_lab_pytorch`` shows. Exit status 1 if a target is missed.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from lab_report import finish

RECORD = Path(__file__).resolve().parent.parent / "mlsysim" / "lab" / "pytorch" / "data" / "benchmark.json"


def main(argv=None) -> int:
    from mlsysim.lab.pytorch.compare import compare
    from mlsysim.lab.pytorch.results import targets
    p = argparse.ArgumentParser()
    p.add_argument("--size-mb", type=float, default=1000.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dir", help="where the checkpoints go (default: a temporary directory)")
    p.add_argument("--json", help="also write the result to this file")
    p.add_argument("--record", action="store_true", help=f"store the result as {RECORD.name} in the package")
    a = p.parse_args(argv)
    t0 = time.time()
    c = compare(a.size_mb * 1e6, repeats=a.repeats, directory=a.dir,
                progress=lambda m: print(f"  {m} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True))
    import torch
    from mlsysim.lab.floors import machine_facts
    d = {**c.to_dict(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0)),
         "command": "python benchmarks/bench_lab_torch.py " + " ".join(argv or sys.argv[1:]),
         "machine": {**machine_facts(a.dir), "torch": torch.__version__}}
    f = d["floors"]
    print(f"floors: copy {f['copy_Bps'] / 1e9:.2f} GB/s ({f['copy_floor_s']:.3f} s), write + fsync "
          f"{f['write_Bps'] / 1e9:.2f} GB/s ({f['write_floor_s']:.3f} s), read {f['read_cold_Bps'] / 1e9:.2f} GB/s "
          f"cold, {f['read_warm_Bps'] / 1e9:.2f} GB/s warm")
    print("| engine | blocked s | durable s | load s | resumed exactly | flipped byte |")
    print("|---|---|---|---|---|---|")
    for r in d["engines"]:
        durable = "never" if r["durable_s"] is None else f"{r['durable_s']:.3f}"
        print(f"| {r['engine']} | {r['stall_s']:.3f} | {durable} | {r['load_s']:.3f} | {r['resumed_exactly']} | "
              f"{r['corruption']} |")
    return finish(targets(c), d, ([a.json] if a.json else []) + ([RECORD] if a.record else []))


if __name__ == "__main__":
    raise SystemExit(main())
