"""mlsysim against mlsysim 0.3.0 from PyPI, measured side by side and alternately.

    python -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install mlsysim==0.3.0   # once, outside the repo
    python benchmarks/reference.py                  # 7 rounds
    python benchmarks/reference.py --rounds 15 --reference-python /path/to/python

Two measurements, each taken in fresh interpreters that alternate (reference, this package,
reference, ...) so that a busy machine slows both alike; the best round of each side counts:

* ``import mlsysim`` — wall time of ``python -I -c "import mlsysim"`` (start-up included),
  run from a temporary folder so that neither side sees this checkout by accident;
* one serving solve — this package's ``decode(model, hardware, context_tokens=2048, batch=1)``
  against the reference's ``ServingModel().solve(model, hardware, seq_len=2048, batch_size=1)``
  (Llama-3-8B on an H100, records looked up once), best of 5 repeats of an auto-sized loop.

Targets: the import at least 15x faster than the reference's, one decode solve at least 30x
faster than the reference's solve and at most 20 µs.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIMER = """
import json, time
{setup}
f = lambda: {call}
f()
t0 = time.perf_counter(); f(); one = time.perf_counter() - t0
calls = max(1, int(0.2 / max(one, 1e-7)))
best = float("inf")
for _ in range(5):
    t0 = time.perf_counter()
    for _ in range(calls):
        f()
    best = min(best, (time.perf_counter() - t0) / calls)
print(json.dumps(best))
"""

SOLVE = {
    "reference": dict(setup="import mlsysim as m\nfrom mlsysim.solvers import ServingModel\n"
                            "model, hw, solver = m.Models.Language.Llama3_8B, m.Hardware.Cloud.H100, ServingModel()",
                      call="solver.solve(model, hw, seq_len=2048, batch_size=1)"),
    "mlsysim": dict(setup="import mlsysim as ms\nmodel, hw = ms.model('llama-3-8b'), ms.hardware('h100')",
                    call="ms.decode(model, hw, context_tokens=2048, batch=1)"),
}


def _where(python: str, cwd: str) -> str:
    out = subprocess.run([python, "-I", "-c", "import mlsysim; print(mlsysim.__file__)"], cwd=cwd,
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def import_s(python: str, cwd: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([python, "-I", "-c", "import mlsysim"], cwd=cwd, check=True)
    return time.perf_counter() - t0


def solve_s(python: str, side: str, cwd: str) -> float:
    code = TIMER.format(**SOLVE[side])
    out = subprocess.run([python, "-I", "-c", code], cwd=cwd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reference-python", default="/tmp/refvenv/bin/python")
    ap.add_argument("--python", default=sys.executable, help="interpreter with this package installed")
    args = ap.parse_args()
    ref = args.reference_python
    if not Path(ref).exists():
        sys.exit(f"no reference interpreter at {ref}: python -m venv /tmp/refvenv && "
                 f"/tmp/refvenv/bin/pip install mlsysim==0.3.0")
    with tempfile.TemporaryDirectory() as cwd:
        ours_at, ref_at = _where(args.python, cwd), _where(ref, cwd)
        if ours_at == ref_at:
            sys.exit(f"both interpreters import mlsysim from {ours_at}")
        print(f"this package: {ours_at}\nreference:    {ref_at}\n")
        best = {k: float("inf") for k in ("import ref", "import ours", "solve ref", "solve ours")}
        for _ in range(args.rounds):           # alternate the two sides within every round
            best["import ref"] = min(best["import ref"], import_s(ref, cwd))
            best["import ours"] = min(best["import ours"], import_s(args.python, cwd))
            best["solve ref"] = min(best["solve ref"], solve_s(ref, "reference", cwd))
            best["solve ours"] = min(best["solve ours"], solve_s(args.python, "mlsysim", cwd))
    rows = [("import mlsysim (start-up included)", f"{best['import ref'] * 1e3:,.0f} ms",
             f"{best['import ours'] * 1e3:,.0f} ms", best["import ref"] / best["import ours"], ">= 15x"),
            ("one serving solve (decode step)", f"{best['solve ref'] * 1e6:,.1f} µs",
             f"{best['solve ours'] * 1e6:,.1f} µs", best["solve ref"] / best["solve ours"],
             ">= 30x and <= 20 µs")]
    head = ("measurement", "mlsysim 0.3.0", "this package", "faster", "target")
    table = [head] + [(a, b, c, f"{r:.1f}x", t) for a, b, c, r, t in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for r in table[:1] + [tuple("-" * w for w in widths)] + table[1:]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    print(f"\nbest of {args.rounds} alternating rounds")


if __name__ == "__main__":
    main()
