"""N durable writers beside N busy processes on this machine's cores, and the host's part (no PyTorch):
the terms B, u, u_h, u_c, m and s of :mod:`mlsysim.lab.distributed.terms`, measured by :func:`beside`.

**Memory the training churns.** A rank of the lab's job frees memory and takes it again all the time:
PyTorch's CPU allocator gives a large tensor's pages back to the kernel when the tensor dies and maps
new ones for the next (the job's plain steps fault in hundreds of megabytes a second, in 4 KB pages).
Linux hands a freed page to the next allocation first; the blocks it has reported to the host wait at
the tail of its free lists (``__putback_isolated_page``) and are taken only when the others run out. How
much of what a writer takes again is still backed then depends on the churn and on the gap between two
checkpoints, so :func:`beside` times the writes once more beside processes that churn memory at the job's
own rate (``churn_Bps``), each started a checkpoint's gap after the one before: u_c, which stands for u and
u_h where it was measured. Then it times writers that leave their whole file cached and call ``fsync`` at
its end, as DCP's does, the oldest of the files kept deleted once a newer one is durable, as the job's oldest
checkpoint is, each write started a checkpoint's gap after the one before, as the job's come (u_f, without a
CRC-32). Memory freed about :data:`RECLAIM_DELAY_S` before may or may not be the host's yet; timed at the job's own
cadence, the writes meet what the job's meet.
"""
from __future__ import annotations

import math
import os
import statistics
import threading
import time
from pathlib import Path

import numpy as np

from ...errors import MlsysimError, check_integer
from .checks import KEEP

#: seconds after which Linux reports a free block to the host (``PAGE_REPORTING_DELAY``, 2 s in
#: mm/page_reporting.c); blocks of 2 MB and more (``pageblock_order``) are reported
RECLAIM_DELAY_S = 2.0
#: seconds :func:`~mlsysim.lab.distributed.terms.reclaimed_write_Bps` and :func:`beside` wait after freeing
#: memory: the kernel reports in passes, each :data:`RECLAIM_DELAY_S` after the last, so the wait spans a few
RECLAIM_WAIT_S = 6.0
#: the block a churning process maps, touches and unmaps at a time (:func:`churn`)
CHURN_BLOCK_B = 64 * 2 ** 20
#: writes timed at a checkpoint's cadence (:func:`cadence_writes`): enough to span about this many seconds,
#: at most this many (10 s and 12 in the kept runs up to ``lab_dist-2026-12-05k``)
CADENCE_SPAN_S, CADENCE_MOST = 30.0, 40
#: the checkpoints the lab's job keeps (:data:`.checks.KEEP`): DCP's engine deletes the oldest once a newer one is
#: durable, so its first ``DCP_KEEP + 1`` checkpoints take memory the machine did not hold
DCP_KEEP = KEEP


def cadence_writes(period_s: float | None, least: int, checkpoints: int | None = None) -> int:
    """How many writes :func:`beside` times at a cadence of ``period_s`` seconds: enough to span about
    :data:`CADENCE_SPAN_S`, at least ``least`` (none where ``least`` is 0), at most :data:`CADENCE_MOST`;
    ``least`` where no cadence is given; as many as the job's ``checkpoints`` where given (and ``least`` is
    not 0), so that the probe's mean weighs each write as the job's mean weighs each checkpoint. The first
    write, like the job's first checkpoint, finds no memory that a write before it freed: on 4 ranks at
    254 MB, at that job's churn and 4.4 s gap, this package's first write took 4.26 and 2.81 ns/B of CPU time
    in two trials, the 39 after it 1.20 and 0.92 on average; the mean of the first seven (what the span gives
    at that gap) came to 1.41 and 1.63, the mean of forty to 1.27 and 0.96
    (``benchmarks/records/lab_writer_samples-2026-12-06.json``). At a short gap a write finds the memory the
    write before freed still backed or not, and costs several times as much when not (at 61 MB on 2 ranks,
    every 0.59 s, DCP's way: 0.38 to 5.6 ns/B from one write to the next,
    ``benchmarks/records/lab_writer_samples-2026-12-05.json``),
    so the job's mean over its checkpoints is the mean of many such writes, which are cheap there. Their
    standard deviation there is 1.00 and 1.25 times their mean (DCP's way, this package's), so the mean of n
    writes moves by about 1.25 / sqrt(n) of itself: 0.36 with twelve, 0.20 with forty (0.12 and 0.15 times on a
    machine where no write found its memory unbacked, ``lab_writer_samples-2026-12-05b.json``).

    >>> cadence_writes(0.6, 3), cadence_writes(2.5, 3), cadence_writes(20.0, 3), cadence_writes(None, 3)
    (40, 12, 3, 3)
    >>> cadence_writes(20.0, 3, checkpoints=12), cadence_writes(0.6, 0, checkpoints=12)
    (12, 0)
    """
    if checkpoints is not None:
        check_integer("checkpoints", checkpoints)
        if least:
            return int(checkpoints)
    if period_s is None or least == 0:
        return least
    return max(least, min(CADENCE_MOST, math.ceil(CADENCE_SPAN_S / period_s)))


