"""Checksums for the lab's checkpoint files, measured on this machine, beside a memory copy.

    python benchmarks/bench_checksums.py [--size-mb 512] [--repeats 3]

For each candidate: GB/s on one core (best of ``--repeats`` over one buffer of random bytes), and
whether it returns zlib's CRC-32 values — the condition for the checkpoints already written to load.
Candidates: ``zlib.crc32`` (the standard library), ``zlib_ng.zlib_ng.crc32`` (the package's choice,
:mod:`mlsysim.lab.checksum`), and where installed ``crc32c.crc32c`` (CRC-32C, another polynomial)
and ``xxhash.xxh3_64_intdigest`` (XXH3-64, not a CRC). The floor beside them: ``np.copyto`` into a
buffer touched beforehand, the memory copy every snapshot pays.
"""
from __future__ import annotations

import argparse
import time
import zlib

import numpy as np


def candidates() -> dict:
    """name -> (function of a memoryview, same values as zlib.crc32?)."""
    found = {"zlib crc32": (zlib.crc32, True)}
    try:
        from zlib_ng import zlib_ng
        found["zlib-ng crc32"] = (zlib_ng.crc32, True)
    except ImportError:
        pass
    try:
        import crc32c
        found["crc32c (CRC-32C)"] = (crc32c.crc32c, False)
    except ImportError:
        pass
    try:
        import xxhash
        found["xxhash XXH3-64"] = (xxhash.xxh3_64_intdigest, False)
    except ImportError:
        pass
    return found


def best_s(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=512.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    size = int(args.size_mb * 1e6)
    data = np.random.default_rng(0).integers(0, 256, size=size, dtype=np.uint8)
    view = memoryview(data)
    reference = zlib.crc32(view)
    print(f"{size / 1e6:.0f} MB, best of {args.repeats}, one core")
    for name, (fn, compatible) in candidates().items():
        s = best_s(lambda: fn(view), args.repeats)
        same = fn(view) == reference
        assert same == compatible or not compatible, name
        print(f"  {name:18s} {size / s / 1e9:6.1f} GB/s   zlib's CRC-32 values: {'yes' if same else 'no'}")
    target = np.empty_like(data)
    target.fill(1)                                   # touched: no first-touch page faults in the timing
    s = best_s(lambda: np.copyto(target, data), args.repeats)
    print(f"  {'memory copy':18s} {size / s / 1e9:6.1f} GB/s   (np.copyto, the snapshot's floor)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
