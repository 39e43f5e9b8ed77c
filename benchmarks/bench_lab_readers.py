"""N ranks read the same checkpoint file at once: into which memory, and how long.

    python benchmarks/bench_lab_readers.py --json out.json     # 1, 2 and 4 readers of 1 GB, about two minutes

The replicated restore on 4 ranks at a gigabyte took longer than the refined model in every recorded run
(06c, "Run after run": median 1.55 times; on 2 ranks it holds). The model reads the file at the rate
``same_read_Bps`` measured with threads of one process reading into buffers they reuse, then charges the
CRC-32 and the faults of new memory as NumPy's arrays take it. The restore's ranks are processes, each
reading into tensors PyTorch has just allocated. This times the difference: ``N`` processes (each first
touching and freeing twice the bytes it will read, as the restore's ranks do) read one cold file of
``SIZE_B`` bytes at once (pages dropped before each round) into memory touched beforehand (``touched``),
into a new NumPy array (``numpy``) and into a new PyTorch tensor (``torch``); and copy the same bytes from
memory into a new PyTorch tensor, no disk (``torch_copy``). Per kind and ``N``: each process's own seconds
in the round whose slowest process was fastest (best of ``ROUNDS``).
A measurement, not a test: it needs the torch extra.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from lab_report import finish, record_head

SIZE_B, ROUNDS = 1000e6, 2
READERS = (1, 2, 4)
KINDS = ("touched", "numpy", "torch", "torch_copy")


def _child(kind: str, path: str, size: int) -> None:
    """One reader: warm, allocate, say ready, wait for the go, read (or copy), print its seconds."""
    import torch
    src = np.full(size, 7, dtype=np.uint8) if kind == "torch_copy" else None
    warm = np.ones(2 * size, dtype=np.uint8)
    del warm
    if kind == "touched":
        dst = np.zeros(size, dtype=np.uint8)
        dst[::4096] = 1
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()
    t0 = time.perf_counter()
    if kind in ("numpy", "torch"):
        dst = np.empty(size, dtype=np.uint8) if kind == "numpy" else torch.empty(size, dtype=torch.uint8).numpy()
    if kind == "torch_copy":
        np.copyto(torch.empty(size, dtype=torch.uint8).numpy(), src)
    else:
        with open(path, "rb", buffering=0) as f:
            f.readinto(memoryview(dst))
    print(time.perf_counter() - t0, flush=True)


def one_round(kind: str, n: int, path: str, size: int) -> list[float]:
    """Each of ``n`` readers' seconds, all started together once all are ready (the file's pages dropped)."""
    from mlsysim.measure import drop_page_cache
    drop_page_cache(path)
    procs = [subprocess.Popen([sys.executable, __file__, "--child", kind, path, str(size)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for _ in range(n)]
    try:
        for p in procs:
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a {kind} reader failed to start")
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        return [float(p.stdout.readline()) for p in procs]
    finally:
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="append", default=[], help="write the record here (repeatable)")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        _child(a.child[0], a.child[1], int(a.child[2]))
        return 0
    t_start, size = time.time(), int(SIZE_B)
    rows = []
    with tempfile.TemporaryDirectory(prefix="mlsysim-readers-") as tmp:
        path = os.path.join(tmp, "state.bin")
        np.full(size, 7, dtype=np.uint8).tofile(path)
        os.sync()
        for kind in KINDS:
            for n in READERS:
                seconds = min((one_round(kind, n, path, size) for _ in range(ROUNDS)), key=max)
                rows.append({"kind": kind, "readers": n, "seconds": seconds})
                print(f"{kind:10s} {n} readers of {size / 1e9:.1f} GB each: {', '.join(f'{x:.2f}' for x in seconds)} s "
                      f"({n * size / max(seconds) / 1e9:.2f} GB/s together)", flush=True)
    result = {**record_head("mlsysim.lab.readers/1", "bench_lab_readers.py", argv, t_start), "size_B": size,
              "rounds": ROUNDS, "runs": rows, "wall_s": time.time() - t_start}
    return finish([], result, a.json)


if __name__ == "__main__":
    raise SystemExit(main())
