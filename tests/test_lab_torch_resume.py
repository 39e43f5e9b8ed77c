"""The PyTorch run killed with SIGKILL, for every engine, at named points and at random
times, then resumed: every loss equals an uninterrupted run's bit for bit, and the run
resumes from the newest checkpoint committed before the kill.

Runs are real processes killed with a real SIGKILL. Each is forked by one ``--serve``
process of :mod:`mlsysim.lab.pytorch.runner` that imported PyTorch once (a run is then
a fraction of a second instead of seconds of imports); one test runs the plain command
line, cold, to show that it behaves the same.
"""
import json
import os
import random
import re
import select
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch")

from mlsysim.lab.pytorch.engines import ALL_ENGINES  # noqa: E402

STEPS, EVERY = 9, 3               # checkpoints at steps 3, 6, 9
ARGS = ["--steps", str(STEPS), "--every", str(EVERY), "--size-mb", "0.1", "--layers", "1"]
RUNNER = [sys.executable, "-m", "mlsysim.lab.pytorch.runner"]
TIMEOUT_S = 60
BLOCKING = ("torch.save", "torch.save+fsync", "dcp", "sync")   # commit inside save()


class Server:
    """One ``mlsysim.lab.pytorch.runner --serve`` process: forks a run per request, relays its lines."""

    def __init__(self):
        self.proc = subprocess.Popen(RUNNER + ["--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.buf = b""
        assert self.next(120) == {"ready": True}

    def next(self, timeout_s):
        """The next JSON line, or None once ``timeout_s`` passed without one."""
        deadline = time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError(f"the --serve process ended (status {self.proc.poll()})")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def run(self, directory, engine, pause=None, kill_after_s=None):
        """Run to the end; SIGKILL the run when it pauses, or ``kill_after_s`` after its first line
        (once it has loaded its checkpoint; unless it is done). Returns (events, exit status: -9
        when killed); ``self.train_s`` is the time from the first line to the last."""
        argv = ["--dir", str(directory), "--engine", engine] + ARGS + (["--pause", pause] if pause else [])
        self.proc.stdin.write((json.dumps(argv) + "\n").encode())
        self.proc.stdin.flush()
        pid = self.next(TIMEOUT_S)["pid"]
        now = time.monotonic()
        deadline, kill_at, first = now + TIMEOUT_S, None, None
        events, status = [], None
        try:
            while status is None:
                now = time.monotonic()
                if now >= deadline:
                    pytest.fail(f"the {engine} run took over {TIMEOUT_S} s: {events}")
                if kill_at is not None and now >= kill_at:
                    kill_at = None
                    if not events or events[-1] != {"done": True}:
                        _kill(pid)
                    continue
                ev = self.next(min(deadline, kill_at or deadline) - now)
                if ev is None:
                    continue
                if "exit" in ev:
                    status = ev["exit"]
                    break
                events.append(ev)
                if first is None:
                    first = time.monotonic()
                    kill_at = None if kill_after_s is None else first + kill_after_s
                self.train_s = time.monotonic() - first
                if "paused" in ev:
                    _kill(pid)
        finally:
            if status is None:          # a failure above: leave no process behind
                _kill(pid)
                end = time.monotonic() + 10
                while (ev := self.next(max(end - time.monotonic(), 0))) is not None and "exit" not in ev:
                    pass
        assert status in (0, -signal.SIGKILL), (status, events)
        assert status != 0 or events[-1] == {"done": True}, events
        return events, status

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=30)


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:   # it had ended already
        pass


@pytest.fixture(scope="module")
def server():
    s = Server()
    try:
        yield s
    finally:
        s.close()


def _losses(events):
    return {e["step"]: e["loss"] for e in events if "loss" in e}


def _commits(events):
    return [e["commit"] for e in events if "commit" in e]


@pytest.fixture(scope="module")
def reference(server, tmp_path_factory):
    events, _ = server.run(tmp_path_factory.mktemp("reference"), "sync")
    assert events[0] == {"resumed_from": None}
    assert _commits(events) == [3, 6, 9]
    losses = _losses(events)
    assert sorted(losses) == list(range(1, STEPS + 1))
    assert float.fromhex(losses[STEPS]) < float.fromhex(losses[1])  # the model learns
    return losses


def _check_resumed(events, before, reference):
    """A run in a directory where runs with the events ``before`` were killed: it resumed from
    a checkpoint no older than any announced commit, and every loss equals the reference's."""
    warned = [e["warning"] for e in events if "warning" in e]
    start = events[len(warned)]["resumed_from"] if len(events) > len(warned) else "not yet"
    if start != "not yet":
        assert (start or 0) >= max(_commits(before), default=0)               # nothing committed is lost
        assert start is None or (start % EVERY == 0 and start <= max(_losses(before), default=0))
        assert sorted(_losses(events)) == list(range((start or 0) + 1, (start or 0) + 1 + len(_losses(events))))
    for run in (events, before):
        assert _losses(run) == {s: reference[s] for s in _losses(run)}        # bit for bit
    return start, warned


def _resume_and_check(server, directory, engine, before, reference):
    """Resume to the end after a kill; check it as :func:`_check_resumed` does."""
    resumed, status = server.run(directory, engine)
    assert status == 0 and max(_losses(resumed), default=STEPS) == STEPS
    start, warned = _check_resumed(resumed, before, reference)
    return start, warned, resumed


POINTS = [("step", 5), ("between", 7), ("snapshot", 6), ("persist", 6), ("commit", 6), ("persist", 3)]


@pytest.mark.parametrize("point,step", POINTS, ids=[f"{p}@{s}" for p, s in POINTS])
@pytest.mark.parametrize("engine", ALL_ENGINES)
def test_kill_at_a_point_and_resume_is_bit_identical(server, reference, tmp_path, engine, point, step):
    killed, status = server.run(tmp_path, engine, pause=f"{point}@{step}")
    # killed while paused there; a pause in a writer thread lets the training thread print a step or two
    # more before the kill lands, so the pause need not be the last event read
    assert status == -signal.SIGKILL and [e for e in killed if "paused" in e] == [{"paused": point, "step": step}]
    commits = _commits(killed)
    newest = max(commits, default=None)
    if point == "commit":
        assert newest == step
    elif engine in BLOCKING:     # the checkpoint before this step is committed by now
        assert newest == ((step - 1) // EVERY * EVERY or None)
    files = sorted(p.name for p in tmp_path.iterdir())
    start, warned, _ = _resume_and_check(server, tmp_path, engine, killed, reference)
    if engine == "dcp-async":    # its .metadata (the commit) is written before the callback announces it
        assert start is None or start >= (newest or 0), files
    else:
        assert start == newest, files
    torn = f"torch-{step:09d}.pt"
    if engine == "torch.save" and point in ("snapshot", "persist"):
        # written straight to its final name: the torn file is there, and the loader skips it
        assert torn in files and len(warned) == 1 and torn in warned[0], (files, warned)
    elif engine in ("concurrent", "pipelined"):
        # a background write still in flight at the kill leaves a newer file without its commit record
        assert all("uncommitted" in w and _warned_step(w) > (newest or 0) for w in warned), (files, warned)
    else:
        assert warned == [], (files, warned)


def _warned_step(warning: str) -> int:
    """The checkpoint step a loader warning names (``.../ckpt-000000006.data: ...`` -> 6)."""
    return int(re.search(r"ckpt-(\d+)\.data", warning).group(1))


@pytest.mark.parametrize("engine", ALL_ENGINES)
def test_kill_at_random_times_and_resume_is_bit_identical(server, reference, tmp_path, engine):
    """Three runs, each killed after a seeded random delay, resumed and maybe killed again after
    another, then resumed to the end."""
    events, _ = server.run(tmp_path / "whole", engine)
    assert _losses(events) == reference and _commits(events)[-1] == STEPS
    duration = server.train_s
    rng = random.Random(f"{engine}-20")
    kills = 0
    for case in range(6):                 # three cases; up to three more while none was killed
        if case >= 3 and kills:
            break
        d, history, status = tmp_path / f"case{case}", [], None
        for attempt in range(2):          # killed, maybe killed again while resuming
            killed, status = server.run(d, engine, kill_after_s=rng.uniform(0.0, 0.9) * duration)
            _check_resumed(killed, history, reference)
            history += killed
            if status == 0:
                if attempt == 0:          # a whole run faster than the first: draw from its pace
                    duration = min(duration, server.train_s)
                break
            kills += 1
        if status != 0:
            _resume_and_check(server, d, engine, history, reference)
    assert kills >= 1      # not vacuous (usually 3 to 5 kills; a busy machine may slow the first run)


def test_the_plain_command_line_is_killed_and_resumed_the_same(reference, tmp_path):
    """Cold processes, no fork server: torch.save torn mid-write, then a resume."""
    cmd = RUNNER + ["--dir", str(tmp_path), "--engine", "torch.save"] + ARGS
    proc = subprocess.Popen(cmd + ["--pause", "persist@6"], stdout=subprocess.PIPE, text=True)
    try:
        killed = []
        for line in proc.stdout:
            killed.append(json.loads(line))
            if "paused" in killed[-1]:
                break
        os.kill(proc.pid, signal.SIGKILL)
        proc.stdout.read()
        assert proc.wait(timeout=TIMEOUT_S) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT_S)
    assert killed[-1] == {"paused": "persist", "step": 6} and _commits(killed) == [3]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=True).stdout
    resumed = [json.loads(line) for line in out.splitlines()]
    assert "torch-000000006.pt" in resumed[0]["warning"] and resumed[1] == {"resumed_from": 3}
    assert {**_losses(killed), **_losses(resumed)} == reference and resumed[-1] == {"done": True}
