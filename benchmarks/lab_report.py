"""What the lab benchmarks share: the head of a record (:func:`record_head`), the end (:func:`finish`: each
target printed as met or MISSED, the result written) and a torchrun job of a benchmark's own worker
(:func:`run_worker_job`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
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


def run_worker_job(script: str, world: int, args=(), timeout_s: float = 600.0, env=None,
                   prefix: str = "mlsysim-") -> dict:
    """Run ``script --worker DIR OUT *args`` under torchrun with ``world`` ranks on 127.0.0.1 (a free port) and
    return the JSON its rank 0 writes to OUT; DIR is a temporary directory, removed afterwards. ``env``: variables
    set beside this process's. Past ``timeout_s`` the job's process group is killed; RuntimeError then, or when it
    fails."""
    from mlsysim.lab.distributed.launcher import free_port
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={world}", "--nnodes=1",
               "--master-addr=127.0.0.1", f"--master-port={free_port()}", script, "--worker", tmp, str(out),
               *map(str, args)]
        proc = subprocess.Popen(cmd, start_new_session=True, env={**os.environ, **(env or {})})
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            raise RuntimeError(f"the {world}-rank job ran past {timeout_s} s and was stopped")
        if proc.returncode != 0:
            raise RuntimeError(f"the {world}-rank job failed (exit status {proc.returncode})")
        return json.loads(out.read_text())
