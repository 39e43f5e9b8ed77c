"""Drive the distributed lab from Python: launch ``torchrun``, kill ranks, resume, reshard, compare.

No PyTorch import here (the workers import it): :func:`run_distributed` starts
``python -m torch.distributed.run`` (torchrun) with a c10d rendezvous on ``127.0.0.1`` at a
free port, reads the JSON lines of :mod:`mlsysim.lab.dist_worker`, SIGKILLs the rank that
paused at a named point (or a random rank at a random time), lets ``--max-restarts`` restart
the group, and compares every loss after the resume with an uninterrupted run's. Every
process it starts is killed by its pid before it returns, whatever happens.
"""
from __future__ import annotations

import json
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MlsysimError
from . import dist_store

KILL_POINTS = ("step", "snapshot", "persist", "shard")   # mid-step, mid-snapshot, mid-persist, before the global commit


class LaunchError(MlsysimError):
    """The job could not be launched or did not finish (the message says why, in one line)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the kernel's pick)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    except OSError as e:
        raise LaunchError(f"no free TCP port on 127.0.0.1 for the rendezvous: {e.strerror or e}") from None


def check_world(nproc: int, batch: int = 8) -> None:
    """The state and the batch must split over ``nproc`` ranks: ``batch % nproc == 0``."""
    if type(nproc) is not int or nproc < 1:
        raise MlsysimError(f"nproc must be a positive integer, got {nproc!r}")
    if batch % nproc:
        raise MlsysimError(f"a world size of {nproc} cannot split the global batch of {batch} windows evenly "
                           f"(use a divisor of {batch})")


def has_torch() -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


@dataclass
class Attempt:
    """What one torchrun launch printed: every JSON event, the pids seen, the exit status."""

    events: list = field(default_factory=list)
    pids: set = field(default_factory=set)
    killed: list = field(default_factory=list)    # (attempt, point or "random", step, rank)
    status: int | None = None
    stderr: str = ""


def launch(directory, nproc: int, steps: int, every: int = 2, engine: str = "sync", mode: str = "fsdp",
           pause: list | None = None, random_kills: int = 0, stop_after: int | None = None,
           checksums: bool = False, keep: int = 2, timeout_s: float = 180.0, seed: int = 0) -> Attempt:
    """One ``torchrun --nproc-per-node nproc`` job, restarted up to once per planned kill.

    ``random_kills``: the first attempts, in each of which a random rank is SIGKILLed at a random
    time, 0 to 0.15 s after the attempt's first loss (unless the attempt finished first).
    ``pause``: then one ``POINT@STEP:RANK`` (or ``None``) per attempt; the paused rank is SIGKILLed.
    """
    if not has_torch():
        raise LaunchError("the distributed lab needs PyTorch, the optional extra: pip install -e '.[torch]'")
    pause = list(pause or [])
    restarts = len(pause) + random_kills
    rng = random.Random(seed)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(nproc),
           "--max-restarts", str(restarts), "--rdzv-backend", "c10d",
           "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-id", f"mlsysim-{os.getpid()}-{time.time_ns()}",
           "--monitor-interval", "0.2",
           "-m", "mlsysim.lab.dist_worker", "--dir", str(directory), "--steps", str(steps), "--every", str(every),
           "--engine", engine, "--mode", mode, "--keep", str(keep), "--seed", str(seed)]
    if pause:
        cmd += ["--pause", ",".join(["-"] * random_kills + [p or "-" for p in pause])]
    if stop_after is not None:
        cmd += ["--stop-after", str(stop_after)]
    if checksums:
        cmd.append("--checksums")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "TORCHELASTIC_ERROR_FILE": "",
           "LOGLEVEL": "ERROR"}
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env, start_new_session=True)
    out = Attempt()
    attempt, kill_at, buf = 0, None, b""
    deadline = time.monotonic() + timeout_s
    try:
        fd = proc.stdout.fileno()
        while True:
            now = time.monotonic()
            if now > deadline:
                raise LaunchError(f"the {nproc}-rank job did not finish within {timeout_s:.0f} s")
            if kill_at is not None and now >= kill_at[0]:
                _, pid, r = kill_at
                kill_at = None
                if not any("done" in e for e in out.events):
                    _kill(pid)
                    out.killed.append((attempt, "random", None, r))
            wait = min(deadline, kill_at[0] if kill_at else deadline) - now
            ready = select.select([fd], [], [], max(0.0, min(wait, 1.0)))[0]
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(ev, dict):
                    continue
                out.events.append(ev)
                if "start" in ev:
                    attempt = ev["start"]
                    out.pids.add(ev["pid"])
                    out.events[-1] = {**ev}
                if "paused" in ev:
                    _kill(ev["pid"])
                    out.killed.append((attempt, ev["paused"], ev["step"], ev["rank"]))
                if ("step" in ev and "loss" in ev and kill_at is None and attempt < random_kills
                        and not any(k[0] == attempt for k in out.killed)):
                    victims = sorted(e["pid"] for e in out.events if e.get("start") == attempt)
                    r = rng.randrange(len(victims))
                    kill_at = (time.monotonic() + rng.uniform(0.0, 0.15), victims[r], r)
        out.status = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for pid in out.pids:
            _kill(pid)
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait(timeout=30)
        proc.stdout.close()
        err.seek(0)
        out.stderr = err.read().decode(errors="replace")
        err.close()
    if out.status != 0:
        tail = [ln for ln in out.stderr.splitlines() if "Error" in ln or "error:" in ln]
        raise LaunchError(f"the {nproc}-rank job failed (exit status {out.status})"
                          + (f": {tail[-1].strip()}" if tail else ""))
    return out


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


# --- reading events ---------------------------------------------------------------------------------
def losses(events) -> dict:
    """{step: loss (float, exact)} of the last time each step was trained."""
    return {e["step"]: float.fromhex(e["loss"]) for e in events if "loss" in e}


def resumes(events) -> list:
    """Where each attempt resumed from (None: from scratch)."""
    return [e["resumed_from"] for e in events if "resumed_from" in e]


# --- the entry point --------------------------------------------------------------------------------
@dataclass(frozen=True)
class DistributedRun:
    """Result of :func:`run_distributed`. Times in seconds, bytes in bytes.

    ``resumed_from``: the global checkpoint each restart resumed from; ``resumed_exactly``:
    every loss after each resume equals the uninterrupted run's bit for bit (None without a
    kill); ``reshard_equal``: after loading at ``reshard_to`` ranks every full (gathered)
    tensor's CRC-32 equals the saved one's; ``reshard_loss_max_abs``: the largest difference
    between the resharded run's losses and the uninterrupted run's at ``world_size`` ranks
    (reduction order only); ``stall_s``, ``durable_s``: medians over the uninterrupted run's
    checkpoints; ``bytes_read_per_rank``: what each rank read in the last resume."""

    engine: str
    mode: str
    world_size: int
    steps: int
    kills: tuple
    resumed_from: tuple
    resumed_exactly: bool | None
    reshard_to: int | None
    reshard_equal: bool | None
    reshard_loss_max_abs: float | None
    stall_s: float
    durable_s: float
    bytes_read_per_rank: tuple
    wall_s: float

    def __str__(self) -> str:
        rows = [(k, getattr(self, k)) for k in self.__dataclass_fields__]
        return "\n".join(f"{k:22s} {v}" for k, v in rows)


def _median(xs) -> float:
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else float("nan")


def run_distributed(nproc: int = 2, engine: str = "concurrent", mode: str = "fsdp", kill=None,
                    reshard_to: int | None = None, directory=None, steps: int = 8, every: int = 2,
                    seed: int = 0) -> DistributedRun:
    """Run the distributed lab: an uninterrupted ``nproc``-rank run; with ``kill`` (``"rank"``: one
    kill at each of :data:`KILL_POINTS` in turn, ``"random"``: one at a random time, or a list of
    ``POINT@STEP:RANK``) the same run killed and restarted by torchrun, compared with it bit for
    bit; with ``reshard_to`` a run stopped halfway and continued at ``reshard_to`` ranks.
    ``directory``: where the runs write (default: a temporary one, removed afterwards)."""
    check_world(nproc)
    if reshard_to is not None:
        check_world(reshard_to)
    t0 = time.perf_counter()
    own_tmp = directory is None
    base = Path(tempfile.mkdtemp(prefix="mlsysim-dist-")) if own_tmp else Path(directory)
    try:
        for sub in ("reference", "killed", "reshard"):
            d = base / sub
            if d.exists() and any(d.iterdir()) and not (d / dist_store.RUN_FILE).exists():
                raise MlsysimError(f"{d} holds files this lab did not write; use another directory")
        kw = {"every": every, "engine": engine, "mode": mode, "seed": seed}
        ref = launch(base / "reference", nproc, steps, **kw)
        reference = losses(ref.events)
        done = [e for e in ref.events if "done" in e][-1]
        durable = [e["durable_s"] for e in ref.events if "commit" in e]
        kills, resumed, exact, nbytes = (), (), None, ()
        if kill is not None:
            if kill == "rank":
                plan = [f"{p}@{3 + i}:{(i + 1) % nproc}" if p == "step" else f"{p}@{2 * (i + 1)}:{(i + 1) % nproc}"
                        for i, p in enumerate(KILL_POINTS)]
                plan, random_kills = plan, 0
            elif kill == "random":
                plan, random_kills = [], 1
            else:
                plan, random_kills = list(kill), 0
            run = launch(base / "killed", nproc, steps, pause=plan, random_kills=random_kills, **kw)
            after = losses(run.events)
            kills = tuple(run.killed)
            resumed = tuple(resumes(run.events)[1:])
            exact = sorted(after) == sorted(reference) and all(after[s] == reference[s] for s in reference)
            nbytes = tuple([e["bytes_read"] for e in run.events if "bytes_read" in e][-1])
        equal, diff = None, None
        if reshard_to is not None:
            half = steps // 2 - (steps // 2) % every
            first = launch(base / "reshard", nproc, steps, stop_after=half, checksums=True, **kw)
            second = launch(base / "reshard", reshard_to, steps, checksums=True, **kw)
            saved = [e for e in first.events if e.get("checksums") == half][-1]["crc32"]
            loaded = [e for e in second.events if "loaded_checksums" in e][-1]
            equal = loaded["loaded_checksums"] == half and loaded["crc32"] == saved
            cont = losses(second.events)
            diff = max(abs(cont[s] - reference[s]) for s in cont)
            nbytes = tuple([e["bytes_read"] for e in second.events if "bytes_read" in e][-1])
        return DistributedRun(engine=engine, mode=mode, world_size=nproc, steps=steps, kills=kills,
                              resumed_from=resumed, resumed_exactly=exact, reshard_to=reshard_to,
                              reshard_equal=equal, reshard_loss_max_abs=diff, stall_s=_median(done["stall_s"]),
                              durable_s=_median(durable), bytes_read_per_rank=nbytes,
                              wall_s=time.perf_counter() - t0)
    finally:
        if own_tmp:
            shutil.rmtree(base, ignore_errors=True)
