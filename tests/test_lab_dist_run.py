"""The distributed lab for real: torchrun process groups (gloo, CPU, 127.0.0.1), ranks SIGKILLed at
named points and at a random time, torchrun restarting the group, resume from the newest global
commit bit for bit, reshard 4 -> 2 and 2 -> 4 checked by the CRC-32 of every gathered tensor,
DDP and DCP in the same worker. Nothing mocked; every process is killed by its pid afterwards.
The uninterrupted runs are shared: a reshard continues a copy of one, cut back to an earlier
global commit (its newest record removed, as when a job dies just before writing it)."""
import os
import shutil
import statistics
from collections import namedtuple

import pytest

pytest.importorskip("torch")

from mlsysim.errors import MlsysimError  # noqa: E402
from mlsysim.lab.distributed import shards  # noqa: E402
from mlsysim.lab.distributed.launcher import check_world, launch, losses, resumes, run_distributed  # noqa: E402

STEPS = 6          # checkpoints at steps 2, 4, 6
Ref = namedtuple("Ref", "dir events pids")


def _ref(directory, nproc, keep):
    run = launch(directory, nproc, STEPS, checksums=True, keep=keep)
    return Ref(directory, run.events, run.pids)


@pytest.fixture(scope="module")
def ref2(tmp_path_factory):
    return _ref(tmp_path_factory.mktemp("ref2"), 2, keep=2)


@pytest.fixture(scope="module")
def ref4(tmp_path_factory):
    return _ref(tmp_path_factory.mktemp("ref4"), 4, keep=3)      # global commits 2, 4 and 6 kept


def _alive(pids):
    out = []
    for pid in pids:
        try:
            os.kill(pid, 0)
            out.append(pid)
        except OSError:
            pass
    return out


def test_uninterrupted_run_learns_and_commits(ref2, tmp_path):
    ls = losses(ref2.events)
    assert sorted(ls) == list(range(1, STEPS + 1)) and ls[STEPS] < ls[1]
    assert [e["commit"] for e in ref2.events if "commit" in e] == [2, 4, 6]
    assert all(0 < e["shard_s"] <= e["durable_s"] for e in ref2.events if "commit" in e)   # rank 0's shard first
    assert not _alive(ref2.pids)
    acct = [e["acct"] for e in ref2.events if "loss" in e]      # rank 0's CPU time, read after every step
    assert len(acct) == STEPS and all(set(a["threads"]) >= {"main", "gloo"} and len(a["machine"]) == 8 for a in acct)
    cpu = [a["proc"][0] + a["proc"][1] for a in acct]       # in clock ticks: a short step may add none
    assert all(b >= a for a, b in zip(cpu, cpu[1:])) and cpu[-1] > cpu[0]


def test_rank_killed_at_named_points_resumes_bit_for_bit(ref2, tmp_path):
    """Sync engine: mid-step, mid-snapshot, mid-persist, between a shard commit and the global commit."""
    plan = ["step@3:1", "snapshot@4:0", "persist@4:1", "shard@6:0"]
    run = launch(tmp_path, 2, STEPS, engine="sync", pause=plan)
    assert [k[1:] for k in run.killed] == [("step", 3, 1), ("snapshot", 4, 0), ("persist", 4, 1), ("shard", 6, 0)]
    # killed before checkpoint 4 and 6 were globally committed: each restart resumes from the one before
    assert resumes(run.events) == [None, 2, 2, 2, 4]
    assert losses(run.events) == losses(ref2.events)                        # bit for bit (exact floats)
    assert shards.global_steps(tmp_path) == [4, 6]                      # pruned to keep = 2
    assert not _alive(run.pids)


def test_concurrent_engine_before_and_after_the_global_commit(ref2, tmp_path):
    """The concurrent engine's writer thread is killed with its shard durable and the global commit
    not yet written, then rank 0 right after writing it."""
    run = launch(tmp_path, 2, STEPS, engine="concurrent", pause=["shard@4:1", "commit@4:0"])
    assert [k[1:] for k in run.killed] == [("shard", 4, 1), ("commit", 4, 0)]
    r = resumes(run.events)
    assert r[1] in (None, 2) and r[2] == 4                # a kill after the global commit keeps it
    assert losses(run.events) == losses(ref2.events)
    assert not _alive(run.pids)


