"""Writers beside busy processes and beside memory the training churns: a churning process for real
(its page faults counted by the kernel), the writers' CPU time beside it, the refined model's use of it
with worked numbers, and bad input."""
import dataclasses
import inspect
import math
import mmap
import multiprocessing
import resource
import threading
import time

import pytest

from mlsysim.errors import MlsysimError
from mlsysim.lab.distributed import accounting, beside, launcher, terms

T = terms.Terms(cores=2, world=2, copy_Bps=10e9, parallel_copy_Bps=10e9, parallel_fresh_Bps=5e9, fresh_copy_Bps=5e9,
                crc_Bps=20e9, cache_write_Bps=4e9, write_Bps=1e9, read_cold_Bps=2e9, bcast_Bps=1e9, pair_Bps=1e9)


def _page_per_fault() -> int:
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
        return 2 ** 21 if "[always]" in f.read() else mmap.PAGESIZE


def test_churn_faults_in_new_memory_at_its_rate():
    faults0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
    done = beside.churn(256e6, threading.Event(), seconds=1.0)
    wall, faults = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0
    assert 2 * beside.CHURN_BLOCK_B <= done <= 256e6 * wall + beside.CHURN_BLOCK_B    # paced, never a block ahead
    assert faults >= 0.9 * done / _page_per_fault()     # every block is memory new to the process: each page faults


def test_churn_stops_when_told():
    stop = threading.Event()
    th = threading.Thread(target=beside.churn, args=(1e9, stop))
    th.start()
    time.sleep(0.2)
    t0 = time.perf_counter()
    stop.set()
    th.join(5)
    assert not th.is_alive() and time.perf_counter() - t0 < 1.0


