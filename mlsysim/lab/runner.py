"""A training run that can be killed and resumed: ``python -m mlsysim.lab.runner``.

It resumes from the newest valid checkpoint in ``--dir`` (if any), trains to
``--steps``, checkpoints every ``--every`` steps, and prints one JSON object per line:
``{"resumed_from": step or null}``, ``{"step": s, "loss": "<float.hex>"}`` for each step,
``{"commit": s}`` once checkpoint ``s`` is durable, ``{"paused": point, "step": s}``
and finally ``{"done": true}``.

``--pause POINT@STEP`` stops the whole process (SIGSTOP) at a named point so that a
test can kill it exactly there: ``between@S`` after training step S, and
``snapshot@S``, ``persist@S``, ``commit@S`` inside checkpoint S (see
:mod:`mlsysim.lab.engines`). The pause and every commit announcement happen under
the engine's lock, so the lines printed before a kill list exactly the checkpoints
that were committed.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from dataclasses import dataclass

from . import store
from .engines import ENGINES, make_engine
from .train import LabConfig, Trainer


def _say(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def stop_here() -> None:
    """SIGSTOP the whole process, this thread first: a signal sent to the process may be taken
    by another thread, and this one would run on (out of the lock, into a commit) until that
    thread is scheduled. Sent to this thread, the stop begins as the call returns, with the
    interpreter lock held, so no Python code of any thread runs after it."""
    signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m mlsysim.lab.runner")
    p.add_argument("--dir", required=True)
    p.add_argument("--engine", choices=ENGINES, default="sync")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--every", type=int, default=5)
    p.add_argument("--width", type=int, default=48)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--keep", type=int, default=2)
    p.add_argument("--buffers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pause", default="", help="POINT@STEP: stop the process there (for kill tests)")
    a = p.parse_args(argv)
    point, _, at = a.pause.partition("@")
    at = int(at) if at else -1

    def hook(name: str, step: int) -> None:
        if name == point and step == at:
            _say(paused=name, step=step)
            stop_here()

    extra = {"buffers": a.buffers} if a.engine == "concurrent" else {}
    engine = make_engine(a.engine, a.dir, keep=a.keep, hook=hook, on_commit=lambda s: _say(commit=s), **extra)
    if store.committed_steps(a.dir):
        loaded = store.load_latest(a.dir)
        trainer = Trainer.from_state(loaded.state)
        _say(resumed_from=loaded.step)
    else:
        trainer = Trainer(LabConfig(width=a.width, depth=a.depth, steps=a.steps, seed=a.seed))
        _say(resumed_from=None)
    train(trainer, engine, a.steps, a.every, hook)
    return 0


def train(trainer, engine, steps: int, every: int, hook) -> None:
    """Train to ``steps``, checkpoint every ``every`` with ``engine``, announce every step, call
    ``hook("between", s)`` after each under the engine's lock, and announce the end."""
    while trainer.step_count < steps:
        loss = trainer.step(before_update=getattr(engine, "fence", None))
        s = trainer.step_count
        _say(step=s, loss=loss.hex())
        if s % every == 0:
            engine.save(s, trainer.state())
        with engine.lock:
            hook("between", s)
    engine.close()
    _say(done=True)


if __name__ == "__main__":
    raise SystemExit(main())


# --- driving it from Python: run, kill at a point, resume -------------------------------------
@dataclass(frozen=True)
class KillResume:
    """Result of :func:`kill_and_resume`: what was committed before the SIGKILL, where the new
    process resumed, and whether every loss equals the uninterrupted run's bit for bit."""

    engine: str
    killed_at: str
    committed_before_kill: tuple
    resumed_from: int | None
    steps_compared: int
    identical: bool


def run_process(directory, engine: str = "sync", steps: int = 30, every: int = 5, pause: str = "",
                width: int = 48) -> list[dict]:
    """Run the runner in a child process; with ``pause``, SIGKILL it there. Returns its events."""
    import subprocess
    cmd = [sys.executable, "-m", "mlsysim.lab.runner", "--dir", str(directory), "--engine", engine,
           "--steps", str(steps), "--every", str(every), "--width", str(width)] + (["--pause", pause] if pause else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    events = []
    for line in proc.stdout:
        events.append(json.loads(line))
        if pause and "paused" in events[-1]:
            os.kill(proc.pid, signal.SIGKILL)
            break
    proc.stdout.read()
    proc.wait(timeout=120)
    if pause and "paused" not in events[-1]:
        raise RuntimeError(f"the run ended without reaching {pause!r}")
    if not pause and proc.returncode != 0:
        raise RuntimeError(f"the run failed with exit status {proc.returncode}")
    return events


def losses(events) -> dict:
    """{step: loss} from a run's events (losses are exact: float.hex)."""
    return {e["step"]: float.fromhex(e["loss"]) for e in events if "loss" in e}


def kill_and_resume(directory, engine: str = "concurrent", pause: str = "persist@10", steps: int = 30,
                    every: int = 5) -> KillResume:
    """An uninterrupted run, then a run SIGKILLed at ``pause`` and restarted, in ``directory``."""
    from pathlib import Path
    base = Path(directory)
    reference = losses(run_process(base / "reference", engine, steps, every))
    killed = run_process(base / "killed", engine, steps, every, pause=pause)
    resumed = run_process(base / "killed", engine, steps, every)
    after = {**losses(killed), **losses(resumed)}
    return KillResume(engine=engine, killed_at=pause,
                      committed_before_kill=tuple(e["commit"] for e in killed if "commit" in e),
                      resumed_from=resumed[0]["resumed_from"], steps_compared=len(losses(resumed)),
                      identical=sorted(after) == sorted(reference) and all(
                          after[s].hex() == reference[s].hex() for s in reference))