def _flip(path):
    b = bytearray(path.read_bytes())
    b[len(b) // 2] ^= 0xFF
    path.write_bytes(bytes(b))


def _reshard(first, second, tmp_path, engine="concurrent", damage=False):
    a = launch(tmp_path, first, STEPS, engine=engine, stop_after=4, checksums=True)
    if damage:
        _flip(tmp_path / shards.read_global(tmp_path, 4)["shards"][1]["file"])
    b = launch(tmp_path, second, STEPS, engine="sync" if engine == "concurrent" else "dcp", checksums=True)
    loaded = [e for e in b.events if "loaded_checksums" in e][0]
    step = loaded["loaded_checksums"]
    saved = [e for e in a.events if e.get("checksums") == step][0]["crc32"]
    return a, b, step, saved, loaded["crc32"]


def _continue(ref, second, tmp_path, damage=False):
    """A copy of ``ref``'s run without its last global commit, continued at ``second`` ranks."""
    run = tmp_path / "run"
    shutil.copytree(ref.dir, run)
    (run / shards.global_name(STEPS)).unlink()
    if damage:
        _flip(run / shards.read_global(run, 4)["shards"][1]["file"])
    b = launch(run, second, STEPS, engine="concurrent", checksums=True)
    loaded = [e for e in b.events if "loaded_checksums" in e][0]
    step = loaded["loaded_checksums"]
    saved = [e for e in ref.events if e.get("checksums") == step][0]["crc32"]
    return b, step, saved, loaded["crc32"]


def test_reshard_4_to_2_skips_a_flipped_shard_and_restores_every_tensor(ref4, tmp_path):
    b, step, saved, loaded = _continue(ref4, 2, tmp_path, damage=True)
    warning = [e["warning"] for e in b.events if "warning" in e]
    assert len(warning) == 1 and "shard of rank 1 of 4" in warning[0] and "rank-00001" in warning[0]
    assert step == 2 and loaded == saved                                    # every gathered tensor, by CRC-32
    cont, ref = losses(b.events), losses(ref4.events)
    assert sorted(cont) == [3, 4, 5, 6]
    diff = max(abs(cont[s] - ref[s]) for s in cont)
    assert 0 < diff < 1e-4, diff                                            # reduction order only
    assert not _alive(b.pids | ref4.pids)


def test_reshard_2_to_4(ref2, tmp_path):
    b, step, saved, loaded = _continue(ref2, 4, tmp_path)
    assert step == 4 and loaded == saved
    cont, ref = losses(b.events), losses(ref2.events)
    assert sorted(cont) == [5, 6] and max(abs(cont[s] - ref[s]) for s in cont) < 1e-4
    nbytes = [e["bytes_read"] for e in b.events if "bytes_read" in e][0]
    assert len(nbytes) == 4 and all(n > 0 for n in nbytes)


def test_dcp_async_save_and_dcp_resharding_load(tmp_path):
    a, b, step, saved, loaded = _reshard(4, 2, tmp_path, engine="dcp-async")
    assert step == 4 and loaded == saved
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("dcp-")) == ["dcp-000000004",
                                                                                     "dcp-000000006"]


def test_ddp_rank_killed_at_a_random_time(tmp_path):
    """Replicated state: rank 0 writes it, and after the restart every rank reads rank 0's file, from
    the node's memory tier (which outlives the killed worker) unless storage holds a newer one."""
    r = run_distributed(nproc=2, engine="sync", mode="ddp", kill="random", directory=tmp_path, steps=STEPS, seed=1)
    assert [k[1] for k in r.kills] in (["random"], [])      # [] only if the attempt finished first
    assert len(r.resumed_from) == len(r.kills) and r.resumed_exactly is True
    if r.kills and r.resumed_from[-1] is None:     # killed before the first checkpoint: from scratch
        assert r.recovered_from is None and not any(r.bytes_read_per_rank)
    elif r.kills:                # rank 0 reads its file; rank 1 reads rank 0's whole file, and its own
        assert r.bytes_read_per_rank[1] > r.bytes_read_per_rank[0] > 0
        assert r.recovered_from in ("memory", "storage") and r.peer_bytes_per_rank == (0, 0)
        if r.recovered_from == "memory":
            assert r.storage_bytes_read_per_rank == (0, 0)
    assert r.memory_root is not None and not os.path.exists(r.memory_root)


def test_a_world_size_the_batch_cannot_split_is_refused():
    with pytest.raises(MlsysimError, match="world size of 3 cannot split the global batch of 8"):
        check_world(3)


