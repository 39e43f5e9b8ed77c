"""The CPU accounting of the distributed lab's steps: each thread's and the machine's CPU time, read for
real in this process (a thread that burns CPU and ends, memory touched for the first time), and the
growth of every count in a checkpoint's cycle over its baseline."""
import os
import threading
import time

import numpy as np
import pytest

from mlsysim.errors import MlsysimError
from mlsysim.lab.distributed import accounting


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        x += 1


def test_a_thread_that_ended_counts_as_the_process_less_its_living_threads():
    a = accounting.snapshot()
    th = threading.Thread(target=_burn, args=(0.3,))
    th.start()
    th.join()
    gone = f"/proc/self/task/{th.native_id}"
    for _ in range(500):                    # join returns before the kernel has reaped the thread
        if not os.path.exists(gone):
            break
        time.sleep(0.01)
    d = accounting._between(a, accounting.snapshot())
    assert not os.path.exists(gone) and d["ended_s"] >= 0.25 and d["main_user_s"] + d["main_system_s"] < 0.1


def test_the_training_thread_its_work_and_its_page_faults():
    a = accounting.snapshot()
    _burn(0.2)
    x = np.empty(64 * 2 ** 20, dtype=np.uint8)
    x[::4096] = 1                           # 16,384 pages of 4 KB touched for the first time (fewer if huge)
    d = accounting._between(a, accounting.snapshot())
    assert d["main_user_s"] + d["main_system_s"] >= 0.15 and d["main_faults"] >= 32
    assert d["machine_busy_s"] >= 0.15 and d["proc_s"] >= 0.15
    assert set(a["threads"]) <= {"main", "gloo", "background"} and len(a["machine"]) == 8


def _events(extra_cpu: float, extra_wall: float) -> list:
    """Steps of 1 s and 1 CPU-s; a checkpoint at 8 and 12 (every 4, plain 4), whose next two steps take
    ``extra_wall`` s and the background ``extra_cpu`` s more."""
    ev, t, cpu, bg = [], 0.0, 0.0, 0.0
    for s in range(1, 17):
        slow = s in (9, 13)
        t += 1.0 + (extra_wall if slow else 0.0)
        cpu += 1.0
        bg += extra_cpu if slow else 0.0
        ev.append({"step": s, "t": t, "acct": {"proc": [cpu + bg, 0.0],
                                              "threads": {"main": [cpu, 0.0, 10 * s], "background": [bg, 0.0, 0]},
                                              "machine": [2 * t, 0, 0, 0, 0, 0, 0, 0]}})
    return ev


def test_each_cycle_less_its_baseline():
    c = accounting.cycles(_events(0.6, 0.3), every=4, plain=4)
    assert [round(x, 6) for x in c["wall_s"]] == [0.3, 0.3]
    assert [round(x, 6) for x in c["background_user_s"]] == [0.6, 0.6] and [round(x, 9) for x in c["ended_s"]] == [0, 0]
    assert [round(x, 6) for x in c["machine_busy_s"]] == [0.6, 0.6]     # 2 cores kept busy 0.3 s longer
    m = accounting.means(c)
    assert round(m["wall_s"], 6) == 0.3 and m["main_faults"] == 0


@pytest.mark.parametrize("call, match", [
    (lambda: accounting.cycles(_events(0, 0), every=2, plain=4), "every must be >= 4"),
    (lambda: accounting.cycles(_events(0, 0), every=4, plain=1), "plain an integer >= 2"),
    (lambda: accounting.cycles(_events(0, 0)[:10], every=4, plain=4), "no checkpoint has a full interval"),
    (lambda: accounting.cycles(_events(0, 0), every=0, plain=4), "every"),
])
def test_bad_input_is_refused_by_name(call, match):
    with pytest.raises(MlsysimError, match=match):
        call()


def test_rank_0_s_step_ends_are_kept_from_the_first_and_none_where_a_step_is_missing():
    ev = [{"step": s, "t": 10.0 + 0.5 * s} for s in range(1, 13)]
    o = accounting.overhead_per_checkpoint(ev, every=4, plain=4)
    assert o["step_ends_s"] == [0.5 * k for k in range(12)]
    assert accounting.overhead_per_checkpoint(ev[:6] + ev[7:], every=4, plain=4)["step_ends_s"] is None


def test_a_cycle_of_half_the_interval_gives_the_recorded_overheads_and_a_shorter_one_its_own():
    rng = np.random.default_rng(3)
    dt = 1.0 + 0.05 * rng.standard_normal(40)          # steps 1 to 40; a checkpoint after 8, 12, ..., 36
    dt[8:40:4] += 0.3                                   # each checkpoint's first step (9, 13, ...) holds 0.3 s more
    t = np.cumsum(dt)
    ev = [{"step": s, "t": float(x)} for s, x in enumerate(t, start=1)]
    o = accounting.overhead_per_checkpoint(ev, every=4, plain=4)
    two = accounting.cycle_overheads(o["step_ends_s"], every=4, plain=4, cycle=2)
    assert np.allclose(two, o["overheads_s"]) and len(two) == 8
    one = accounting.cycle_overheads(o["step_ends_s"], every=4, plain=4, cycle=1)
    assert abs(np.mean(one) - 0.3) < 0.1 and abs(np.mean(two) - 0.3) < 0.1
    for bad in (0, 4):
        with pytest.raises(MlsysimError, match="cycle must be"):
            accounting.cycle_overheads(o["step_ends_s"], every=4, plain=4, cycle=bad)
    with pytest.raises(MlsysimError, match="1 to every - 1 = 3 steps, got 4"):
        accounting.cycle_overheads(o["step_ends_s"], every=4, plain=4, cycle=4)
