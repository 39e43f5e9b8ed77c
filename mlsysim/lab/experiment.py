"""The experiment: train, checkpoint every few steps with one engine, time everything,
load the newest checkpoint back, check that it resumes exactly, and set the model beside it.

Measured per run: the training stall of each checkpoint (the time ``save`` held the
training loop, back-pressure included), the time until each was durable, the
end-to-end slowdown against the same steps without checkpoints, the save bandwidth
(bytes / time to durable) and the load time and bandwidth (file pages dropped from
the page cache first, so the read comes from the device).
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field

from ..measure import drop_page_cache
from ..tables import Record
from ..units import fmt
from . import store
from .engines import make_engine
from .predict import Machine, Prediction, measure_machine, predict
from .train import LabConfig, Trainer


WARMUP_STEPS = 3  # untimed: the first steps fault in pages and grow the allocator's pools


def pipelined_stall_s(p: Prediction, step_s: float) -> float:
    """First-order stall of the pipelined engine: the copy hides behind the next step's forward
    and backward pass (at most ``step_s``, the whole step), the back-pressure of a writer that
    cannot keep up does not: max(0, d − t_step, back-pressure), where the back-pressure is the
    concurrent stall when it exceeds the copy d. On two cores the copy also slows the pass it
    overlaps, which this leaves out.

    >>> from mlsysim.lab.predict import machine_from, predict
    >>> p = predict(1.2e9, machine_from(copy_Bps=20e9, write_Bps=1.5e9, read_Bps=3e9), interval_s=10.0)
    >>> round(pipelined_stall_s(p, 0.05), 3), pipelined_stall_s(p, 0.5)    # copy 0.06 s
    (0.01, 0.0)
    """
    back_pressure = p.concurrent_stall_s if p.concurrent_stall_s > p.copy_s else 0.0
    return max(0.0, p.copy_s - step_s, back_pressure)


def step_time_s(cfg: LabConfig, steps: int = 5) -> float:
    """Seconds per training step without checkpoints: the median of ``steps`` timed steps after
    the warm-up steps (the median, because a shared machine adds slow outliers)."""
    t = Trainer(cfg)
    for _ in range(WARMUP_STEPS):
        t.step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        t.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


@dataclass(frozen=True)
class LabRun(Record):
    """Result of :func:`run`: what one engine cost on this machine, and what the model predicted."""

    engine: str
    size_B: int                 # bytes of one checkpoint file
    steps: int
    every: int
    checkpoints: int
    step_s: float               # one training step without checkpoints (median)
    stall_s: float              # mean training stall per checkpoint
    max_stall_s: float
    wait_s: float               # of which back-pressure (concurrent: waiting for a free buffer)
    durable_s: float            # mean time from save to commit
    train_s: float              # the checkpointed run, end to end (until the last checkpoint is durable)
    slowdown: float             # train_s / (steps x step_s)
    save_Bps: float             # size / durable time
    load_s: float
    load_Bps: float
    resumed_exactly: bool | None
    predicted: Prediction
    stalls_s: tuple = field(default=(), repr=False)

    @property
    def overhead_s(self) -> float:
        """What training paid per checkpoint: (the checkpointed run's wall time, until its last
        checkpoint is durable, − steps × the step time without checkpoints) / checkpoints. A stall
        is only part of it: a background copy or write that slows the steps beside it counts here."""
        return (self.train_s - self.steps * self.step_s) / self.checkpoints

    @property
    def predicted_stall_s(self) -> float:
        """The model's stall for this engine; the pipelined one's is :func:`pipelined_stall_s`."""
        if self.engine == "pipelined":
            return pipelined_stall_s(self.predicted, self.step_s)
        return self.predicted.sync_stall_s if self.engine == "sync" else self.predicted.concurrent_stall_s

    def rows(self) -> list[tuple[str, str]]:
        p = self.predicted
        return [("engine", self.engine), ("checkpoint size", fmt(self.size_B, "B")),
                ("steps / every", f"{self.steps} / {self.every} ({self.checkpoints} checkpoints)"),
                ("step without checkpoints", fmt(self.step_s, "s")),
                ("stall per checkpoint", f"{fmt(self.stall_s, 's')} (model {fmt(self.predicted_stall_s, 's')})"),
                ("of which back-pressure", fmt(self.wait_s, "s")),
                ("durable after", f"{fmt(self.durable_s, 's')} (model {fmt(p.copy_s + p.write_s, 's')})"),
                ("save bandwidth", fmt(self.save_Bps, "B/s")),
                ("load", f"{fmt(self.load_s, 's')} (model {fmt(p.restore_s, 's')})"),
                ("load bandwidth", fmt(self.load_Bps, "B/s")),
                ("end-to-end slowdown", f"{self.slowdown:.3f}x"),
                ("overhead per checkpoint", fmt(self.overhead_s, "s")),
                ("resumed bit-identical", str(self.resumed_exactly))]

    def to_dict(self) -> dict:
        """Plain SI values, measured and predicted side by side (schema ``mlsysim.lab.checkpoint/1``)."""
        p = self.predicted
        return {"schema": "mlsysim.lab.checkpoint/1", "engine": self.engine, "size_B": self.size_B,
                "steps": self.steps, "every": self.every, "checkpoints": self.checkpoints, "step_s": self.step_s,
                "stall_s": self.stall_s, "max_stall_s": self.max_stall_s, "wait_s": self.wait_s,
                "durable_s": self.durable_s, "train_s": self.train_s, "slowdown": self.slowdown,
                "overhead_s": self.overhead_s, "save_Bps": self.save_Bps, "load_s": self.load_s,
                "load_Bps": self.load_Bps,
                "resumed_exactly": self.resumed_exactly, "stalls_s": list(self.stalls_s),
                "predicted": {"stall_s": self.predicted_stall_s, "copy_s": p.copy_s, "write_s": p.write_s,
                              "durable_s": p.copy_s + p.write_s, "restore_s": p.restore_s,
                              "sync_stall_s": p.sync_stall_s, "concurrent_stall_s": p.concurrent_stall_s,
                              "interval_s": p.interval_s}}


def run(engine: str = "concurrent", size_B: float = 64e6, steps: int = 20, every: int = 5, directory=None,
        cfg: LabConfig | None = None, machine: Machine | None = None, step_s: float | None = None,
        buffers: int = 2, keep: int = 2, verify: bool = True, progress=None) -> LabRun:
    """Train ``steps`` steps checkpointing every ``every`` with ``engine`` into ``directory``.

    ``cfg`` (default: :meth:`~mlsysim.lab.train.LabConfig.for_size` of ``size_B``) sets the model; ``machine``
    and ``step_s`` reuse earlier measurements; ``verify`` resumes from the newest
    checkpoint and checks the following losses bit for bit; ``progress(done, total)``
    is called after each step.
    """
    from ..errors import MlsysimError
    for k, v in (("steps", steps), ("every", every)):
        if type(v) is not int or v < 1:
            raise MlsysimError(f"{k} must be a positive integer, got {v!r}")
    if every > steps:
        raise MlsysimError(f"every = {every} exceeds steps = {steps}: no checkpoint would be taken")
    cfg = cfg or LabConfig.for_size(size_B, steps=max(steps, 20), warmup=min(10, steps))
    with tempfile.TemporaryDirectory(prefix="mlsysim-lab-") as tmp:
        directory = store.check_directory(directory or tmp)
        if store.committed_steps(directory):
            raise MlsysimError(f"{directory} already holds checkpoints of another run; give an empty directory "
                               f"(the experiment never deletes checkpoints it did not write)")
        # the disk measured with a file of the checkpoint's size (at least 32 MB, against the noise of
        # small writes; at most 1 GB, against the time it takes)
        machine = machine or measure_machine(directory, size_B=min(max(cfg.state_B, 32e6), 1e9))
        step_s = step_s if step_s is not None else step_time_s(cfg, steps)
        return _run(engine, cfg, steps, every, directory, machine, step_s, buffers, keep, verify, progress)


def _run(engine, cfg, steps, every, directory, machine, step_s, buffers, keep, verify, progress) -> LabRun:
    buffered = engine in ("concurrent", "pipelined")
    kw = {"buffers": buffers} if buffered else {}
    trainer = Trainer(cfg)
    losses = {}
    eng = make_engine(engine, directory, keep=keep, **kw)
    if buffered:
        eng.prepare(store.layout(trainer.state(), 0).size_B)
    fence = getattr(eng, "fence", None)
    for _ in range(WARMUP_STEPS):        # outside the timing
        losses[trainer.step_count + 1] = trainer.step()
    t0 = time.perf_counter()
    try:
        for i in range(steps):
            losses[trainer.step_count + 1] = trainer.step(before_update=fence)
            if (i + 1) % every == 0:
                eng.save(trainer.step_count, trainer.state())
            if progress is not None:
                progress(i + 1, steps)
        eng.wait()
    except BaseException:
        eng.abort()
        raise
    train_s = time.perf_counter() - t0
    records = eng.summary()
    eng.close()
    tail = {trainer.step_count + 1: trainer.step()} if verify else {}
    newest = records[-1]
    drop_page_cache(os.path.join(str(eng.directory), store.data_name(newest.step)))
    loaded = store.load_latest(eng.directory)
    resumed = None
    if verify:
        back = Trainer.from_state(loaded.state)
        expected = {s: l for s, l in {**losses, **tail}.items() if s > back.step_count}
        resumed = all(back.step() == expected[s] for s in sorted(expected))
    stalls = tuple(r.stall_s for r in records)
    durable = statistics.mean(r.durable_s for r in records)
    pred = predict(cfg, machine, every * step_s, buffers=buffers)
    return LabRun(engine=engine, size_B=newest.size_B, steps=steps, every=every, checkpoints=len(records),
                  step_s=step_s, stall_s=statistics.mean(stalls), max_stall_s=max(stalls),
                  wait_s=statistics.mean(r.wait_s for r in records), durable_s=durable, train_s=train_s,
                  slowdown=train_s / (steps * step_s), save_Bps=newest.size_B / durable, load_s=loaded.read_s,
                  load_Bps=loaded.size_B / loaded.read_s, resumed_exactly=resumed, predicted=pred, stalls_s=stalls)


# --- the stored full-size benchmark -------------------------------------------------------------
def pair_rows(runs: list[dict]) -> list[dict]:
    """One row per (size, interval): the sync and concurrent runs of ``runs`` (dicts of
    :meth:`LabRun.to_dict`, in the benchmark's order) side by side, measured and predicted."""
    rows = []
    for s, c in zip(runs[::2], runs[1::2]):
        if (s["engine"], c["engine"]) != ("sync", "concurrent") or (s["size_B"], s["every"]) != (c["size_B"], c["every"]):
            raise ValueError("runs must alternate sync and concurrent runs of the same size and interval")
        rows.append({"MB": round(s["size_B"] / 1e6), "every": s["every"],
                     "interval s": round(s["step_s"] * s["every"], 2),
                     "sync stall s": round(s["stall_s"], 3), "sync model s": round(s["predicted"]["stall_s"], 3),
                     "conc. stall s": round(c["stall_s"], 3), "conc. model s": round(c["predicted"]["stall_s"], 3),
                     "conc/sync": round(c["stall_s"] / s["stall_s"], 2),
                     "sync slowdown": round(s["slowdown"], 2), "conc. slowdown": round(c["slowdown"], 2),
                     "sync save GB/s": round(s["save_Bps"] / 1e9, 2), "conc. save GB/s": round(c["save_Bps"] / 1e9, 2),
                     "load GB/s": round(s["load_Bps"] / 1e9, 2),
                     "model/measured sync stall": round(s["predicted"]["stall_s"] / s["stall_s"], 2)})
    return rows


def recorded_benchmark() -> dict:
    """The full-size run of ``benchmarks/bench_lab_checkpoint.py`` stored with the package
    (``lab/data/benchmark.json``): its date, machine, command and every run's numbers."""
    import json
    from importlib.resources import files
    return json.loads(files(__package__).joinpath("data/benchmark.json").read_text(encoding="utf-8"))
