"""Benchmarks of mlsysim: import time, single calls and vectorised sweeps.

    python benchmarks/run.py            # every benchmarks/bench_*.py
    python benchmarks/run.py core       # only bench_core.py

``benchmarks/reference.py`` compares the import and one serving solve with mlsysim 0.3.0 from
PyPI, installed in a scratch environment outside the repository.

Each bench_*.py module defines ``BENCHMARKS``: a list of ``Bench`` records. A benchmark
is timed as the best of several repeats (the least disturbed run) and printed with its
target; this is a measurement, not a test, so nothing fails on a slow machine.
"""
from __future__ import annotations

import importlib.util
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Bench:
    name: str
    fn: Callable[[], object]
    target: str                  # e.g. "<= 50 µs", ">= 1e6 points/s"
    points: int = 0              # > 0: report points per second instead of time per call
    calls: int = 0               # calls per repeat (0: auto-scale to about 0.2 s)
    repeats: int = 5


def measure(b: Bench) -> float:
    """Seconds per call, best of ``b.repeats``."""
    b.fn()
    calls = b.calls
    if not calls:
        t0 = time.perf_counter()
        b.fn()
        calls = max(1, int(0.2 / max(time.perf_counter() - t0, 1e-7)))
    best = float("inf")
    for _ in range(b.repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            b.fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def show(b: Bench, seconds: float) -> str:
    if b.points:
        return f"{b.points / seconds:,.0f} points/s ({seconds * 1e3:.1f} ms for {b.points:,})"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def main(selected: list[str]) -> None:
    sys.path.insert(0, str(HERE))
    files = sorted(HERE.glob("bench_*.py"))
    if selected:
        files = [f for f in files if f.stem.removeprefix("bench_") in selected]
    rows = []
    for f in files:
        for b in load(f).BENCHMARKS:
            rows.append((f.stem.removeprefix("bench_"), b.name, show(b, measure(b)), b.target))
    widths = [max(len(r[i]) for r in rows + [("area", "benchmark", "result", "target")]) for i in range(4)]
    for r in [("area", "benchmark", "result", "target"), tuple("-" * w for w in widths)] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


if __name__ == "__main__":
    main(sys.argv[1:])
