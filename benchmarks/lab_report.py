"""What the lab benchmarks share: the head of a record (:func:`record_head`) and the end (:func:`finish`: each
target printed as met or MISSED, the result written)."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def finish(targets, result: dict, paths) -> int:
    """Print every (name, ok, detail) of ``targets``, write ``result`` as JSON to each of ``paths``;
    exit status 1 if a target was missed, else 0."""
    missed = 0
    for name, ok, detail in targets:
        print(f"{'met   ' if ok else 'MISSED'} {name}: {detail}")
        missed += not ok
    for path in paths:
        Path(path).write_text(json.dumps(result, indent=1) + "\n")
    return 1 if missed else 0


def record_head(schema: str, script: str, argv, t0: float) -> dict:
    """The fields every distributed-lab record starts with: its ``schema``, the ``date`` it started (``t0``,
    seconds since the epoch), the ``command`` that made it (``script`` and its arguments) and the
    ``machine`` (:func:`mlsysim.lab.floors.machine_facts` and PyTorch's version)."""
    import torch
    from mlsysim.lab.floors import machine_facts
    return {"schema": schema, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0)),
            "command": f"python benchmarks/{script} " + " ".join(argv or sys.argv[1:]),
            "machine": {**machine_facts(None), "torch": torch.__version__}}
