"""The pipelined engine: ``save`` returns before the copy is done, the copy runs beside the next
forward and backward pass, and ``fence`` (before the optimizer step) counts what it waits as stall.
Real threads and files; the kill-and-resume tests in test_lab_resume.py run it under SIGKILL."""
import time

import numpy as np

from mlsysim.lab import store
from mlsysim.lab.engines import PipelinedEngine, make_engine
from mlsysim.lab.train import LabConfig, Trainer


def test_save_returns_before_the_copy_and_the_fence_waits_for_it(tmp_path):
    slow = lambda point, step: time.sleep(1.0) if point == "snapshot" else None   # a copy that takes 1 s
    e = PipelinedEngine(tmp_path, hook=slow)
    state = {"w": np.arange(1000, dtype=np.float32), "b": np.ones(10, dtype=np.float32), "step": 1}
    returned = e.save(1, state)
    waited = e.fence()
    e.close()
    assert returned < 0.5 and returned + waited >= 0.99 and e.records[0].stall_s >= returned + waited - 1e-6
    assert e.fence() == 0.0                              # nothing in flight: no wait


def test_training_between_save_and_fence_leaves_the_snapshot_intact(tmp_path):
    cfg = LabConfig.for_size(4e6)
    t = Trainer(cfg)
    t.step()
    expected = {k: v.copy() for k, v in t.params.items()}
    with make_engine("pipelined", tmp_path) as e:
        e.save(t.step_count, t.state())
        t.step(before_update=e.fence)                    # forward and backward beside the copy, then the fence
    got = store.load_latest(tmp_path).state
    assert all(np.array_equal(got["params"][k], v) for k, v in expected.items())
    assert not all(np.array_equal(t.params[k], v) for k, v in expected.items())   # training went on


def test_the_stall_ends_with_the_copy_and_never_exceeds_the_time_to_durable(tmp_path):
    slow = lambda point, step: time.sleep(0.5) if point == "snapshot" else None
    e = PipelinedEngine(tmp_path / "slow", hook=slow)
    e.save(1, {"w": np.ones(1000, dtype=np.float32), "step": 1})
    time.sleep(0.2)                                      # a forward and backward pass hides part of the copy
    waited = e.fence()
    e.close()
    assert 0 <= waited <= 0.45 and e.records[0].stall_s < 0.5          # not the whole copy: the pass hid part
    assert e.summary()[0].durable_s >= e.records[0].stall_s
    fast = PipelinedEngine(tmp_path / "fast", keep=1)    # a tiny state: the writer can commit before the
    for step in range(1, 41):                            # training thread is scheduled again
        fast.save(step, {"w": np.full(256, step, dtype=np.float32), "step": step})
        fast.fence()
    records = fast.summary()
    fast.close()
    assert all(0 < r.stall_s <= r.durable_s for r in records), [(r.stall_s, r.durable_s) for r in records]
