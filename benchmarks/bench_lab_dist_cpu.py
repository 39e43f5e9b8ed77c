"""Where a checkpoint's cost to the training goes, in the distributed lab's job at a gigabyte.

    python benchmarks/bench_lab_dist_cpu.py              # 2 and 4 ranks, about 15 minutes
    python benchmarks/bench_lab_dist_cpu.py --record     # store it with the package
    python benchmarks/bench_lab_dist_cpu.py --checkpoints 13 --json F   # as many as bench_lab_dist.py takes at 1 GB
    python benchmarks/bench_lab_dist_cpu.py --checkpoints 13 --reporting off --json F   # as root, on a VM

For 2 and 4 ranks it runs the job of ``bench_lab_dist.py`` at its largest state (FSDP2 on gloo, a
checkpoint to storage every 4 steps after 4 plain ones) with this package's ``concurrent`` engine and
with ``dcp.async_save``; and on 2 ranks both again with the training's allocator keeping the memory it
frees (glibc's ``MALLOC_MMAP_MAX_=0``, ``MALLOC_TRIM_THRESHOLD_`` of 64 GiB: no block goes back to the
kernel, as PyTorch's caching allocator keeps a GPU's). Rank 0 reads its threads' and the machine's CPU
time at the end of every step (:func:`mlsysim.lab.distributed.accounting.snapshot`); each checkpoint's
cycle is compared with its baseline (:func:`mlsysim.lab.distributed.accounting.cycles`). Recorded per
run: the step times and the training thread's page faults per step, and the growth of every count in
each cycle. A measurement, not a test: it needs the torch extra. ``--record`` stores the result as
``mlsysim/lab/distributed/data/cpu_breakdown.json``, the run the notebook ``06c_lab_distributed`` shows.

``--reporting off`` (root, on a virtual machine whose kernel reports free memory to its host) sets the smallest
block Linux reports (``page_reporting_order``) above the largest it has, so that no freed memory goes back to the
host while the jobs run, and sets it back afterwards; memory reported before stays the host's until touched again.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from lab_report import record_head

RECORD = Path(__file__).resolve().parent.parent / "mlsysim" / "lab" / "distributed" / "data" / "cpu_breakdown.json"
SIZE_B, LAYERS = 1000e6, 2       # bench_lab_dist.py's largest point
PLAIN, EVERY, CHECKPOINTS = 4, 4, 5   # checkpoints at steps 8, 12, 16, 20 (each with a full interval after it), 24
KEPT = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(64 * 2 ** 30)}
REPORTING = Path("/sys/module/page_reporting/parameters")
NO_REPORT_ORDER = "11"          # above the largest block order Linux keeps (10): no free block is reported
RUNS = [(2, "concurrent", "default"), (2, "dcp-async", "default"), (4, "concurrent", "default"),
        (4, "dcp-async", "default"), (2, "concurrent", "kept"), (2, "dcp-async", "kept")]


def _job(world: int, engine: str, allocator: str, d_model: int, steps: int) -> list:
    """Rank 0's step events of one job (in a temporary directory, removed afterwards)."""
    from mlsysim.lab.distributed.launcher import launch
    saved = {k: os.environ.get(k) for k in KEPT}
    if allocator == "kept":
        os.environ.update(KEPT)                       # torchrun's workers inherit it
    base = Path(tempfile.mkdtemp(prefix="mlsysim-cpu-"))
    try:
        out = launch(base, world, steps, every=EVERY, engine=engine, d_model=d_model, layers=LAYERS,
                     plain_steps=PLAIN, timeout_s=900)
        return [e for e in out.events if "acct" in e]
    finally:
        shutil.rmtree(base, ignore_errors=True)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run(world: int, engine: str, allocator: str, cfg, steps: int) -> dict:
    from mlsysim.lab.distributed.accounting import cycles, means
    ev = sorted(_job(world, engine, allocator, cfg.d_model, steps), key=lambda e: e["step"])
    faults = [b["acct"]["threads"]["main"][2] - a["acct"]["threads"]["main"][2] for a, b in zip(ev, ev[1:])]
    c = cycles(ev, EVERY, PLAIN)
    return {"world_size": world, "engine": engine, "allocator": allocator, "state_B": cfg.state_B,
            "d_model": cfg.d_model, "steps_s": [b["t"] - a["t"] for a, b in zip(ev, ev[1:])],
            "main_faults_per_step": faults, "cycles": c, "mean": means(c)}


@contextlib.contextmanager
def _reporting(off: bool):
    """Free page reporting as it is, or (``off``) stopped while the block runs and restored after it; yields the
    kibibytes reported in the block (None where the kernel does not count them)."""
    order, count = REPORTING / "page_reporting_order", REPORTING / "reported_kib"
    kib = lambda: int(count.read_text()) if count.exists() else None
    before, out = None, {}
    if off:
        try:
            before = order.read_text().strip()
            order.write_text(NO_REPORT_ORDER)
        except OSError as e:
            raise SystemExit(f"--reporting off needs {order} writable (root, a kernel that reports free pages): {e}")
    k0 = kib()
    try:
        yield out
    finally:
        if before is not None:
            order.write_text(before)
        out["reported_kib"] = None if k0 is None else kib() - k0


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--json", help="also write the result to this file")
    p.add_argument("--record", action="store_true", help=f"store the result as {RECORD.name} in the package")
    p.add_argument("--reporting", choices=("on", "off"), default="on",
                   help="free page reporting to the host as it is (default), or off while the jobs run (root)")
    p.add_argument("--checkpoints", type=int, default=CHECKPOINTS,
                   help=f"checkpoints per job, the last without a cycle after it (default {CHECKPOINTS})")
    a = p.parse_args(argv)
    if a.checkpoints < 2:
        p.error(f"--checkpoints must be at least 2 (a cycle after the first), got {a.checkpoints}")
    steps = PLAIN + EVERY * a.checkpoints
    from mlsysim.lab.distributed.restore import config_for
    t0 = time.time()
    cfg = config_for(SIZE_B, 32, LAYERS, steps)
    runs = []
    with _reporting(a.reporting == "off") as reported:
        for world, engine, allocator in RUNS:
            print(f"  {world} ranks, {engine}, allocator {allocator} ({time.time() - t0:.0f} s)", file=sys.stderr,
                  flush=True)
            runs.append(_run(world, engine, allocator, cfg, steps))
            m = runs[-1]["mean"]
            print(f"    overhead {m['wall_s']:.2f} s; rank 0: main +{m['main_user_s'] + m['main_system_s']:.2f} s, "
                  f"gloo +{m['gloo_user_s'] + m['gloo_system_s']:.2f} s, background "
                  f"+{m['background_user_s'] + m['background_system_s'] + m['ended_s']:.2f} s; machine "
                  f"+{m['machine_busy_s']:.2f} core-s, idle {m['machine_idle_s']:+.2f} s", flush=True)
    d = {**record_head("mlsysim.lab.dist-cpu/1", "bench_lab_dist_cpu.py", argv, t0), "steps": steps, "every": EVERY,
         "plain_steps": PLAIN, "kept_allocator": KEPT, "reporting": a.reporting,
         "reported_kib": reported["reported_kib"], "runs": runs, "wall_s": time.time() - t0}
    for path in ([a.json] if a.json else []) + ([RECORD] if a.record else []):
        Path(path).write_text(json.dumps(d, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
