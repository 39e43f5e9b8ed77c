"""Three checkpoint engines behind one interface: ``save(step, state)``, ``wait()``, ``close()``.

* :class:`SyncEngine` — the common blocking baseline (a save made durable before training goes
  on, as ``torch.save`` followed by ``fsync``): the training loop writes the whole state to a
  temporary file, flushes it, waits for ``fsync``, renames it and writes the commit record.
  Training is blocked throughout: stall = serialize + write + fsync + commit.
* :class:`ConcurrentEngine` — a pool of ``buffers`` preallocated host buffers (the
  number of checkpoints that may be in flight, as in PCcheck, Strati et al. 2025) and
  background writer threads. ``save`` only copies the state into a free buffer
  (CheckFreq's snapshot, Mohan et al., FAST'21) and returns; a writer persists the
  buffer in chunks, fsyncs, renames, commits, prunes, and frees the buffer. When
  every buffer is still being written, ``save`` waits for one: that back-pressure is
  part of the stall. An error in a writer (a full disk) is raised by the next call.
* :class:`PipelinedEngine` — as the concurrent engine, but ``save`` only starts the copy: it
  runs in the background while the next forward and backward pass compute, and the trainer
  calls :meth:`~PipelinedEngine.fence` just before the optimizer step, which would overwrite
  the state being copied (CheckFreq's pipelined snapshot, Mohan et al., FAST'21, §4). Stall =
  back-pressure + the part of the copy the pass did not hide; on a GPU the same design puts
  the device-to-host copy on the copy engine while the SMs compute.

All three compute a CRC-32 of each data file, commit atomically (see
:mod:`mlsysim.lab.store`) and keep the newest ``keep`` committed checkpoints, pruning the older
ones after the checkpoint is durable and after ``save`` returned: pruning is in neither the stall
nor the time to durable, and is timed on its own (:class:`SaveRecord`).
All accept ``hook(point, step)``, called at ``"snapshot"`` (halfway through the copy
into memory; for the sync engine just before the write), ``"persist"`` (after the first
chunk reached the file) and ``"commit"`` (right after the commit record is durable), and
``on_commit(step)``; both are called while holding :attr:`Engine.lock`, so that a
process stopped inside a hook has no commit half-announced.
"""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..errors import MlsysimError, UnknownNameError
from . import store

ENGINES = ("sync", "concurrent", "pipelined")


@dataclass(frozen=True)
class SaveRecord:
    """One checkpoint: its step, bytes, the stall it cost training (s), of which back-pressure
    (s), the seconds from the start of ``save`` until it was committed, and the seconds its
    pruning of older checkpoints took afterwards (NaN: nothing pruned yet).

    One protocol for every engine, ours and PyTorch's: ``stall_s`` ends when ``save`` returns
    (or, for the pipelined engine, when the copy its fence waits for ends), ``durable_s`` when the data and
    the commit record are on disk, and pruning runs after both and is timed on its own."""

    step: int
    size_B: int
    stall_s: float
    wait_s: float
    durable_s: float
    prune_s: float = float("nan")


class Engine:
    """Common part: directory checks, hooks, commit and pruning, the records of each save."""

    name = ""

    def __init__(self, directory, keep: int = 2, hook=None, on_commit=None):
        if type(keep) is not int or keep < 1:
            raise MlsysimError(f"keep must be an integer >= 1 (the last good checkpoint is never deleted), got {keep!r}")
        self.directory = store.check_directory(directory)
        self.keep = keep
        self.lock = threading.RLock()
        self._hook, self._on_commit = hook, on_commit
        self.records: list[SaveRecord] = []
        self._durable: dict[int, float] = {}
        self._pruned: dict[int, float] = {}

    def _call(self, point: str, step: int) -> None:
        if self._hook is not None:
            with self.lock:
                self._hook(point, step)

    def _persist(self, step: int, chunks, started: float) -> None:
        d = self.directory
        size, crc = store.write_durable(d / store.data_name(step), chunks,
                                        after_first=lambda: self._call("persist", step))
        with self.lock:
            store.commit(d, step, size, crc)
            self._durable[step] = time.perf_counter() - started
            if self._on_commit is not None:
                self._on_commit(step)
            self._call("commit", step)

    def _prune(self, step: int, remove=None) -> None:
        """Delete the checkpoints older than the newest ``keep`` (``remove()`` does it; default:
        this package's store) and time it, outside the stall and the time to durable."""
        t0 = time.perf_counter()
        with self.lock:
            (remove or (lambda: store.prune(self.directory, self.keep)))()
        self._pruned[step] = time.perf_counter() - t0

    def save(self, step: int, state) -> float:
        """Checkpoint ``state`` as step ``step``; returns the training stall in seconds."""
        raise NotImplementedError

    def wait(self) -> None:
        """Return once every checkpoint saved so far is committed (raises a writer's error)."""

    def close(self) -> None:
        self.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            self.close()
        else:
            self.abort()

    def abort(self) -> None:
        """Stop without persisting the checkpoints still queued (they stay uncommitted); a write
        already under way is finished first."""

    def summary(self) -> list[SaveRecord]:
        """The records of every save, with the time until each was durable."""
        self.wait()
        return [SaveRecord(r.step, r.size_B, r.stall_s, r.wait_s, self._durable.get(r.step, float("nan")),
                           self._pruned.get(r.step, float("nan"))) for r in self.records]


