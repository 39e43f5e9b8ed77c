"""The machine's floors for a checkpoint of ``size_B`` bytes: what no engine can beat.

* **memory copy** — copying ``size_B`` bytes from one host buffer to another (``np.copyto``,
  each byte read once and written once); a snapshot that copies the state while the training
  waits, then lets it resume, stalls at least ``size_B / copy_Bps`` (a pipelined snapshot copies
  beside the next forward and backward pass instead, and can stall less);
* **write + fsync** — writing ``size_B`` bytes sequentially from memory to a new file in the
  checkpoint directory as the engines write (16 MiB ``os.write`` calls, each chunk's writeback
  started at once, at most 64 MiB of the file kept in the page cache, then ``fsync``; no checksum;
  :func:`write_once`); no durable save can finish sooner than
  ``size_B / write_Bps``. :func:`~mlsysim.lab.pytorch.compare.compare` times it again between the
  engines' saves and keeps the fastest (:func:`with_write_rounds`): a shared disk drifts;
* **read** — reading that file back in one call, once with its pages dropped from the page
  cache (``posix_fadvise(DONTNEED)``; cold) and once right after (warm). If the two are
  close, the drop did not take effect (or the device is as fast as memory):
  :attr:`Floors.cache_dropped` says which.

Three rates more, the terms the engines' own work adds to the floors (:mod:`mlsysim.lab.pytorch.model`
predicts each engine from them):

* **page-cache write** — the same 16 MiB ``os.write`` calls with no writeback and no ``fsync``: what
  a save that never syncs (``torch.save``) pays to hand its bytes to the kernel. Timed into new
  files that are kept (the cache grows into memory it has not used lately, as a checkpoint's file
  does) and again into pages just freed by deleting the previous file (``cache_rewrite_Bps``): on a
  virtual machine the first is the slower by the cost of memory the host must back again;
* **copy into new memory** — ``np.copyto`` into a buffer allocated just before, so that every
  page is faulted in during the copy: a snapshot into freshly allocated tensors (DCP's staging)
  or a load that allocates what it returns pays this, not the copy floor. Timed twice, because the
  page size sets the number of faults: into NumPy's allocation (which asks Linux for huge pages on
  large arrays, ``madvise(MADV_HUGEPAGE)``: this package's loader) and into a plain anonymous
  mapping, as PyTorch's CPU allocator gets it (4 KB pages unless transparent huge pages are set
  to ``always``: PyTorch's loaders and DCP's staging);
* **checksum** — the CRC-32 of ``size_B`` bytes with this package's implementation
  (:mod:`mlsysim.lab.checksum`), CPU time the durable engines and the verifying loader add.

Each is the best of ``repeats`` timings (a floor is the least disturbed run).
"""
from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from dataclasses import asdict, dataclass

import numpy as np

from ..measure import _best, drop_page_cache

CHUNK_B = 16 * 2 ** 20