def together_s(one, threads: int) -> float:
    """Seconds from starting ``threads`` threads, each running ``one(i)`` (i = 0, 1, ...), to the
    last one's end."""
    pool = [threading.Thread(target=one, args=(i,)) for i in range(threads)]
    t0 = time.perf_counter()
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    return time.perf_counter() - t0


def steal_s() -> float | None:
    """Seconds the host has run other work while this machine's virtual CPUs wanted to run, summed
    over them since boot (``steal`` in ``/proc/stat``); None where the kernel does not report it."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK") if fields[0] == "cpu" and len(fields) > 8 else None
    except (OSError, ValueError):
        return None


def _cpu_s() -> float:
    """This process's CPU time, user and kernel, all its threads (``getrusage``)."""
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def churn(rate_Bps: float, stop, seconds: float = 600.0) -> int:
    """Map, touch and unmap anonymous memory at ``rate_Bps`` bytes per second, :data:`CHURN_BLOCK_B` at a
    time, every page of the system's size written once (as PyTorch's allocator takes a large tensor's
    pages and gives them back), until the event ``stop`` is set or ``seconds`` have passed; returns the
    bytes churned. Where the machine cannot keep up, it churns as fast as it can.

    >>> import threading
    >>> churn(1e9, threading.Event(), seconds=0.05) >= CHURN_BLOCK_B
    True
    """
    import mmap
    if not (0 < rate_Bps < math.inf):
        raise MlsysimError(f"rate_Bps must be a rate > 0 B/s, got {rate_Bps!r}")
    t0, done = time.perf_counter(), 0
    while not stop.is_set() and time.perf_counter() - t0 < seconds:
        block = mmap.mmap(-1, CHURN_BLOCK_B)
        pages = np.frombuffer(block, dtype=np.uint8)
        pages[::mmap.PAGESIZE] = 1
        del pages
        block.close()
        done += CHURN_BLOCK_B
        while not stop.is_set():                  # ahead of the rate: wait, a tenth of a second at a time
            ahead = done / rate_Bps - (time.perf_counter() - t0)
            if ahead <= 0:
                break
            stop.wait(min(ahead, 0.1))
    return done


def _spin(k: int, out) -> None:
    t0 = time.perf_counter()
    x = 0
    for i in range(k):
        x += i * i
    out.put(time.perf_counter() - t0)


