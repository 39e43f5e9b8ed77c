"""The checkpoint lab on this machine: sync vs concurrent engine, measured and predicted.

    python benchmarks/bench_lab_checkpoint.py                 # 64 MB, 256 MB, 1 GB x every 1, 5, 20 steps
    python benchmarks/bench_lab_checkpoint.py --sizes 64e6 --every 5 --json out.json

For each state size and checkpoint interval it trains the lab's model with each
engine (2 x every steps, so at least two checkpoints) and prints a Markdown table:
stall per checkpoint (measured, and :func:`mlsysim.checkpoint`'s prediction for the
measured disk and memory), end-to-end slowdown against the same steps without
checkpoints, save and load bandwidth. Targets: concurrent stall <= 1/4 of sync stall
at 1 GB; predicted sync stall (copy + write) within 2x of the measured one. A measurement, not a
test: it takes a few minutes and needs about 4 x the largest size in memory.

``BENCHMARKS`` (run by ``benchmarks/run.py``) are the quick pieces of the engines.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import zlib

import numpy as np

from run import Bench
from mlsysim.lab import store
from mlsysim.lab.train import LabConfig, Trainer

_state = Trainer(LabConfig.for_size(64e6)).state()
_layout = store.layout(_state, 1)
_buffer = np.zeros(_layout.size_B, dtype=np.uint8)

BENCHMARKS = [
    Bench("lab: plan a 64 MB checkpoint file (layout)", lambda: store.layout(_state, 1), "<= 1 ms"),
    Bench("lab: snapshot 64 MB into a host buffer", lambda: store.fill(_buffer, _layout), "<= 20 ms", repeats=3),
    Bench("lab: CRC-32 of 64 MB", lambda: zlib.crc32(_buffer), "<= 100 ms", repeats=3),
]


def main(argv=None) -> int:
    from mlsysim.lab.experiment import pair_rows, run, step_time_s
    from mlsysim.lab.predict import measure_machine
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", nargs="+", type=float, default=[64e6, 256e6, 1e9])
    p.add_argument("--every", nargs="+", type=int, default=[1, 5, 20])
    p.add_argument("--json", help="also write every run's numbers to this file")
    a = p.parse_args(argv)
    t_start = time.time()
    runs = []
    with tempfile.TemporaryDirectory(prefix="mlsysim-bench-") as tmp:
        print(time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), file=sys.stderr)
        for size in a.sizes:
            # measured again before each size (a shared machine's disk rate drifts), with a file of the
            # checkpoint's size: a long write outlasts the device's and the page cache's bursts
            machine = measure_machine(tmp, size_B=min(size, 1e9))
            print(f"  copy {machine.copy_Bps / 1e9:.1f} GB/s, disk write+fsync {machine.write_Bps / 1e9:.2f} GB/s, "
                  f"read {machine.read_Bps / 1e9:.2f} GB/s", file=sys.stderr)
            cfg = LabConfig.for_size(size, steps=40, warmup=4)
            for every in a.every:
                steps = max(2 * every, 4)
                step_s = step_time_s(cfg, min(steps, 8))   # baseline right before the pair of runs
                for engine in ("sync", "concurrent"):
                    directory = f"{tmp}/{engine}-{size:.0f}-{every}"
                    r = run(engine, cfg=cfg, steps=steps, every=every, directory=directory,
                            machine=machine, step_s=step_s, verify=False)
                    shutil.rmtree(directory)
                    runs.append(r.to_dict())
                print(f"  {size / 1e6:.0f} MB every {every}: done ({time.time() - t_start:.0f} s)", file=sys.stderr)
    rows = pair_rows(runs)
    print("| " + " | ".join(rows[0]) + " |")
    print("|" + "---|" * len(rows[0]))
    for r in rows:
        print("| " + " | ".join(str(v) for v in r.values()) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"schema": "mlsysim.lab.benchmark/1", "command": "python benchmarks/bench_lab_checkpoint.py",
                       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t_start)), "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
