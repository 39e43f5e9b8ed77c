"""When the host takes back what this machine frees: the touch of new memory, some seconds after a free.

    python benchmarks/bench_lab_reporting.py --json out.json     # 4 GB, eight delays twice, about 16 minutes

A node loss's downtime on this machine is mostly the new workers' setup, and most of that their first touch of
the snapshot buffers, which took 1.56 to 8.15 s at the same size (``lab_restart-2026-12-05.json``), less after
a loss than after a launch. :mod:`mlsysim.lab.reporting` models what a touch finds: memory freed a moment ago
is the guest's still, and Linux hands it to the host a pass at a time, one every 2 s, each a sixteenth of the
free lists or so. This frees ``--gb`` GB, waits each delay, times the touch of as much new memory, and sets the
model beside it: w from the touch right after the free, c from the first touches (each after ``--settle`` s
with nothing freed), the bytes each pass hands over from the free lists read right after the free. Each delay
runs ``--rounds`` times, the delays in a different order each round. A measurement, not a test.
"""
from __future__ import annotations

import argparse
import random
import statistics
import time

from lab_report import finish, record_head

DELAYS_S = (0.0, 1.0, 2.5, 3.5, 4.5, 6.5, 8.5, 12.0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gb", type=float, default=4.0, help="GB freed, and GB touched after the delay")
    p.add_argument("--delays", default=",".join(str(d) for d in DELAYS_S), help="seconds, comma-separated")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--settle", type=float, default=20.0, help="seconds with nothing freed before each trial")
    p.add_argument("--json", action="append", default=[])
    a = p.parse_args(argv)
    from mlsysim.lab import reporting
    t0 = time.time()
    size = int(a.gb * 1e9)
    delays = [float(d) for d in a.delays.split(",")]
    rng, trials = random.Random(0), []
    for r in range(a.rounds):
        order = delays[:] if r == 0 else rng.sample(delays, len(delays))
        for d in order:
            time.sleep(a.settle)
            m = reporting.touch_after_free(size, size, d)
            trials.append({"delay_s": d, **m})
            print(f"round {r + 1}, {d:4.1f} s after the free: touch {m['touch_s']:.2f} s (first {m['first_s']:.2f} s; "
                  f"a pass {m['pass_B'] / 1e9:.2f} GB)", flush=True)
    w = statistics.median(t["touch_s"] for t in trials if t["delay_s"] == 0.0) / size
    c = statistics.median(t["first_s"] for t in trials) / size
    rows = []
    for d in delays:
        got = [t for t in trials if t["delay_s"] == d]
        measured = statistics.median(t["touch_s"] for t in got)
        model = reporting.touch_s(size, size, d, statistics.median(t["pass_B"] for t in got), w, c)
        rows.append({"delay_s": d, "measured_s": measured, "model_s": model, "ratio": measured / model,
                     "samples_s": [t["touch_s"] for t in got]})
        print(f"{d:4.1f} s: measured {measured:.2f} s {[round(t['touch_s'], 2) for t in got]}, model {model:.2f} s, "
              f"ratio {measured / model:.2f}")
    result = {**record_head("lab_reporting/1", "bench_lab_reporting.py", argv, t0), "size_B": size,
              "settle_s": a.settle, "w_s_per_B": w, "c_s_per_B": c, "trials": trials, "rows": rows,
              "wall_s": time.time() - t0}
    targets = [(f"the touch {r['delay_s']:.1f} s after the free within 25 % of the model", 0.75 <= r["ratio"] <= 1.25,
                f"{r['measured_s']:.2f} s against {r['model_s']:.2f} s") for r in rows]
    return finish(targets, result, a.json)


if __name__ == "__main__":
    raise SystemExit(main())
