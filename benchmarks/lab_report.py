"""The end both lab benchmarks share: each target printed as met or MISSED, the result written."""
from __future__ import annotations

import json
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
