"""Free page reporting: when the host of a virtual machine takes back the memory its guest frees.

Where the guest's balloon device reports free pages (``mlsysim.lab.floors.reports_free_pages``), Linux
hands the host the blocks of at least :data:`REPORT_ORDER` (2 MiB with 4 KiB pages) that stay free, and the
host drops them; the next touch of such a block waits for the host to back it again. Linux's reporter
(``mm/page_reporting.c``) starts 2 s after a block that large is freed and runs again every 2 s while work
remains (:data:`PASS_S`); in each pass it reports, from each free list of n blocks, at most ceil(n / 512) + 1
batches of :data:`BATCH` blocks (about a sixteenth of the list: "all pages on an idle system in about 30
seconds"), skipping the blocks reported before, and leaves the unreported ones at the list's head, where the
allocator takes first. So memory freed a few seconds ago is partly the guest's still, and new memory takes
that part first. With P the bytes one pass reports (:func:`pass_B`, from the free lists of
``/proc/buddyinfo``), the passes by δ seconds after a free, k(δ) = floor(δ / 2 s), have handed at most
R(δ) = k(δ) P of it to the host, and a touch of B bytes of new memory δ s after F bytes were freed costs

    B w + cold(δ) (c − w),    cold(δ) = min(B, max(0, B − (F − R(δ))))

w: the seconds per byte of memory still backed (the touch right after the free), c: of memory the host has
(long after it). k(δ) counts the passes as if none was pending at the free; where one was (the system frees
memory too), it runs sooner, and by δ the host may have one pass more.

Measured on the machine the lab was recorded on (``benchmarks/bench_lab_reporting.py``, 4 GB freed and touched,
``benchmarks/records/lab_reporting-2026-12-05.json``): w 0.22 ns/B, c 5.9; the touch 2.5 and 3.5 s after the
free within 15 % of the formula (the first pass handed over the 1.5 GB the free lists gave), but the passes
after it far less than their budget: by 12 s about 2.9 GB of the 4 were the host's, where the formula has all
of it by 6 s. Why is open: the balloon driver waits for the host to take each batch before it sends the next,
so a host slow to take them would slow the passes, but nothing here times that. R(δ) is the most the kernel's
rule lets go, not what a given host takes.

>>> lists = {("Normal", 9): 777, ("Normal", 10): 2387, ("DMA32", 10): 750}
>>> pass_B(lists) / 2 ** 20     # (2 + 1) x 32 x 2 MiB + (5 + 1) x 32 x 4 MiB + (2 + 1) x 32 x 4 MiB
1344.0
>>> round(touch_s(3e9, 3e9, 5.0, pass_B(lists), w=0.1e-9, c=2e-9), 3)   # 2 passes: 2.82 GB the host's
5.655
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..errors import MlsysimError

#: the reporter's least block: 2 ** 9 pages (``pageblock_order`` on x86-64 with 4 KiB pages)
REPORT_ORDER = 9
#: blocks per call to the balloon device (``PAGE_REPORTING_CAPACITY``)
BATCH = 32
#: seconds between the reporter's passes, and from a free to the first (``PAGE_REPORTING_DELAY``)
PASS_S = 2.0
#: the page size of ``/proc/buddyinfo``'s orders on this kind of machine
PAGE_B = 4096


def free_lists(text: str | None = None) -> dict:
    """The free blocks of each zone and order from ``/proc/buddyinfo`` (``text``, or read now):
    ``{(zone, order): blocks}``, orders from :data:`REPORT_ORDER` up."""
    if text is None:
        with open("/proc/buddyinfo") as f:
            text = f.read()
    out: dict = {}
    for line in text.splitlines():
        _, _, counts = line.partition("zone")
        if not counts.strip():
            continue
        zone, *blocks = counts.split()
        for order, n in enumerate(blocks):
            if order >= REPORT_ORDER:
                out[(zone, order)] = out.get((zone, order), 0) + int(n)
    return out


def pass_B(lists: dict, page_B: int = PAGE_B) -> float:
    """Bytes one pass of the reporter hands the host at most: for each free list of n blocks (``lists``, as
    :func:`free_lists` returns them) (ceil(n / 512) + 1) batches of :data:`BATCH` blocks, no more than n."""
    total = 0.0
    for (_, order), n in lists.items():
        if n < 0 or order < REPORT_ORDER:
            raise MlsysimError(f"a free list needs blocks >= 0 of order >= {REPORT_ORDER}, got {n} of order {order}")
        blocks = min(n, (math.ceil(n / (BATCH * 16)) + 1) * BATCH)
        total += blocks * (page_B << order)
    return total


def handed_B(delay_s: float, per_pass_B: float) -> float:
    """Bytes of a free the host may have taken back ``delay_s`` seconds after it: a pass every
    :data:`PASS_S`, the first that long after the free."""
    if not delay_s >= 0 or not per_pass_B >= 0:
        raise MlsysimError(f"delay_s and per_pass_B must be >= 0, got {delay_s!r} and {per_pass_B!r}")
    return math.floor(delay_s / PASS_S) * per_pass_B


def touch_s(touch_B: float, freed_B: float, delay_s: float, per_pass_B: float, w: float, c: float) -> float:
    """Seconds to touch ``touch_B`` bytes of new memory ``delay_s`` s after ``freed_B`` bytes were freed (the
    module's formula; ``w`` and ``c``: seconds per byte backed and taken back)."""
    if not (touch_B >= 0 and freed_B >= 0 and 0 <= w <= c):
        raise MlsysimError(f"touch_B and freed_B must be >= 0 and 0 <= w <= c, got {touch_B!r}, {freed_B!r}, "
                           f"w={w!r}, c={c!r}")
    backed = max(0.0, freed_B - handed_B(delay_s, per_pass_B))
    return touch_B * w + max(0.0, touch_B - backed) * (c - w)


def touch_after_free(freed_B: int, touch_B: int, delay_s: float) -> dict:
    """Measure it: in this process, touch ``freed_B`` bytes of new memory, free them, wait ``delay_s`` s, then
    time the touch of ``touch_B`` bytes of new memory (NumPy's allocation, its huge pages where the kernel
    grants them). Returns ``first_s`` (the first touch), ``touch_s``, the free lists read right after the free
    (``lists``, keyed ``"zone:order"``) and the bytes a pass of the reporter hands over from them (``pass_B``)."""
    for name, v in (("freed_B", freed_B), ("touch_B", touch_B)):
        if type(v) is not int or v < 1:
            raise MlsysimError(f"{name} must be a positive integer of bytes, got {v!r}")
    if not 0 <= delay_s <= 600:
        raise MlsysimError(f"delay_s must be 0 to 600 s, got {delay_s!r}")
    t0 = time.perf_counter()
    a = np.empty(freed_B, dtype=np.uint8)
    a.fill(1)
    first = time.perf_counter() - t0
    del a
    lists = free_lists()
    time.sleep(delay_s)
    t0 = time.perf_counter()
    b = np.empty(touch_B, dtype=np.uint8)
    b.fill(1)
    took = time.perf_counter() - t0
    del b
    return {"first_s": first, "touch_s": took, "lists": {f"{z}:{o}": n for (z, o), n in lists.items()},
            "pass_B": pass_B(lists)}