def test_the_memory_a_rank_faults_in_per_second_from_its_snapshots():
    ev = [{"step": 1, "t": time.perf_counter(), "acct": accounting.snapshot()}]
    for step in (2, 3):
        block = mmap.mmap(-1, 32 * 2 ** 20)
        block[::mmap.PAGESIZE] = b"\x01" * (32 * 2 ** 20 // mmap.PAGESIZE)   # touch every page: 8192 faults
        block.close()
        ev.append({"step": step, "t": time.perf_counter(), "acct": accounting.snapshot()})
    rate = accounting.churn_Bps(ev, plain=3)
    slowest = max(b["t"] - a["t"] for a, b in zip(ev, ev[1:]))
    assert rate >= 0.9 * 32 * 2 ** 20 * mmap.PAGESIZE / _page_per_fault() / slowest
    assert accounting.churn_Bps([{"step": s, "t": float(s)} for s in (1, 2, 3)], plain=3) is None   # no accounting


def test_writers_after_the_gap_beside_a_churning_process(tmp_path):
    b = beside.beside(tmp_path, 2e6, 2, reclaim_wait_s=0.05, churn_Bps=1e8, period_s=0.1)
    assert 0 < b["writers_cpu_churned_s"] < 10 and b["churn_Bps"] == 1e8
    assert 0 < b["writers_cpu_cached_s"] < 10                # DCP's way: whole files cached, fsync at the end
    assert list(tmp_path.glob("cached-*")) == []             # the files left cached are gone
    assert multiprocessing.active_children() == []          # the churning processes and the spinners are gone
    alone = beside.beside(tmp_path, 2e6, 2, reclaim_wait_s=0.05)
    assert alone["writers_cpu_churned_s"] is None and alone["writers_cpu_cached_s"] is None
    none = beside.beside(tmp_path, 2e6, 2, reclaimed=0, churn_Bps=1e8)
    assert none["writers_cpu_churned_s"] is None and none["writers_cpu_cached_s"] is None


def test_the_cached_writers_keep_as_many_files_as_dcps_job(tmp_path):
    data = bytes(range(256)) * 4096                         # 1 MiB each
    writers = beside._cached_writers(tmp_path, data, 2)
    names = lambda: sorted(p.name for p in tmp_path.iterdir())
    assert beside.DCP_KEEP == 2 == inspect.signature(launcher.launch).parameters["keep"].default   # the job's keep
    assert writers() > 0 and names() == ["cached-0-0.bin", "cached-1-0.bin"]
    writers()                                               # two kept: nothing deleted yet
    assert names() == ["cached-0-0.bin", "cached-0-1.bin", "cached-1-0.bin", "cached-1-1.bin"]
    writers()                                               # the third call's files, the first's deleted
    assert names() == ["cached-0-1.bin", "cached-0-2.bin", "cached-1-1.bin", "cached-1-2.bin"]
    writers()                                               # the fourth reuses the first's name
    assert names() == ["cached-0-0.bin", "cached-0-2.bin", "cached-1-0.bin", "cached-1-2.bin"]
    assert all(p.read_bytes() == data for p in tmp_path.iterdir())
    one = beside._cached_writers(tmp_path / "one", data, 1, keep=1)
    (tmp_path / "one").mkdir()
    one(), one()
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == ["cached-0-1.bin"]


def test_bad_churn_rates_are_refused(tmp_path):
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(MlsysimError, match="rate_Bps must be a rate > 0"):
            beside.churn(bad, threading.Event())
        with pytest.raises(MlsysimError, match="churn_Bps must be a rate > 0"):
            beside.beside(tmp_path, 2e6, 2, churn_Bps=bad)
    with pytest.raises(MlsysimError, match="churn_Bps must be"):
        dataclasses.replace(T, churn_Bps=-1.0)


def test_bad_writer_cpu_terms_are_refused_by_name():
    with pytest.raises(MlsysimError, match="writer_cpu_churned_s_per_B must be"):
        dataclasses.replace(T, writer_cpu_churned_s_per_B=0.0)
    for bad in (0.0, -1e-9, math.inf):
        with pytest.raises(MlsysimError, match="writer_cpu_cached_s_per_B must be measured CPU seconds per byte > 0"):
            dataclasses.replace(T, writer_cpu_cached_s_per_B=bad)


def test_the_writers_cpu_beside_the_churn_stands_for_both_others_at_every_gap():
    # u = 1 ns/B, u_h = 2.5 ns/B after an idle wait, u_c = 1.2 ns/B after the same wait beside the training's
    # churn: 1 GB on 2 busy cores loses 1.2 / 2 = 0.6 s however far apart the checkpoints (the training churns
    # beside every write); without u_c, 0.5 s before the gap outlasts the reporting delay and 1.25 s after it
    t = dataclasses.replace(T, torch_crc_Bps=4e9, reclaimed_write_Bps=1e9, writer_cpu_s_per_B=1e-9,
                            writer_cpu_reclaimed_s_per_B=2.5e-9, writer_cpu_churned_s_per_B=1.2e-9, churn_Bps=5e8)
    near, far = terms.refined_job(t, 1e9, gap_s=1.0), terms.refined_job(t, 1e9, gap_s=10.0)
    assert round(near["terms"]["writer_loss_s"], 3) == round(far["terms"]["writer_loss_s"], 3) == 0.6
    no_c = dataclasses.replace(t, writer_cpu_churned_s_per_B=None)
    assert [round(terms.refined_job(no_c, 1e9, gap_s=g)["terms"]["writer_loss_s"], 3)
            for g in (1.0, 10.0)] == [0.5, 1.25]
    # DCP's file stays cached, memory the job holds beyond its churn: its write into memory taken back
    # (h = 1 GB/s against p = 4 GB/s: 0.375 s per rank's 0.5 GB) counts in the overhead, over 2 cores, with
    # torch.save's CRC-32 in place of this package's (0.1 s)
    extra = far["dcp-async"]["overhead_s"] - far["concurrent"]["overhead_s"] - (
        far["dcp-async"]["stall_s"] - far["concurrent"]["stall_s"])
    assert round(extra, 3) == round(2 * (0.5 / 4 - 0.5 / 20) / 2 + 2 * (0.5 / 1 - 0.5 / 4) / 2, 3) == 0.475


def test_a_thread_that_ends_between_two_steps_keeps_its_faults():
    size = 8 * 2 ** 20

    def touch():
        block = mmap.mmap(-1, size)
        block[::mmap.PAGESIZE] = b"\x01" * (size // mmap.PAGESIZE)
        block.close()
    faulted, release = threading.Event(), threading.Event()

    def touch_then_end():
        touch()
        faulted.set()
        release.wait(10)
    th = threading.Thread(target=touch_then_end)
    th.start()
    faulted.wait(10)
    ev = [{"step": 1, "t": time.perf_counter(), "acct": accounting.snapshot()}]   # the thread listed, its faults in
    release.set()
    th.join()                                  # it ends: its faults leave the living threads' sum
    for step in (2, 3):
        touch()
        ev.append({"step": step, "t": time.perf_counter(), "acct": accounting.snapshot()})
    slowest = max(b["t"] - a["t"] for a, b in zip(ev, ev[1:]))
    assert accounting.churn_Bps(ev, plain=3) >= 0.9 * size * mmap.PAGESIZE / _page_per_fault() / slowest


def test_dcp_s_whole_file_is_backed_again_beyond_the_window_u_h_holds():
    # u = 1 ns/B, u_h = 1.2 after the wait: this package's writers re-back 0.2 s of window for 1 GB, 0.1 s a
    # rank. DCP's file is whole: 0.5 GB a rank written at h = 1 GB/s in place of p = 4 GB/s, 0.375 s more, of
    # which u_h holds 0.1: the overhead takes 0.275 s more than this package's, with torch.save's CRC-32 in
    # place of this package's (0.125 - 0.025 s), over 2 ranks on 2 cores
    t = dataclasses.replace(T, torch_crc_Bps=4e9, reclaimed_write_Bps=1e9, writer_cpu_s_per_B=1e-9,
                            writer_cpu_reclaimed_s_per_B=1.2e-9)
    far = terms.refined_job(t, 1e9, gap_s=10.0)
    extra = far["dcp-async"]["overhead_s"] - far["concurrent"]["overhead_s"] - (
        far["dcp-async"]["stall_s"] - far["concurrent"]["stall_s"])
    assert round(extra, 3) == round(0.1 + 0.375 - 0.1, 3) == 0.375
    assert round(far["terms"]["writer_loss_s"], 3) == 0.6      # u_h S over 2 cores, unchanged


def test_dcp_s_page_cache_write_as_timed_beside_the_churn():
    # u_f = 2 ns/B timed as DCP writes (whole file cached, fsync at its end, beside the churn, after the gap):
    # 1.0 s of CPU a rank for 0.5 GB, in place of R/p + R(1/h - 1/p) = 0.5 s; with torch.save's CRC-32 (0.125 s)
    # and the disk's 1.0 s at the fsync, 2.125 s from the call's return to durable. The training loses DCP's
    # writer's 1.125 s a rank in place of this package's (u_c S / N = 0.6 s): 0.525 s more, 2 ranks on 2 cores
    t = dataclasses.replace(T, torch_crc_Bps=4e9, reclaimed_write_Bps=1e9, writer_cpu_s_per_B=1e-9,
                            writer_cpu_churned_s_per_B=1.2e-9, churn_Bps=5e8, writer_cpu_cached_s_per_B=2e-9)
    far = terms.refined_job(t, 1e9, gap_s=10.0)
    assert round(far["terms"]["cached_write_s"], 3) == 1.0 and "reclaimed_write_s" not in far["terms"]
    assert round(far["dcp-async"]["durable_s"] - far["dcp-async"]["stall_s"], 3) == 2.125
    extra = far["dcp-async"]["overhead_s"] - far["concurrent"]["overhead_s"] - (
        far["dcp-async"]["stall_s"] - far["concurrent"]["stall_s"])
    assert round(extra, 3) == round(0.125 + 1.0 - 0.6, 3) == 0.525
    # u_f is timed at the job's own cadence: it stands whatever the gap, where h would stand only past the delay
    near = terms.refined_job(t, 1e9, gap_s=1.0)
    assert near["dcp-async"] == far["dcp-async"] and round(near["terms"]["cached_write_s"], 3) == 1.0
    without = terms.refined_job(dataclasses.replace(t, writer_cpu_cached_s_per_B=None), 1e9, gap_s=1.0)
    assert round(without["dcp-async"]["durable_s"] - without["dcp-async"]["stall_s"], 3) == round(0.125 + 0.125 + 1, 3)


def _dcp_more_than_own(j: dict) -> float:
    """What DCP's overhead adds to the concurrent engine's beyond its longer stall (seconds)."""
    return j["dcp-async"]["overhead_s"] - j["concurrent"]["overhead_s"] - (
        j["dcp-async"]["stall_s"] - j["concurrent"]["stall_s"])


def test_dcp_s_writer_thread_as_the_job_timed_it_stands_for_its_crc_and_page_cache_write():
    # w_d = 1.5 s of CPU a rank per checkpoint, DCP's writer thread's own clock in the job: in place of torch.save's
    # CRC-32 and u_f R (0.125 + 1.0 s), so 1.5 s + the disk's 1.0 s from the call's return to durable; the training
    # loses the larger of w_d and t + u_f R (1.5 s) a rank in place of this package's writer's (u_c S / N = 0.6 s):
    # 0.9 s more, 2 ranks on 2 cores
    t = dataclasses.replace(T, torch_crc_Bps=4e9, reclaimed_write_Bps=1e9, writer_cpu_s_per_B=1e-9,
                            writer_cpu_churned_s_per_B=1.2e-9, churn_Bps=5e8, writer_cpu_cached_s_per_B=2e-9,
                            dcp_writer_cpu_s=1.5)
    j = terms.refined_job(t, 1e9, gap_s=10.0)
    assert j["terms"]["dcp_writer_cpu_s"] == 1.5 and round(j["terms"]["cached_write_s"], 3) == 1.0
    assert round(j["dcp-async"]["durable_s"] - j["dcp-async"]["stall_s"], 3) == 2.5
    assert round(_dcp_more_than_own(j), 3) == round(1.5 - 0.6, 3) == 0.9
    # w_d = 0.8 s, less than the probe's t + u_f R: durable 0.8 + 1.0 s after the call's return; the training loses
    # the probe's 1.125 s (the memory the writes take, backed again by whichever thread touches it first)
    low = terms.refined_job(dataclasses.replace(t, dcp_writer_cpu_s=0.8), 1e9, gap_s=10.0)
    assert round(low["dcp-async"]["durable_s"] - low["dcp-async"]["stall_s"], 3) == 1.8
    assert round(_dcp_more_than_own(low), 3) == round(1.125 - 0.6, 3) == 0.525
    # without u_f, w_d alone: 0.8 - 0.6 s
    alone = terms.refined_job(dataclasses.replace(t, dcp_writer_cpu_s=0.8, writer_cpu_cached_s_per_B=None), 1e9,
                              gap_s=10.0)
    assert "cached_write_s" not in alone["terms"] and round(_dcp_more_than_own(alone), 3) == 0.2
    assert alone["dcp-async"]["durable_s"] == low["dcp-async"]["durable_s"]
    assert j["concurrent"] == terms.refined_job(dataclasses.replace(t, dcp_writer_cpu_s=None), 1e9, gap_s=10.0)[
        "concurrent"]                                              # this package's engine does not use it
    with pytest.raises(MlsysimError, match="dcp_writer_cpu_s must be a measured time >= 0 s or None"):
        dataclasses.replace(t, dcp_writer_cpu_s=-1.0)


def test_writes_at_the_job_s_cadence_start_a_gap_apart():
    starts = []

    def writers():
        starts.append(time.perf_counter())
        time.sleep(0.05)
    assert len(beside._after_wait(writers, 3, wait_s=5.0, period_s=0.2)) == 3
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert all(0.19 < g < 0.3 for g in gaps)                # a period apart, not the wait after each end
    starts.clear()
    beside._after_wait(writers, 2, wait_s=0.0, period_s=0.01)   # a write longer than the period: the next at once
    assert 0.05 <= starts[1] - starts[0] < 0.1
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(MlsysimError, match="period_s must be a time > 0 s"):
            beside.beside(None, 2e6, 2, period_s=bad)


def test_the_churned_writes_start_the_concurrent_job_s_gap_apart(tmp_path):
    starts = []

    def writers():
        starts.append(time.perf_counter())
    ctx = multiprocessing.get_context("fork")
    assert len(beside._beside_churn(writers, ctx, 1e8, 3, 5.0, 2, period_s=0.2)) == 3
    assert all(0.19 < b - a < 0.3 for a, b in zip(starts, starts[1:]))    # not 5 s after each end
    assert multiprocessing.active_children() == []
    t0 = time.perf_counter()
    b = beside.beside(tmp_path, 2e6, 2, reclaim_wait_s=0.05, churn_Bps=1e8, churn_period_s=0.1)
    churned, cached = b["writers_cpu_churned_samples_s"], b["writers_cpu_cached_samples_s"]
    assert len(churned) == beside.cadence_writes(0.1, 3) == beside.CADENCE_MOST == 40 and len(cached) == 3
    assert time.perf_counter() - t0 >= 40 * 0.1                # forty writes, 0.1 s apart
    assert b["writers_cpu_churned_s"] == pytest.approx(sum(churned) / 40)    # their mean, not the median
    assert b["writers_cpu_cached_s"] == pytest.approx(sum(cached) / 3)
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(MlsysimError, match="churn_period_s must be a time > 0 s"):
            beside.beside(None, 2e6, 2, churn_period_s=bad)


def test_writes_at_a_cadence_span_about_thirty_seconds_three_at_least_forty_at_most():
    assert [beside.cadence_writes(p, 3) for p in (0.1, 0.69, 0.98, 2.65, 4.28, 9.89, 60.0)] == [40, 40, 31, 12, 8, 4, 3]
    assert beside.cadence_writes(None, 3) == 3 and beside.cadence_writes(None, 5) == 5     # after a wait: as asked
    assert beside.cadence_writes(0.5, 0) == 0 and beside.cadence_writes(9.89, 20) == 20   # none; more if asked


def test_with_the_job_s_checkpoints_the_probe_writes_as_many_times_and_counts_its_first(tmp_path):
    assert beside.cadence_writes(20.0, 3, checkpoints=12) == 12 and beside.cadence_writes(0.1, 3, checkpoints=41) == 41
    assert beside.cadence_writes(None, 3, checkpoints=5.0) == 5 and type(beside.cadence_writes(None, 3, 5.0)) is int
    assert beside.cadence_writes(0.5, 0, checkpoints=12) == 0                       # no churned writes asked: none
    for bad in (0, -1, 2.5, math.nan, True):
        with pytest.raises(MlsysimError, match="checkpoints must be a (whole )?number"):
            beside.cadence_writes(1.0, 3, checkpoints=bad)
    b = beside.beside(tmp_path, 2e6, 2, reclaim_wait_s=0.05, churn_Bps=1e8, churn_period_s=0.1, period_s=0.1,
                      checkpoints=5)
    churned, cached = b["writers_cpu_churned_samples_s"], b["writers_cpu_cached_samples_s"]
    assert len(churned) == 5 and len(cached) == 5         # DCP's way too: its first, which frees no file, counted
    assert b["writers_cpu_cached_s"] == pytest.approx(sum(cached) / 5)
    assert not list(tmp_path.glob("cached-*.bin")) and multiprocessing.active_children() == []
