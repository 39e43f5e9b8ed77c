"""PyTorch's own ways to checkpoint, behind the interface of :mod:`mlsysim.lab.engines`.

Needs the optional extra (``pip install -e .[torch]``). Four baselines:

* ``torch.save`` — as it is usually called, ``torch.save(state, path)``: serialize into a zip
  file at its final name. Nothing calls ``fsync``: when it returns, the bytes may sit in
  the page cache only, and a power cut loses them; a crash mid-write leaves a torn file
  under the final name. Not durable (``durable_s`` is NaN).
* ``torch.save+fsync`` — the same into ``<name>.tmp``, then ``fsync``, atomic rename and an
  ``fsync`` of the directory: durable once it returns.
* ``dcp`` — :func:`torch.distributed.checkpoint.save`: one ``.distcp`` file per rank written
  and fsynced (by the calling thread: ``FileSystemWriter``'s default ``thread_count=1``), then
  the ``.metadata`` file that makes the checkpoint loadable (its commit).
* ``dcp-async`` — :func:`torch.distributed.checkpoint.async_save`: the state is staged (copied)
  to host memory and written in the background; the stall is the time until it returns,
  the checkpoint is durable when its future completes. One save in flight at a time, as
  PyTorch recommends: a save that finds the previous one unfinished waits for it, and that
  wait is stall too.

Hooks follow :mod:`mlsysim.lab.engines`: ``snapshot`` (once serialization or staging has
begun), ``persist`` (with part of the data written and the checkpoint not yet loadable)
and ``commit`` (once the checkpoint is complete). :func:`load_latest` loads the newest
checkpoint of an engine's files that its own loader accepts, skipping (with a warning that
names it) one that fails to load. Those loaders check no checksum: a flipped byte inside a
tensor comes back as a changed tensor without an error — which the lab's corruption test
records.
"""
from __future__ import annotations

import os
import re
import shutil
import threading
import time
import warnings
from pathlib import Path

import torch

from ...errors import UnknownNameError
from .. import store
from ..engines import ENGINES as OWN_ENGINES, Engine, SaveRecord, make_engine
from .results import ENGINES

# every engine by name, as the comparison runs them: the six of the first recorded runs, and the
# pipelined engine, whose copy hides behind the next forward and backward pass only in its training runs
ALL_ENGINES = ENGINES + ("pipelined",)
BASELINES = ALL_ENGINES[:4]
_FILE = re.compile(r"^torch-(\d{9})\.pt$")
_DIR = re.compile(r"^dcp-(\d{9})$")


# DCP warns that it works "in a single process" when no process group exists: the lab's case
# (a filter of this one message, for every thread: async_save writes in its own)
warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")


class _HookedFile:
    """A file object that calls ``at_first()`` on the first write and ``at_half()`` once
    ``half_B`` bytes have been written (to stop a process inside ``torch.save``)."""

    def __init__(self, f, half_B: int, at_first, at_half):
        self.f, self.half_B, self.n = f, half_B, 0
        self.at_first, self.at_half = at_first, at_half

    def write(self, b) -> int:
        if self.n == 0:
            self.at_first()
        before, self.n = self.n, self.n + len(b)
        out = self.f.write(b)
        if before < self.half_B <= self.n:
            self.at_half()
        return out

    def flush(self):
        self.f.flush()


