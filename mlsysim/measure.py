"""Measure this machine with NumPy: FLOP/s and memory bandwidth (to place it on the same
roofline as the registry devices) and disk bandwidth (to compare with the storage tiers).

The numbers vary from run to run and machine to machine: notebooks print them
in cells excluded from output comparison and only sanity-check their range.
Method: best of ``repeats`` timings (the least disturbed run), as in STREAM
(McCalpin 1995) for bandwidth and as in HPL-style GEMM timing for FLOP/s.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from .systems import Hardware


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def matmul_flops(n: int = 2048, dtype=np.float32, repeats: int = 5) -> float:
    """FLOP/s of an n×n by n×n matrix product (2·n³ FLOP), best of ``repeats``."""
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype=dtype)
    b = rng.random((n, n), dtype=dtype)
    a @ b  # warm up the BLAS threads
    return 2.0 * n ** 3 / _best(lambda: a @ b, repeats)


def memory_bandwidth(size_B: float = 256e6, repeats: int = 5) -> float:
    """Bytes/s of a large array copy (each byte read once and written once), best of ``repeats``."""
    n = int(size_B // 8)
    src = np.ones(n)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    return 2.0 * n * 8 / _best(lambda: np.copyto(dst, src), repeats)


def host_memory_B() -> float:
    """Physical memory of this machine, bytes."""
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def this_machine(n: int = 2048, size_B: float = 256e6) -> Hardware:
    """A :class:`Hardware` record of this machine's CPU: measured fp32 matmul FLOP/s and copy bandwidth."""
    return Hardware(name="this machine (measured)", kind="cpu", peak_flops={"fp32": matmul_flops(n)},
                    memory_B=host_memory_B(), memory_bw_Bps=memory_bandwidth(size_B),
                    source="measured with NumPy by mlsysim.measure", date=time.strftime("%Y-%m-%d"))


def drop_page_cache(path) -> None:
    """Ask the kernel to drop ``path``'s pages from the page cache (Linux ``posix_fadvise``), so
    that the next read comes from the device; a no-op where the call does not exist."""
    if hasattr(os, "posix_fadvise"):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


@dataclass(frozen=True)
class DiskBandwidth:
    """Result of :func:`disk_bandwidth`: bytes per second to write (with fsync) and to read back."""

    write_Bps: float
    read_Bps: float
    size_B: float
    write_s: float
    read_s: float


def disk_bandwidth(size_B: float = 128e6, directory: str | None = None, repeats: int = 3) -> DiskBandwidth:
    """Write a NumPy training state of ``size_B`` bytes to ``directory`` and read it back.

    The state mimics a checkpoint: fp32 weights plus two fp32 optimizer moments, saved with
    ``np.savez`` and flushed with ``fsync`` (a save is not done until it is on the device).
    Before each read the file's pages are dropped from the page cache
    (``posix_fadvise(DONTNEED)``, Linux) so that the read comes from the device, not from
    memory. Best of ``repeats``; the temporary file is removed.
    """
    import tempfile

    n = max(int(size_B // 12), 1)
    state = {k: np.full(n, i + 1.0, dtype=np.float32) for i, k in enumerate(("weights", "exp_avg", "exp_avg_sq"))}
    total = float(sum(a.nbytes for a in state.values()))
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        path = os.path.join(tmp, "state.npz")

        def save():
            with open(path, "wb") as f:
                np.savez(f, **state)
                f.flush()
                os.fsync(f.fileno())

        def load():
            with np.load(path) as z:
                for k in state:
                    z[k]

        write_s = _best(save, repeats)
        read_s = float("inf")
        for _ in range(repeats):
            drop_page_cache(path)
            read_s = min(read_s, _best(load, 1))
    return DiskBandwidth(write_Bps=total / write_s, read_Bps=total / read_s, size_B=total,
                         write_s=write_s, read_s=read_s)
