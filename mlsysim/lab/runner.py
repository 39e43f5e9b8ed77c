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

from . import store
from .engines import ENGINES, make_engine
from .train import LabConfig, Trainer


def _say(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


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
            os.kill(os.getpid(), signal.SIGSTOP)

    extra = {"buffers": a.buffers} if a.engine == "concurrent" else {}
    engine = make_engine(a.engine, a.dir, keep=a.keep, hook=hook, on_commit=lambda s: _say(commit=s), **extra)
    if store.committed_steps(a.dir):
        loaded = store.load_latest(a.dir)
        trainer = Trainer.from_state(loaded.state)
        _say(resumed_from=loaded.step)
    else:
        trainer = Trainer(LabConfig(width=a.width, depth=a.depth, steps=a.steps, seed=a.seed))
        _say(resumed_from=None)
    while trainer.step_count < a.steps:
        loss = trainer.step()
        s = trainer.step_count
        _say(step=s, loss=loss.hex())
        if s % a.every == 0:
            engine.save(s, trainer.state())
        with engine.lock:
            hook("between", s)
    engine.close()
    _say(done=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