class TorchSaveEngine(Engine):
    """``torch.save`` straight to the final name (``fsync=False``: as usually called), or into a
    temporary file, fsynced, renamed and committed by a directory fsync (``fsync=True``)."""

    def __init__(self, directory, keep: int = 2, fsync: bool = False, hook=None, on_commit=None):
        super().__init__(directory, keep, hook, on_commit)
        self.fsync = fsync
        self.name = "torch.save+fsync" if fsync else "torch.save"

    def save(self, step: int, state) -> float:
        t0 = time.perf_counter()
        path = self.directory / f"torch-{step:09d}.pt"
        target = path.with_name(path.name + ".tmp") if self.fsync else path
        with open(target, "wb") as f:
            if self._hook is None:
                torch.save(state, f)
            else:
                half = store.layout(state, step).size_B // 2
                torch.save(state, _HookedFile(f, half, lambda: self._call("snapshot", step),
                                              lambda: self._call("persist", step)))
            if self.fsync:
                f.flush()
                os.fsync(f.fileno())
        if self.fsync:
            os.replace(target, path)
            store.fsync_dir(self.directory)
        stall = time.perf_counter() - t0
        self._committed(step, stall)
        self.records.append(SaveRecord(step, path.stat().st_size, stall, 0.0, stall))
        self._prune(step, self._remove_old)
        return stall

    def _committed(self, step: int, after_s: float) -> None:
        with self.lock:
            if self.fsync:
                self._durable[step] = after_s
            if self._on_commit is not None:
                self._on_commit(step)
            self._call("commit", step)

    def _remove_old(self) -> None:
        for old in _steps(self.directory, _FILE)[:-self.keep]:
            (self.directory / f"torch-{old:09d}.pt").unlink(missing_ok=True)


class DcpEngine(Engine):
    """:func:`torch.distributed.checkpoint.save` (``asynchronous=False``) or ``async_save``."""

    def __init__(self, directory, keep: int = 2, asynchronous: bool = False, hook=None, on_commit=None,
                 process_group=None):
        super().__init__(directory, keep, hook, on_commit)
        self.asynchronous = asynchronous
        self.process_group = process_group   # a job's own group for checkpoint collectives (None: the default)
        self.name = "dcp-async" if asynchronous else "dcp"
        self._future = None
        self.writer_cpu_s = {}     # step: the CPU seconds of the thread that wrote this rank's files (its clock)
        for stale in self.directory.glob("dcp-*"):    # torn saves of a crashed run: never loadable
            if stale.is_dir() and not (stale / ".metadata").exists():
                shutil.rmtree(stale, ignore_errors=True)

    def _writer(self, path: Path, step: int):
        from torch.distributed.checkpoint import FileSystemWriter
        engine = self

        class Writer(FileSystemWriter):
            def prepare_local_plan(self, plan):
                engine._call("snapshot", step)
                return super().prepare_local_plan(plan)

            def write_data(self, plan, planner):
                cpu = time.thread_time()
                out = super().write_data(plan, planner)   # the data files, written and fsynced, in this thread
                engine.writer_cpu_s[step] = time.thread_time() - cpu
                engine._call("persist", step)            # .metadata (the commit) is not written yet
                return out

        return Writer(path, sync_files=True)

    def save(self, step: int, state) -> float:
        import torch.distributed.checkpoint as dcp
        t0 = time.perf_counter()
        path = self.directory / f"dcp-{step:09d}"
        waited = 0.0
        if self.asynchronous:
            if self._future is not None:       # one save in flight: wait for the previous one
                self.wait()
                waited = time.perf_counter() - t0
            fut = dcp.async_save(state, storage_writer=self._writer(path, step), process_group=self.process_group)
            stall = time.perf_counter() - t0   # save has returned; a save already done commits (and prunes) below
            announced = threading.Event()      # the callback runs after result() returns to waiters

            def committed(f, step=step, t0=t0):
                try:
                    if f.exception() is None:
                        self._committed(step, t0)
                        self._prune(step, self._remove_old)
                finally:
                    announced.set()

            fut.add_done_callback(committed)
            self._future, self._announced = fut, announced
        else:
            dcp.save(state, storage_writer=self._writer(path, step), process_group=self.process_group)
            self._committed(step, t0)
            stall = time.perf_counter() - t0
        self.records.append(SaveRecord(step, _dcp_size(path), stall, waited, float("nan")))
        if not self.asynchronous:
            self._prune(step, self._remove_old)
        return stall

    def _committed(self, step: int, t0: float) -> None:
        with self.lock:
            self._durable[step] = time.perf_counter() - t0
            if self._on_commit is not None:
                self._on_commit(step)
            self._call("commit", step)

    def _remove_old(self) -> None:
        for old in _steps(self.directory, _DIR)[:-self.keep]:
            shutil.rmtree(self.directory / f"dcp-{old:09d}", ignore_errors=True)

    def summary(self) -> list[SaveRecord]:
        self.wait()
        return [SaveRecord(r.step, _dcp_size(self.directory / f"dcp-{r.step:09d}") or r.size_B, r.stall_s,
                           r.wait_s, self._durable.get(r.step, float("nan")), self._pruned.get(r.step, float("nan")))
                for r in self.records]

    def wait(self) -> None:
        if self._future is not None:
            self._future.result()
            self._announced.wait()

    def abort(self) -> None:
        self._future = None


