"""mlsysim against mlsysim 0.3.0 from PyPI, measured side by side and alternately.

    python -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install mlsysim==0.3.0   # once, outside the repo
    python benchmarks/reference.py                  # 7 rounds
    python benchmarks/reference.py --rounds 15 --reference-python /path/to/python
    python benchmarks/reference.py --baseline /tmp/old/bin/python   # also an earlier checkout, same rounds

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
    ap.add_argument("--baseline", help="interpreter with another version of this package, measured alongside")
    args = ap.parse_args()
    ref = args.reference_python
    if not Path(ref).exists():
        sys.exit(f"no reference interpreter at {ref}: python -m venv /tmp/refvenv && "
                 f"/tmp/refvenv/bin/pip install mlsysim==0.3.0")
    with tempfile.TemporaryDirectory() as cwd:
        sides = {"ref": ref, "ours": args.python, **({"base": args.baseline} if args.baseline else {})}
        where = {k: _where(py, cwd) for k, py in sides.items()}
        if where["ours"] == where["ref"]:
            sys.exit(f"both interpreters import mlsysim from {where['ours']}")
        for k, label in (("ours", "this package"), ("base", "baseline"), ("ref", "reference")):
            if k in where:
                print(f"{label + ':':14}{where[k]}")
        print()
        best = {(m, k): float("inf") for m in ("import", "solve") for k in sides}
        for _ in range(args.rounds):           # alternate the sides within every round
            for k, py in sides.items():
                best["import", k] = min(best["import", k], import_s(py, cwd))
            for k, py in sides.items():
                best["solve", k] = min(best["solve", k], solve_s(py, "reference" if k == "ref" else "mlsysim", cwd))
    shown = {"import": lambda t: f"{t * 1e3:,.0f} ms", "solve": lambda t: f"{t * 1e6:,.1f} µs"}
    names = {"import": "import mlsysim (start-up included)", "solve": "one serving solve (decode step)"}
    targets = {"import": ">= 15x", "solve": ">= 30x and <= 20 µs"}
    cols = ["ref"] + (["base"] if args.baseline else []) + ["ours"]
    head = ("measurement", "mlsysim 0.3.0") + (("baseline", "faster") if args.baseline else ()) + \
        ("this package", "faster", "target")
    table = [head]
    for m in ("import", "solve"):
        row = [names[m]]
        for k in cols:
            row.append(shown[m](best[m, k]))
            if k != "ref":
                row.append(f"{best[m, 'ref'] / best[m, k]:.1f}x")
        table.append(tuple(row + [targets[m]]))
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for r in table[:1] + [tuple("-" * w for w in widths)] + table[1:]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    print(f"\nbest of {args.rounds} alternating rounds")


if __name__ == "__main__":
    main()
