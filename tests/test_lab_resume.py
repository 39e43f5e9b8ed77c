"""Kill a real training process with SIGKILL at named points and resume it: the losses must
equal an uninterrupted run's bit for bit, and the run must resume from the newest checkpoint
committed before the kill."""
import json
import os
import signal
import subprocess
import sys

import pytest

STEPS, EVERY = 22, 5          # checkpoints at steps 5, 10, 15, 20
RUNNER = [sys.executable, "-m", "mlsysim.lab.runner", "--steps", str(STEPS), "--every", str(EVERY)]


def _run(directory, engine, pause=None):
    cmd = RUNNER + ["--dir", str(directory), "--engine", engine] + (["--pause", pause] if pause else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    events = []
    if pause is None:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        return [json.loads(line) for line in out.splitlines()]
    for line in proc.stdout:
        events.append(json.loads(line))
        if "paused" in events[-1]:
            break
    else:
        proc.wait()
        pytest.fail(f"the run never reached {pause}: {events}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.stdout.read()
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return events


def _losses(events):
    return {e["step"]: e["loss"] for e in events if "loss" in e}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    events = _run(tmp_path_factory.mktemp("reference"), "sync")
    assert events[0] == {"resumed_from": None} and events[-1] == {"done": True}
    losses = _losses(events)
    assert sorted(losses) == list(range(1, STEPS + 1))
    assert float.fromhex(losses[STEPS]) < float.fromhex(losses[1])  # the model learns
    return losses


POINTS = [("between", 12), ("snapshot", 10), ("persist", 10), ("commit", 10), ("persist", 5)]


@pytest.mark.parametrize("engine", ["sync", "concurrent", "pipelined"])
@pytest.mark.parametrize("point,step", POINTS, ids=[f"{p}@{s}" for p, s in POINTS])
def test_kill_and_resume_is_bit_identical(tmp_path, reference, engine, point, step):
    killed = _run(tmp_path, engine, pause=f"{point}@{step}")
    assert killed[-1] == {"paused": point, "step": step}
    commits = [e["commit"] for e in killed if "commit" in e]
    newest = max(commits) if commits else None
    if point == "commit":
        assert newest == step
    elif point in ("snapshot", "persist"):
        assert step not in commits
    resumed = _run(tmp_path, engine)
    assert resumed[0] == {"resumed_from": newest}
    assert resumed[-1] == {"done": True}
    after = _losses(resumed)
    assert sorted(after) == list(range((newest or 0) + 1, STEPS + 1))
    assert after == {s: reference[s] for s in after}                      # bit for bit
    assert _losses(killed) == {s: reference[s] for s in _losses(killed)}


_PAUSER = """
import sys, threading, time
from mlsysim.lab.runner import stop_here

def pause():
    print("paused", flush=True)
    stop_here()
    print("ran on after the stop", flush=True)

threading.Thread(target=pause).start()
end = time.monotonic() + 20
while time.monotonic() < end:   # the main thread keeps running, where a signal to the process may land
    pass
"""


def test_a_pause_from_a_writer_thread_stops_that_thread_before_it_runs_on():
    """The pause is taken in a writer thread while the main thread runs. Stopping the process
    with ``os.kill(getpid(), SIGSTOP)`` let the pausing thread print again in 6 of 20 such runs
    (the main thread took the signal); ``stop_here`` must stop it at once, every time."""
    import select
    for _ in range(10):
        proc = subprocess.Popen([sys.executable, "-c", _PAUSER], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline() == "paused\n"
            ready, _, _ = select.select([proc.stdout], [], [], 0.2)
            assert not ready, proc.stdout.readline()
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