def beside(directory, size_B: float, world: int, reclaim_wait_s: float = RECLAIM_WAIT_S, reclaimed: int = 3,
           churn_Bps: float | None = None, period_s: float | None = None,
           churn_period_s: float | None = None, checkpoints: int | None = None) -> dict:
    """N (``world``) threads each write ``size_B / world`` bytes durably (:func:`mlsysim.lab.store.write_durable`:
    CRC-32, 16 MB writes, writeback, ``fsync``) alone, five times in a row, then ``reclaimed`` times more,
    each after ``reclaim_wait_s`` idle (as a job's checkpoints come, the gap between them long enough for
    the host to take back the memory the last write freed), with ``churn_Bps`` as many times again, each
    after the same wait (or each started ``churn_period_s`` after the one before, the gap between the
    ``concurrent`` job's checkpoints, :func:`cadence_writes` times: the job's ``checkpoints`` where given),
    beside ``world`` processes that churn memory at that rate between them (:func:`churn`: the training's, as its
    ranks' plain steps fault it in), then beside ``world`` processes that each spin (pure Python, one core each)
    for three times that long (the median of five). Returns ``writers_alone_s`` (the best of the five alone),
    ``writers_cpu_s`` (their CPU time alone, user and kernel, as ``getrusage`` accounts it to this process: the
    median of the five), ``writers_cpu_reclaimed_s`` (the same of the writes after the wait, the median; None where
    ``reclaimed`` is 0), ``writers_cpu_churned_s`` (the same beside the churning processes, the mean; None without
    ``churn_Bps`` or where ``reclaimed`` is 0), ``writers_cpu_cached_s`` (the same of writers that leave their whole
    files cached, ``fsync`` at the end, each file of the write :data:`DCP_KEEP` writes before deleted after it,
    :func:`_cached_writers`: :func:`cadence_writes` + 1 writes, the first not counted, or, with ``checkpoints``,
    that many, each counted, as the DCP job's first checkpoint counts in its mean; each started ``period_s`` after
    the one before, the job's gap between checkpoints, or ``reclaim_wait_s`` after the one before ended where
    ``period_s`` is None; the mean; None where the churned ones are), each write's CPU seconds of those two
    (``writers_cpu_churned_samples_s``, ``writers_cpu_cached_samples_s``), ``churn_Bps``,
    ``writers_beside_s`` (the writers' seconds with the spinners beside them), ``loss_s`` (how much longer
    the slowest spinner took than alone), ``mean_loss_s`` (the same of the spinners' mean: what each lost, on
    average), ``steal_s`` (the CPU time the host took from this machine while the writers ran beside the
    spinners, less the same without the writers: the host's work for the writes, a virtual disk's included; None
    where :func:`steal_s` is not reported) and ``size_B``: what N ranks training and N writers on this machine's
    cores do to each other, the kernel's and the host's work for the writes included."""
    import multiprocessing
    from ..store import write_durable
    _check(world, reclaimed, reclaim_wait_s, churn_Bps, period_s=period_s, churn_period_s=churn_period_s)
    n = max(int(size_B) // world, 1)
    data = np.full(n, 7, dtype=np.uint8)
    ctx = multiprocessing.get_context("fork")

    def writers() -> float:
        return together_s(lambda i: write_durable(Path(directory) / f"beside-{i}.bin", [data]), world)

    timed = []                                   # (seconds, CPU seconds) of each write alone
    for _ in range(5):
        c0 = _cpu_s()
        timed.append((writers(), _cpu_s() - c0))
    alone = min(w for w, _ in timed)
    after_wait = _after_wait(writers, reclaimed, reclaim_wait_s)     # into memory the host took back
    churned, cached = _churned(directory, writers, data, ctx, world, churn_Bps, reclaimed, reclaim_wait_s,
                               churn_period_s, period_s, checkpoints) if churn_Bps else ([], [])
    k = _spins_for(3 * max(alone, 0.05), ctx)

    def spinners(with_writers: bool) -> tuple[float, float, float | None, float | None]:
        q = ctx.SimpleQueue()
        procs = [ctx.Process(target=_spin, args=(k, q)) for _ in range(world)]
        s0 = steal_s()
        for pr in procs:
            pr.start()
        time.sleep(0.05)                                   # the spinners run before the writers start
        w = writers() if with_writers else None
        spun = [q.get() for _ in procs]
        for pr in procs:
            pr.join()
        s1 = steal_s()
        return max(spun), statistics.mean(spun), w, None if s0 is None or s1 is None else s1 - s0

    bases = [spinners(False) for _ in range(2)]
    runs = sorted(spinners(True) for _ in range(5))           # the median run, by the slowest spinner's loss
    slowest, _, w, _ = runs[2]
    mean_base = min(b[1] for b in bases)
    stolen = None if any(r[3] is None for r in bases + runs) else max(
        0.0, statistics.median(r[3] for r in runs) - min(b[3] for b in bases))
    return {"size_B": float(n * world), "writers_alone_s": alone,
            "writers_cpu_s": statistics.median(c for _, c in timed),
            "writers_cpu_reclaimed_s": statistics.median(after_wait) if after_wait else None, "writers_beside_s": w,
            "writers_cpu_churned_s": statistics.mean(churned) if churned else None, "churn_Bps": churn_Bps,
            "writers_cpu_cached_s": statistics.mean(cached) if cached else None,
            "writers_cpu_churned_samples_s": churned, "writers_cpu_cached_samples_s": cached,
            "loss_s": max(0.0, slowest - min(b[0] for b in bases)),
            "mean_loss_s": max(0.0, statistics.median(r[1] for r in runs) - mean_base), "steal_s": stolen}


def _churned(directory, writers, data, ctx, world: int, churn_Bps: float, reclaimed: int, wait_s: float,
             churn_period_s: float | None, period_s: float | None, checkpoints: int | None = None) -> tuple[list, list]:
    """CPU seconds of each write beside processes churning memory at ``churn_Bps``: this package's
    (``writers``, :func:`cadence_writes` of them at ``churn_period_s``), then DCP's way (:func:`_cached_writers`
    of ``data``, as many at ``period_s`` after one that frees no older file and is not counted; the job's
    ``checkpoints``, each counted, where given), each after ``wait_s`` where its period is None; the cached
    files deleted after."""
    churned = _beside_churn(writers, ctx, churn_Bps, cadence_writes(churn_period_s, reclaimed, checkpoints), wait_s,
                            world, churn_period_s)
    uncounted = 0 if checkpoints else 1          # the first frees no older file: as the job's first checkpoint
    cached = _beside_churn(_cached_writers(directory, data, world), ctx, churn_Bps,
                           cadence_writes(period_s, reclaimed, checkpoints) + uncounted, wait_s, world,
                           period_s)[uncounted:] if reclaimed else []
    for path in Path(directory).glob("cached-*.bin"):
        path.unlink()
    return churned, cached


def _check(world, reclaimed, reclaim_wait_s, churn_Bps, **periods) -> None:
    """:func:`beside`'s arguments, each refused with its limit (``periods``: gaps between checkpoints)."""
    check_integer("world", world)
    if type(reclaimed) is not int or reclaimed < 0:
        raise MlsysimError(f"reclaimed must be an integer >= 0 (writes timed after a wait), got {reclaimed!r}")
    if not (0 <= reclaim_wait_s < math.inf):
        raise MlsysimError(f"reclaim_wait_s must be a time >= 0 s, got {reclaim_wait_s!r}")
    if churn_Bps is not None and not (0 < churn_Bps < math.inf):
        raise MlsysimError(f"churn_Bps must be a rate > 0 B/s (memory the training churns) or None, got {churn_Bps!r}")
    for name, period in periods.items():
        if period is not None and not (0 < period < math.inf):
            raise MlsysimError(f"{name} must be a time > 0 s (the gap between checkpoints) or None, got {period!r}")


def _beside_churn(writers, ctx, churn_Bps: float, reclaimed: int, wait_s: float, world: int,
                  period_s: float | None = None) -> list:
    """CPU seconds of each of ``reclaimed`` writes, each after ``wait_s`` (or each started ``period_s`` after
    the one before), with ``world`` processes (one per rank) churning memory at ``churn_Bps`` between them
    (:func:`churn`) through the waits and the writes."""
    stop = ctx.Event()
    procs = [ctx.Process(target=churn, args=(churn_Bps / world, stop)) for _ in range(world)]
    for proc in procs:
        proc.start()
    try:
        return _after_wait(writers, reclaimed, wait_s, period_s)
    finally:
        stop.set()
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()


def cached_write(path, data) -> None:
    """Write ``data`` into a new file at ``path`` as DCP's writer does: left whole in the page cache, one ``fsync``
    at its end (no CRC-32)."""
    from ..floors import cache_write_once
    cache_write_once(path, data)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def kept_series(directory, data, name: str, keep: int = DCP_KEEP):
    """A call that writes ``data`` into the next file of a series (``cached-{name}-{k}.bin`` in ``directory``) as
    DCP's writer does (:func:`cached_write`), in the calling thread, then deletes the file written ``keep`` calls
    before: the last ``keep`` stay, as a job's last ``keep`` checkpoints do."""
    calls = [0]

    def write() -> None:
        cached_write(Path(directory) / f"cached-{name}-{calls[0] % (keep + 1)}.bin", data)
        calls[0] += 1
        (Path(directory) / f"cached-{name}-{calls[0] % (keep + 1)}.bin").unlink(missing_ok=True)
    return write


def _cached_writers(directory, data, world: int, keep: int = DCP_KEEP):
    """A call that has ``world`` threads each write ``data`` into a new file left in the page cache, one
    ``fsync`` at its end (DCP's writer, less its CRC-32), then deletes each thread's file written ``keep`` calls
    before (a checkpoint's oldest kept one, deleted once the newer one is durable: DCP's job keeps
    :data:`DCP_KEEP`, so its first ``keep + 1`` calls grow the page cache, as the job's first checkpoints do; one
    kept in the runs up to ``lab_dist-2026-12-07c``); returns the seconds of the writes. The last ``keep``
    calls' files stay (``cached-*.bin`` in ``directory``)."""
    series = [kept_series(directory, data, str(i), keep) for i in range(world)]
    return lambda: together_s(lambda i: series[i](), world)


def _after_wait(writers, times: int, wait_s: float, period_s: float | None = None) -> list:
    """This process's CPU seconds in each of ``times`` calls of ``writers``, each after ``wait_s`` seconds, or,
    with ``period_s``, each started that long after the one before (at once where the one before took longer)."""
    out, took = [], 0.0
    for _ in range(times):
        time.sleep(wait_s if period_s is None else max(0.0, period_s - took))
        c0, t0 = _cpu_s(), time.perf_counter()
        writers()
        out.append(_cpu_s() - c0)
        took = time.perf_counter() - t0
    return out


def _spins_for(seconds: float, ctx) -> int:
    """How many iterations of :func:`_spin` take about ``seconds`` on one core (timed on a million)."""
    t0 = time.perf_counter()
    _spin(10 ** 6, ctx.SimpleQueue())
    return int(seconds / ((time.perf_counter() - t0) / 10 ** 6)) + 1