def _dcp_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir()) if path.is_dir() else 0


def _steps(directory: Path, pattern) -> list[int]:
    out = []
    for p in directory.iterdir():
        m = pattern.match(p.name)
        if m and (pattern is _FILE or (p / ".metadata").exists()):
            out.append(int(m.group(1)))
    return sorted(out)


def make(kind: str, directory, **kw) -> Engine:
    """Any engine by name: the four baselines and this package's ``sync``, ``concurrent`` and
    ``pipelined``."""
    if kind in OWN_ENGINES:
        return make_engine(kind, directory, **kw)
    kw = {k: v for k, v in kw.items() if k in ("keep", "hook", "on_commit")}
    if kind in ("torch.save", "torch.save+fsync"):
        return TorchSaveEngine(directory, fsync=kind.endswith("fsync"), **kw)
    if kind in ("dcp", "dcp-async"):
        return DcpEngine(directory, asynchronous=kind == "dcp-async", **kw)
    raise UnknownNameError("checkpoint engine", kind, ALL_ENGINES)


# --- loading ------------------------------------------------------------------------------------
def newest_path(kind: str, directory) -> Path | None:
    """The newest complete checkpoint an engine left in ``directory`` (not verified)."""
    d = Path(directory)
    if kind in OWN_ENGINES:
        steps = store.committed_steps(d)
        return d / store.data_name(steps[-1]) if steps else None
    steps = _steps(d, _FILE if kind.startswith("torch.save") else _DIR)
    if not steps:
        return None
    return d / (f"torch-{steps[-1]:09d}.pt" if kind.startswith("torch.save") else f"dcp-{steps[-1]:09d}")


def load_latest(kind: str, directory, template=None) -> store.Loaded:
    """Load the newest checkpoint ``kind`` wrote in ``directory`` with that engine's own loader:
    ``torch.load(weights_only=True)``, ``dcp.load`` into ``template`` (a state of the same
    structure whose tensors receive the data, as DCP loads in place), or this package's
    :func:`~mlsysim.lab.store.load_latest`. A checkpoint that fails to load is skipped with a
    ``CheckpointWarning`` naming it."""
    if kind in OWN_ENGINES:
        return store.load_latest(directory)
    d = Path(directory)
    is_file = kind.startswith("torch.save")
    steps = _steps(d, _FILE if is_file else _DIR)
    skipped = []
    t0 = time.perf_counter()
    for step in reversed(steps):
        path = d / (f"torch-{step:09d}.pt" if is_file else f"dcp-{step:09d}")
        try:
            state = torch.load(path, weights_only=True) if is_file else _dcp_load(path, template)
        except Exception as e:  # whatever the loader raises on a damaged file
            skipped.append(f"{path}: {type(e).__name__}: {e}")
            warnings.warn(f"skipping checkpoint: {path}: {type(e).__name__}: {str(e)[:200]}",
                          store.CheckpointWarning, stacklevel=2)
            continue
        size = path.stat().st_size if is_file else _dcp_size(path)
        return store.Loaded(step=step, state=state, path=str(path), size_B=size,
                            read_s=time.perf_counter() - t0, skipped=tuple(skipped))
    raise store.CheckpointError(2, f"no loadable {kind} checkpoint in {d}" + (f" ({'; '.join(skipped)})"
                                                                                if skipped else ""))


def _dcp_load(path: Path, template):
    import torch.distributed.checkpoint as dcp
    if template is None:
        raise ValueError("dcp.load needs a template state to load into")
    dcp.load(template, checkpoint_id=path)
    return template