@dataclass(frozen=True)
class Floors:
    """Rates in bytes per second and the floors in seconds for ``size_B`` bytes."""

    size_B: float
    copy_Bps: float
    write_Bps: float
    read_cold_Bps: float
    read_warm_Bps: float
    write_rounds_s: tuple = ()   # the write floor timed again between the engines' saves (see with_write_rounds)
    cache_write_Bps: float = float("nan")   # os.write into the page cache, no fsync
    cache_rewrite_Bps: float = float("nan")  # the same into pages just freed by deleting the previous file
    fresh_copy_Bps: float = float("nan")    # copy into memory allocated just before (page faults included)
    fresh_copy_small_pages_Bps: float = float("nan")   # the same into an anonymous mapping (PyTorch's tensors)
    crc_Bps: float = float("nan")           # this package's CRC-32

    @property
    def typical_write_s(self) -> float:
        """The median of the write timings taken between the engines' saves (the floor's own rate
        without them): what a write of ``size_B`` takes on this disk as it runs, not at its best."""
        rounds = sorted(self.write_rounds_s) or [self.write_floor_s]
        n = len(rounds)
        return rounds[n // 2] if n % 2 else 0.5 * (rounds[n // 2 - 1] + rounds[n // 2])

    @property
    def copy_floor_s(self) -> float:
        return self.size_B / self.copy_Bps

    @property
    def write_floor_s(self) -> float:
        return self.size_B / self.write_Bps

    @property
    def read_floor_s(self) -> float:
        return self.size_B / self.read_cold_Bps

    @property
    def cache_dropped(self) -> bool:
        """Whether the cold read was measurably slower than the warm one (at least 1.5x)."""
        return self.read_warm_Bps > 1.5 * self.read_cold_Bps

    def to_dict(self) -> dict:
        """Plain values; a rate not measured (NaN) as JSON's null."""
        plain = {k: (None if v != v else v) for k, v in asdict(self).items()}
        return {**plain, "write_rounds_s": list(self.write_rounds_s),
                "copy_floor_s": self.copy_floor_s, "write_floor_s": self.write_floor_s,
                "read_floor_s": self.read_floor_s, "cache_dropped": self.cache_dropped,
                "typical_write_s": self.typical_write_s}


def write_once(path, data) -> float:
    """Seconds to write ``data`` (bytes-like) sequentially to a new file at ``path`` as the engines
    write (:func:`mlsysim.lab.store.write_chunks`: 16 MiB ``os.write`` calls, each chunk's writeback
    started as soon as it is written, at most 64 MiB of the file left in the page cache), then
    ``fsync``, no checksum: the fastest way to durable bytes (the file is left in place)."""
    from .store import write_chunks
    view = memoryview(data).cast("B")
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_chunks(fd, [view], checksum=False)
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t0


def cache_write_once(path, data) -> float:
    """Seconds to write ``data`` to a new file at ``path`` in 16 MiB ``os.write`` calls, leaving the
    bytes in the page cache (no writeback started, no ``fsync``; the file is left in place, dirty)."""
    view = memoryview(data).cast("B")
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for i in range(0, len(view), CHUNK_B):
            os.write(fd, view[i:i + CHUNK_B])
    finally:
        os.close(fd)
    return time.perf_counter() - t0


def _fresh_copy_s(src: np.ndarray) -> float:
    t0 = time.perf_counter()
    dst = np.empty_like(src)
    np.copyto(dst, src)
    return time.perf_counter() - t0


def fresh_mapping_copy_s(src: np.ndarray) -> float:
    """Seconds to copy ``src`` into a new anonymous mapping (``mmap``, 4 KB pages as PyTorch's CPU
    allocator gets them unless transparent huge pages are ``always`` on), its page faults included."""
    import mmap
    t0 = time.perf_counter()
    m = mmap.mmap(-1, src.nbytes)
    dst = np.frombuffer(m, dtype=np.uint8)
    np.copyto(dst, src)
    elapsed = time.perf_counter() - t0
    del dst
    m.close()
    return elapsed


def measure_floors(size_B: float, directory=None, repeats: int = 3) -> Floors:
    """Measure the floors and rates with ``size_B`` bytes in ``directory`` (temporary files, removed)."""
    from .checksum import crc32
    n = max(int(size_B), 1)
    src = np.full(n, 7, dtype=np.uint8)
    dst = np.empty_like(src)
    dst.fill(0)                                   # touch the pages outside the timing
    copy_s = _best(lambda: np.copyto(dst, src), repeats)
    fresh_s = min(_fresh_copy_s(src) for _ in range(repeats))
    mapped_s = min(fresh_mapping_copy_s(src) for _ in range(repeats))
    crc_s = _best(lambda: crc32(src), repeats)
    with tempfile.TemporaryDirectory(dir=directory, prefix="floors-") as tmp:
        path = os.path.join(tmp, "floor.bin")

        def read():
            with open(path, "rb", buffering=0) as f:
                f.readinto(memoryview(dst))

        def read_cold():
            drop_page_cache(path)
            t0 = time.perf_counter()
            read()
            return time.perf_counter() - t0

        cached, rewritten = [], []
        for k in range(repeats):
            cached.append(cache_write_once(os.path.join(tmp, f"cached-{k}.bin"), src))
            os.sync()                             # untimed: no dirty page left to slow what follows
        for k in range(repeats + 1):              # the first frees the kept files' pages
            for old in os.listdir(tmp):
                os.unlink(os.path.join(tmp, old))
            rewritten.append(cache_write_once(os.path.join(tmp, "rewrite.bin"), src))
        os.unlink(os.path.join(tmp, "rewrite.bin"))
        os.sync()
        write_s = min(write_once(path, src) for _ in range(repeats))
        cold_s = min(read_cold() for _ in range(repeats))
        warm_s = _best(read, repeats)
    return Floors(size_B=float(n), copy_Bps=n / copy_s, write_Bps=n / write_s, read_cold_Bps=n / cold_s,
                  read_warm_Bps=n / warm_s, cache_write_Bps=n / min(cached),
                  cache_rewrite_Bps=n / min(rewritten[1:]), fresh_copy_Bps=n / fresh_s,
                  fresh_copy_small_pages_Bps=n / mapped_s,
                  crc_Bps=n / crc_s)


def with_write_rounds(floors: Floors, rounds_s) -> Floors:
    """The floors with the write rate of the fastest of ``rounds_s`` (more timings of
    :func:`write_once` of the same size, taken between the engines' saves) where it beats the first.
    On a shared disk the rate drifts; a floor is the best the device was seen to do."""
    best = min(rounds_s, default=float("inf"))
    return dataclasses.replace(floors, write_Bps=max(floors.write_Bps, floors.size_B / best),
                               write_rounds_s=tuple(rounds_s))


VIRTIO_BALLOON_F_REPORTING = 5   # the feature bit of free page reporting (virtio 1.2, §5.5.3)


def reports_free_pages(root: str = "/sys/bus/virtio/devices") -> bool:
    """Whether this machine is a virtual machine whose balloon device reports free pages to its host
    (Linux's free page reporting over virtio-balloon): the host may then take back memory the guest
    freed a moment ago (Linux reports free blocks after a 2 s delay), and the next touch of it waits
    for the host to back it again, a cost a page the guest reuses at once does not pay."""
    try:
        devices = os.listdir(root)
    except OSError:
        return False
    for dev in devices:
        try:
            if os.path.basename(os.readlink(os.path.join(root, dev, "driver"))) != "virtio_balloon":
                continue
            with open(os.path.join(root, dev, "features")) as f:
                bits = f.read().strip()
        except OSError:
            continue
        if len(bits) > VIRTIO_BALLOON_F_REPORTING and bits[VIRTIO_BALLOON_F_REPORTING] == "1":
            return True
    return False


def machine_facts(directory=None) -> dict:
    """What a recorded measurement ran on: CPU model, cores, memory, the file system of
    ``directory``, the operating system, and whether free memory is reported back to a host
    (:func:`reports_free_pages`) (Linux's /proc and /sys; fields it cannot read are left out)."""
    import platform
    facts = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
             "memory_B": float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")),
             "system": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
             "reports_free_pages": reports_free_pages()}
    try:
        with open("/proc/cpuinfo") as f:
            facts["cpu"] = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        where = os.path.realpath(directory or tempfile.gettempdir())
        with open("/proc/mounts") as f:
            mounts = [l.split()[:3] for l in f]
        best = max((m for m in mounts if where == m[1] or where.startswith(m[1].rstrip("/") + "/")),
                   key=lambda m: len(m[1]))
        facts["file_system"] = f"{best[2]} on {best[0]}"
    except (OSError, ValueError):
        pass
    return facts
