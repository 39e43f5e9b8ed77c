"""The checksum of the lab's checkpoint files: CRC-32 with zlib's polynomial, computed by zlib-ng.

zlib-ng (``zlib_ng.zlib_ng.crc32``, a dependency of the package) returns the same values as
Python's ``zlib.crc32`` — the same polynomial, the same initial value and final XOR — so a
checkpoint written by either loads with the other; it computes them several times faster on
current x86 and ARM CPUs (folding with carry-less multiplies, PCLMULQDQ or PMULL). Where zlib-ng
is missing the module falls back to ``zlib.crc32``: slower, identical results.
``benchmarks/bench_checksums.py`` measures both beside the other candidates (CRC-32C, XXH3) and a
memory copy on the machine at hand; the other two are faster than zlib too but give other values,
which would orphan every checkpoint written so far.

>>> hex(crc32(b"123456789"))          # the CRC-32 check value (ISO-HDLC)
'0xcbf43926'
>>> crc32(b"6789", crc32(b"12345")) == crc32(b"123456789")   # chunks chain
True
"""
from __future__ import annotations

try:
    from zlib_ng.zlib_ng import crc32
    IMPLEMENTATION = "zlib-ng"
except ImportError:                      # the same values, from the standard library
    from zlib import crc32
    IMPLEMENTATION = "zlib"

__all__ = ["crc32", "IMPLEMENTATION"]
