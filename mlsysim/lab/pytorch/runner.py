"""The PyTorch run, killable and resumable: ``python -m mlsysim.lab.pytorch.runner``.

The protocol of :mod:`mlsysim.lab.runner` for the transformer of
:mod:`mlsysim.lab.pytorch.train` and every engine of :mod:`mlsysim.lab.pytorch.engines`
(``torch.save``, ``torch.save+fsync``, ``dcp``, ``dcp-async``, ``sync``, ``concurrent``).
It resumes from the newest checkpoint of ``--engine`` in ``--dir`` that the engine's own
loader accepts (:func:`~mlsysim.lab.pytorch.engines.load_latest`), trains to ``--steps``,
checkpoints every ``--every`` steps and prints one JSON object per line:
``{"warning": message}`` for each checkpoint the loader skipped, ``{"resumed_from": step
or null}`` (null also when the only files are ones ``torch.save`` left torn),
``{"step": s, "loss": "<float.hex>"}``, ``{"commit": s}``, ``{"paused": point, "step": s}``
and ``{"done": true}``.

The run's shape is the small default :class:`~mlsysim.lab.pytorch.train.TorchConfig`, or
``--size-mb X`` (weights + AdamW moments, :meth:`~mlsysim.lab.pytorch.train.TorchConfig.for_size`
with ``--layers``). A resumed run takes the shape from its command line, as a PyTorch
script does: DCP loads into a state of that shape, and a checkpoint of another shape is
refused with an error.

``--pause POINT@STEP`` stops the process (SIGSTOP) there, so that a test can SIGKILL it
exactly at that point: ``step@S`` inside step S, after the backward pass and before the
optimizer's update; ``between@S`` after step S and its checkpoint call; ``snapshot@S``,
``persist@S`` and ``commit@S`` inside checkpoint S (see :mod:`mlsysim.lab.pytorch.engines`).
As in :mod:`mlsysim.lab.runner`, pauses and commit announcements happen under the engine's
lock, so the lines printed before a kill name every checkpoint that was committed, except
with ``dcp-async``: its commit (the ``.metadata`` file) is written by PyTorch's thread before
the engine announces it, and a run killed in between resumes from a checkpoint newer than
the last one printed.

Each process spends seconds importing PyTorch. ``--serve`` starts one process that imports
everything once and then runs each command line it reads on stdin in a forked child (a
fresh process that has never trained), relaying the child's lines after ``{"pid": p}`` and
ending with ``{"exit": status}`` (``-9`` after a SIGKILL). The kill tests use it.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as d:                 # doctest: +ELLIPSIS
...     code = main(["--dir", d, "--engine", "sync", "--steps", "2", "--every", "1",
...                  "--size-mb", "0.1", "--layers", "1"])
{"resumed_from": null}
{"step": 1, "loss": "0x1..."}
{"commit": 1}
{"step": 2, "loss": "0x1..."}
{"commit": 2}
{"done": true}
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
import warnings

from . import engines
from ..runner import _say, stop_here, train
from ..store import CheckpointError, CheckpointWarning
from .train import TorchConfig, TorchTrainer

POINTS = ("step", "between", "snapshot", "persist", "commit")


def config(a) -> TorchConfig:
    """The run's shape from the parsed command line."""
    kw = {"steps": a.steps, "warmup": min(TorchConfig.warmup, a.steps), "seed": a.seed}
    if a.size_mb is None:
        return TorchConfig(**kw)
    return TorchConfig.for_size(a.size_mb * 1e6, layers=a.layers, **kw)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m mlsysim.lab.pytorch.runner")
    p.add_argument("--dir", required=True)
    p.add_argument("--engine", choices=engines.ALL_ENGINES, default="sync")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--every", type=int, default=5)
    p.add_argument("--size-mb", type=float, default=None, help="state size (weights + AdamW m and v), MB")
    p.add_argument("--layers", type=int, default=4, help="layers of the --size-mb model")
    p.add_argument("--keep", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pause", default="", help="POINT@STEP, POINT one of " + ", ".join(POINTS))
    a = p.parse_args(argv)
    point, _, at = a.pause.partition("@")
    if a.pause and (point not in POINTS or not at.isdigit()):
        p.error(f"--pause must be POINT@STEP with POINT one of {', '.join(POINTS)}, got {a.pause!r}")
    at = int(at) if at else -1

    def hook(name: str, step: int) -> None:
        if name == point and step == at:
            _say(paused=name, step=step)
            stop_here()

    engine = engines.make(a.engine, a.dir, keep=a.keep, hook=hook, on_commit=lambda s: _say(commit=s))
    trainer, loaded = TorchTrainer(config(a)), None
    if engines.newest_path(a.engine, a.dir) is not None:
        template = trainer.state() if a.engine.startswith("dcp") else None   # DCP loads in place
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CheckpointWarning)
            try:
                loaded = engines.load_latest(a.engine, a.dir, template=template)
            except CheckpointError:
                if a.engine != "torch.save":   # complete checkpoints that fail to load: say so
                    raise
                trainer = TorchTrainer(trainer.cfg)   # only torn files (a torch.save cut short)
        for w in caught:
            if issubclass(w.category, CheckpointWarning):
                _say(warning=str(w.message))
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    if loaded is not None:
        trainer.load_state(loaded.state)
    _say(resumed_from=loaded.step if loaded else None)

    def mid_step(name: str, step: int) -> None:
        with engine.lock:
            hook(name, step)

    trainer.hook = mid_step
    train(trainer, engine, a.steps, a.every, hook)
    return 0


def serve() -> int:
    """``--serve``: import once, then fork one run per command line (a JSON list) read on stdin."""
    import torch._inductor.config  # noqa: F401  (use_deterministic_algorithms imports it on first use)
    import torch.distributed.checkpoint  # noqa: F401  (imported by the engines and get_state_dict on first use)
    import torch.distributed.checkpoint.state_dict  # noqa: F401
    _say(ready=True)
    for line in sys.stdin:
        argv = json.loads(line)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:                        # the run: its stdout is the pipe
            code = 1
            try:
                os.close(r)
                os.dup2(w, 1)
                os.close(w)
                code = main(argv)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 2
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                os._exit(code)
        os.close(w)
        _say(pid=pid)
        with os.fdopen(r) as out:
            for event in out:
                sys.stdout.write(event)
                sys.stdout.flush()
        _, status = os.waitpid(pid, 0)
        _say(exit=os.waitstatus_to_exitcode(status))
    return 0


if __name__ == "__main__":
    raise SystemExit(serve() if sys.argv[1:] == ["--serve"] else main())