class SyncEngine(Engine):
    """Serialize, write, fsync, rename, commit — all inside :meth:`save`."""

    name = "sync"

    def save(self, step: int, state) -> float:
        t0 = time.perf_counter()
        lay = store.layout(state, step)
        self._call("snapshot", step)
        self._persist(step, store.chunks_of(lay), t0)
        stall = time.perf_counter() - t0
        self.records.append(SaveRecord(step, lay.size_B, stall, 0.0, stall))
        self._prune(step)
        return stall


class ConcurrentEngine(Engine):
    """Copy into one of ``buffers`` preallocated buffers; ``writers`` threads persist them."""

    name = "concurrent"

    def __init__(self, directory, keep: int = 2, buffers: int = 2, writers: int = 1, chunk_B: int = store.CHUNK_B,
                 hook=None, on_commit=None):
        super().__init__(directory, keep, hook, on_commit)
        for k, v in (("buffers", buffers), ("writers", writers), ("chunk_B", chunk_B)):
            if type(v) is not int or v < 1:
                raise MlsysimError(f"{k} must be a positive integer, got {v!r}")
        self.chunk_B = chunk_B
        self._buffers: list[np.ndarray | None] = [None] * buffers
        self._free: queue.Queue = queue.Queue()
        for i in range(buffers):
            self._free.put(i)
        self._jobs: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._stop = False
        self._threads = [threading.Thread(target=self._writer, name=f"checkpoint-writer-{i}", daemon=True)
                         for i in range(writers)]
        for t in self._threads:
            t.start()

    def prepare(self, size_B: int) -> None:
        """Allocate and touch every buffer now (not during the first save)."""
        for i, b in enumerate(self._buffers):
            if b is None or len(b) < size_B:
                b = self._buffers[i] = np.empty(size_B, dtype=np.uint8)
                b.fill(0)  # touch every page now, not in the first copy

    def _raise_pending(self) -> None:
        if self._error is not None:
            e, self._error = self._error, None
            raise e

    def save(self, step: int, state) -> float:
        self._raise_pending()
        t0 = time.perf_counter()
        lay = store.layout(state, step)
        i = self._free.get()  # back-pressure: every buffer is still being written
        waited = time.perf_counter() - t0
        if self._error is not None:  # a writer failed while we waited: hand the buffer back, report
            self._free.put(i)
            self._raise_pending()
        buf = self._buffers[i]
        if buf is None or len(buf) < lay.size_B:
            buf = self._buffers[i] = np.empty(lay.size_B, dtype=np.uint8)
        store.fill(buf, lay, midway=lambda: self._call("snapshot", step))
        stall = time.perf_counter() - t0
        self._jobs.put((step, i, lay.size_B, t0))
        self.records.append(SaveRecord(step, lay.size_B, stall, waited, float("nan")))
        return stall

    def _writer(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None or self._stop:
                self._jobs.task_done()
                return
            step, i, size, t0 = job
            try:
                view = self._buffers[i][:size]
                chunks = (view[k:k + self.chunk_B] for k in range(0, size, self.chunk_B))
                self._persist(step, chunks, t0)
                self._prune(step)
            except BaseException as e:  # handed to the training thread by the next call
                self._error = self._error or e
            finally:
                self._free.put(i)
                self._jobs.task_done()

    def wait(self) -> None:
        self._jobs.join()
        self._raise_pending()

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self._shutdown()

    def abort(self) -> None:
        self._stop = True
        self._shutdown()

    def _shutdown(self) -> None:
        for _ in self._threads:
            self._jobs.put(None)
        for t in self._threads:
            t.join()


class PipelinedEngine(ConcurrentEngine):
    """The concurrent engine's buffers and writers, with the copy itself in the background:
    :meth:`save` takes a free buffer and the state's layout (its small values are read now) and
    starts a copier thread; the training loop goes on into the next forward and backward pass,
    which read the state but do not change it, and calls :meth:`fence` before the optimizer step.
    The time :meth:`fence` waits is added to that checkpoint's stall."""

    name = "pipelined"

    def __init__(self, directory, keep: int = 2, buffers: int = 2, writers: int = 1, chunk_B: int = store.CHUNK_B,
                 hook=None, on_commit=None):
        super().__init__(directory, keep, buffers, writers, chunk_B, hook, on_commit)
        self._copied = threading.Event()
        self._copied.set()
        self._copied_at: float | None = None  # perf_counter at the end of the newest copy (None: not ended)

    def save(self, step: int, state) -> float:
        self.fence()                          # the previous snapshot is complete before a new one starts
        self._raise_pending()
        t0 = time.perf_counter()
        lay = store.layout(state, step)
        i = self._free.get()                  # back-pressure, as in the concurrent engine
        waited = time.perf_counter() - t0
        if self._error is not None:
            self._free.put(i)
            self._raise_pending()
        buf = self._buffers[i]
        if buf is None or len(buf) < lay.size_B:
            buf = self._buffers[i] = np.empty(lay.size_B, dtype=np.uint8)
        self._copied.clear()
        self._copied_at = None
        stall = time.perf_counter() - t0      # the hand-off, timed before the copier can run (and commit)
        threading.Thread(target=self._copy, args=(step, i, lay, buf, t0), name="checkpoint-copier",
                         daemon=True).start()
        self.records.append(SaveRecord(step, lay.size_B, stall, waited, float("nan")))
        return stall

    def _copy(self, step: int, i: int, lay, buf, t0: float) -> None:
        try:
            store.fill(buf, lay, midway=lambda: self._call("snapshot", step))
            self._copied_at = time.perf_counter()
        except BaseException as e:            # handed to the training thread by the next call
            self._error = self._error or e
            self._free.put(i)
        else:
            self._jobs.put((step, i, lay.size_B, t0))
        finally:
            self._copied.set()

    def fence(self) -> float:
        """Return once the newest snapshot is copied, before the state changes; the seconds from the call
        to the copy's end (0 when the pass hid the whole copy) count as that checkpoint's stall. The end is
        timed on the copier's thread, as the time to durable is on the writer's: the moment the training
        thread is scheduled again after it is not the copy's (with a small state the writer can have
        committed before it is)."""
        if self._copied.is_set():
            return 0.0
        t0 = time.perf_counter()
        self._copied.wait()
        end = self._copied_at if self._copied_at is not None else time.perf_counter()   # a failed copy: now
        waited = max(0.0, end - t0)
        self.records[-1] = replace(self.records[-1], stall_s=self.records[-1].stall_s + waited)
        return waited

    def wait(self) -> None:
        self.fence()
        super().wait()

    def abort(self) -> None:
        self._copied.wait()                   # a copy under way reads the caller's arrays: let it end
        super().abort()


def make_engine(kind: str, directory, **kw) -> Engine:
    """``"sync"`` → :class:`SyncEngine`, ``"concurrent"`` → :class:`ConcurrentEngine`,
    ``"pipelined"`` → :class:`PipelinedEngine`."""
    if kind == "sync":
        kw = {k: v for k, v in kw.items() if k in ("keep", "hook", "on_commit")}
        return SyncEngine(directory, **kw)
    if kind == "concurrent":
        return ConcurrentEngine(directory, **kw)
    if kind == "pipelined":
        return PipelinedEngine(directory, **kw)
    raise UnknownNameError("checkpoint engine", kind, ENGINES)
