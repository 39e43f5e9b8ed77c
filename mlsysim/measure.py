"""Measure this machine with NumPy, to place it on the same roofline as the registry devices.

The numbers vary from run to run and machine to machine: notebooks print them
in cells excluded from output comparison and only sanity-check their range.
Method: best of ``repeats`` timings (the least disturbed run), as in STREAM
(McCalpin 1995) for bandwidth and as in HPL-style GEMM timing for FLOP/s.
"""
from __future__ import annotations

import os
import time

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