def test_plain_steps_first_then_the_overhead_per_checkpoint(tmp_path):
    """Four steps without checkpoints, then one every two: checkpoints at 6 and 8 only, and the
    overhead of the one followed by two steps (6) against the plain steps' median."""
    r = run_distributed(nproc=2, engine="concurrent", memory=False, steps=8, every=2, plain_steps=4,
                        directory=tmp_path, probe_terms=2)
    assert r.plain_steps == 4 and len(r.stalls_s) == len(r.durables_s) == len(r.shards_s) == 2
    assert all(0 < st < sh <= d for st, sh, d in zip(r.stalls_s, r.shards_s, r.durables_s))   # rank 0's, then all
    assert shards.global_steps(tmp_path / "reference") == [6, 8]
    assert r.plain_step_s > 0 and len(r.overheads_s) == 1 and r.overhead_s == r.overheads_s[0]
    assert 0 < r.plain_step_cpu_s < 4 * r.plain_step_s          # the rank's CPU time in a plain step, all threads
    assert r.plain_churn_Bps > 0                  # the memory rank 0 faults in per second while it trains
    assert r.to_dict()["overheads_s"] == list(r.overheads_s)
    # the job timed its own copy and disk at its end: every rank's shard, its bytes summed; no file of it left
    t = r.job_terms
    files_B = sum(p.stat().st_size for p in (tmp_path / "reference").glob("rank-*/ckpt-000000008.data"))
    assert t["repeats"] == 2 and t["copy_B"] == t["write_B"] == files_B        # the engines' data files, laid out
    assert 0 < t["copy_own_s"] <= t["copy_s"] < 1 and 0 < t["write_own_s"] <= t["write_s"] < 5
    # and the engine's fixed cost to durable, a save of a few kilobytes beside the job's next step
    assert 0 < t["fixed_stall_beside_s"] < t["fixed_durable_beside_s"] < 5
    # every time kept beside its median, the last rank's never before this one's
    assert all(len(t[k]) == 2 for k in ("copy_each_s", "write_each_s", "write_own_each_s", "fixed_durable_beside_each_s"))
    assert all(0 < o <= a for o, a in zip(t["write_own_each_s"], t["write_each_s"]))
    assert t["write_s"] == statistics.median(t["write_each_s"])
    # and the writers' CPU time beside the job's steps, every rank's bytes written durably in a thread of its own
    assert t["writer_cpu_beside_B"] == t["write_B"] and len(t["writer_cpu_beside_each_s"]) == 2
    assert 0 < t["writer_cpu_beside_s"] < 5 and not list(tmp_path.rglob("cpu-*"))
    assert not list(tmp_path.rglob("terms-*")) and not list(tmp_path.rglob("fixed-*"))
    assert shards.global_steps(tmp_path / "reference") == [6, 8]


def test_dcps_job_times_its_staging_and_disk_at_its_end(tmp_path):
    """DCP's job, its terms timed at its end: the staging held through a gap's steps, as its saves hold it, and
    the disk; the newest checkpoint still the last one written."""
    from mlsysim.lab.pytorch.engines import newest_path
    r = run_distributed(nproc=2, engine="dcp-async", steps=8, every=2, plain_steps=4, directory=tmp_path,
                        probe_terms=2)
    t = r.job_terms
    assert r.shards_s == () and len(r.durables_s) == 2           # one global commit each, no shard records
    assert t["repeats"] == 2 and t["dcp_stage_steps"] == 2 and "copy_s" not in t and not t["dcp_stage_freed_first"]
    assert 0 < t["dcp_stage_own_s"] <= t["dcp_stage_s"] < 5 and 0 < t["write_own_s"] <= t["write_s"] < 5
    assert 0 < t["dcp_stage_freed_own_s"] <= t["dcp_stage_freed_s"] < 5       # each freed before the gap's steps
    assert len(t["dcp_stage_each_s"]) == 2 and all(0 < o <= a for o, a in zip(t["dcp_stage_own_each_s"],
                                                                              t["dcp_stage_each_s"]))
    assert 0.9 < t["write_B"] / t["dcp_stage_B"] < 1.1         # the ranks' own bytes, written as staged
    # and DCP's writer thread's CPU time at each of its two checkpoints, by that thread's own clock
    cpu = t["dcp_writer_cpu_per_checkpoint_s"]
    assert len(cpu) == 2 and all(0 < x < 5 for x in cpu)
    assert not list(tmp_path.rglob("terms-*")) and newest_path("dcp-async", tmp_path / "reference").name.endswith("8")
    with pytest.raises(MlsysimError, match="probe_terms must be an integer >= 0"):
        run_distributed(steps=8, probe_terms=-1)
    with pytest.raises(MlsysimError, match="probe_terms must be an integer >= 0"):
        launch(tmp_path / "x", nproc=2, steps=4, probe_terms=1.5)
