"""The distributed lab's predictions: ms.checkpoint on a one-node cluster of N ranks sharing one disk,
and the bytes each restore scheme reads (load amplification computed beside ms.checkpoint)."""
import math

import pytest
from hypothesis import given, settings, strategies as st

import mlsysim as ms
from mlsysim.checkpoint import EXTRAS_PER_RANK_B
from mlsysim.errors import MlsysimError
from mlsysim.lab.distributed.predict import (SCHEMES, bytes_read, dist_machine, loopback_Bps, predict_job,
                                      predict_restore, records)

M = dist_machine(copy_Bps=10e9, write_Bps=1e9, read_Bps=2e9, link_Bps=1e9)
E = EXTRAS_PER_RANK_B


def test_worked_numbers_64_MB_on_4_ranks():
    p = predict_job(64e6, 4, "fsdp", M, interval_s=1.0)
    assert p.rank_B == pytest.approx(16e6 + 16e3)                      # S/N + E
    assert p.storage_write_s == pytest.approx((64e6 + 4 * 16e3) / 1e9)   # all ranks share one disk
    assert p.sync_stall_s == pytest.approx(0.0016016 + 0.064064)
    q = predict_job(64e6, 4, "ddp", M, interval_s=1.0)
    assert q.rank_B == pytest.approx(64e6 + 16e3)                      # rank 0 holds everything
    assert q.sync_stall_s == pytest.approx(0.0064016 + 0.064064)
    assert q.concurrent_stall_s == pytest.approx(0.0064016)             # τ = 1 s hides the write
    r = {s: predict_restore(s, 64e6, 4, M) for s in SCHEMES}
    assert r["sharded"].restore_s == pytest.approx(0.032032 + 0.0016016)
    assert r["broadcast"].restore_s == pytest.approx(0.032032 + 0.0064016 + 0.064)   # + 64 MB at 1 GB/s
    assert r["replicated"].restore_s == pytest.approx(256.112e6 / 2e9 + 0.0064016)
    assert r["replicated"].restore_cached_s == pytest.approx(0.032032 + 0.0064016)


def test_the_lab_layer_agrees_with_ms_checkpoint():
    for world in (1, 2, 4, 8):
        cluster, tier = records(M, world)
        assert cluster.accelerators == world and tier.kind == "shared"
        for mode, zero in (("fsdp", 3), ("ddp", 0)):
            ck = ms.checkpoint(ms.lab.predict.workload(48e6), cluster, optimizer="adamw", precision="fp32",
                               dp=world, zero_stage=zero, storage=tier, interval_s=1.0, restart_s=0.0)
            p = predict_job(48e6, world, mode, M, interval_s=1.0)
            assert (p.rank_B, p.checkpoint_B, p.sync_stall_s, p.restore_s) == (ck.rank_B, ck.size_B, ck.stall_s,
                                                                               ck.restore_s)
        per, total = bytes_read("sharded", 48e6, world)
        assert per[0] == pytest.approx(predict_job(48e6, world, "fsdp", M, 1.0).rank_B)
        assert total == pytest.approx(predict_job(48e6, world, "fsdp", M, 1.0).checkpoint_B)
        per, total = bytes_read("broadcast", 48e6, world)
        assert per[0] == pytest.approx(predict_job(48e6, world, "ddp", M, 1.0).rank_B)
        assert total == pytest.approx(predict_job(48e6, world, "ddp", M, 1.0).checkpoint_B)
        # ms.checkpoint's restore is the sharded scheme at ZeRO-3 and the broadcast scheme at ZeRO-0
        sharded = predict_restore("sharded", 48e6, world, M)
        assert sharded.restore_s == predict_job(48e6, world, "fsdp", M, 1.0).restore_s
        b = predict_restore("broadcast", 48e6, world, M)
        assert b.restore_s == predict_job(48e6, world, "ddp", M, 1.0).restore_s
        assert b.read_s + b.copy_s + b.broadcast_s == pytest.approx(b.restore_s)


def test_back_pressure_when_checkpoints_come_faster_than_the_disk():
    p = predict_job(64e6, 2, "fsdp", M, interval_s=0.01)
    assert p.concurrent_stall_s == pytest.approx(p.storage_write_s - 0.01)
    one = predict_job(64e6, 2, "fsdp", M, interval_s=0.01, buffers=1)
    assert one.concurrent_stall_s == pytest.approx(p.copy_s + p.storage_write_s - 0.01)


@settings(max_examples=200, deadline=None)
@given(size=st.floats(1e3, 1e12), world=st.integers(1, 64))
def test_amplification_properties(size, world):
    rep, rep_total = bytes_read("replicated", size, world)
    bc, bc_total = bytes_read("broadcast", size, world)
    sh, sh_total = bytes_read("sharded", size, world)
    assert len(rep) == len(bc) == len(sh) == world
    assert math.fsum(rep) == rep_total and math.fsum(sh) == sh_total
    assert rep_total - bc_total == pytest.approx((world - 1) * (size + E), rel=1e-9)   # N − 1 extra copies
    assert sh_total == pytest.approx(bc_total, rel=1e-12) == pytest.approx(size + world * E, rel=1e-12)
    if world == 1:
        assert rep == bc == sh
    r = {s: predict_restore(s, size, world, M) for s in SCHEMES}
    assert r["replicated"].restore_s >= r["replicated"].restore_cached_s * (1 - 1e-12)   # equal at N = 1
    assert r["replicated"].restore_s >= r["sharded"].restore_s * (1 - 1e-12)
    assert r["replicated"].bytes_read_total == pytest.approx(world * size + (2 * world - 1) * E, rel=1e-12)


def test_link_defaults_to_the_memory_copy_and_loopback_is_measured():
    assert dist_machine(5e9, 1e9, 1e9).link_Bps == 5e9
    rate = loopback_Bps(4e6)
    assert 1e6 < rate < 1e12


@pytest.mark.parametrize("call, match", [
    (lambda: bytes_read("gossip", 1e6, 2), "restore scheme"),
    (lambda: bytes_read("sharded", -1.0, 2), "size_B"),
    (lambda: bytes_read("sharded", 1e6, 0), "world"),
    (lambda: predict_job(1e6, 2, "zero", M, 1.0), "mode"),
    (lambda: predict_job(1e6, 2, "ddp", M, 0.0), "interval_s"),
    (lambda: predict_job(1e6, 2, "ddp", M, 1.0, buffers=0), "buffers"),
    (lambda: dist_machine(1e9, 1e9, 1e9, link_Bps=0.0), "link_Bps"),
    (lambda: dist_machine(float("nan"), 1e9, 1e9), "copy_Bps"),
])
def test_bad_input_names_the_input(call, match):
    with pytest.raises(MlsysimError, match=match):
        call()


def test_recovery_per_tier_follows_the_rates():
    from mlsysim.lab.distributed.predict import predict_recovery
    m = dist_machine(copy_Bps=10e9, write_Bps=1e9, read_Bps=2e9, link_Bps=8e9)
    p = predict_recovery(1e9, 4, 2, m)
    assert p.node_B == 2 * p.rank_B and p.memory_s == p.rank_B / 10e9
    assert p.memory_s < p.peer_memory_s < p.storage_s                 # a fast link: the peer beats the disk
    slow = predict_recovery(1e9, 4, 2, dist_machine(10e9, 1e9, 2e9, link_Bps=0.5e9))
    assert slow.peer_memory_s > slow.storage_s and slow.storage_s == p.storage_s
    with pytest.raises(MlsysimError, match="does not split over 3 nodes"):
        predict_recovery(1e9, 4, 3, m)


def test_the_recorded_benchmark_reads_without_torch_and_checks_each_target():
    import copy
    from mlsysim.lab.distributed.results import EARLIER, model_table, recorded, remodel, targets
    d = recorded()
    assert d["schema"] == "mlsysim.lab.dist-benchmark/2" and {q["world_size"] for q in d["points"]} == {2, 4}
    rows = model_table(d)
    assert len(rows) == 9 * len(d["points"]) + 4 * len(d["node_loss"]) == 62
    assert all(r["measured_s"] is not None and r["refined_s"] > 0 for r in rows)
    assert all(len(q[k]["overheads_s"]) == len(q[k]["overheads_cpu_s"]) == 6 and q[k]["overhead_s"] == pytest.approx(
        sum(q[k]["overheads_s"]) / 6) for q in d["points"] for k in ("concurrent", "dcp_async"))
    # seven checkpoints, six with a full interval after: the overhead their mean
    assert all(len(r["rounds_s"]) == 5 and r["restore_s"] == sorted(r["rounds_s"])[2]
               for q in d["points"] for r in q["restores"])   # each restore the median of five
    keys = {"crc_Bps", "parallel_copy_Bps", "bcast_Bps", "bcast_state_Bps", "pair_Bps", "sync_s", "reclaimed_write_Bps",
            "own_stall_s", "dcp_stall_s", "dcp_durable_s", "dcp_overhead_s", "own_overhead_s", "writer_cpu_s_per_B",
            "writer_cpu_reclaimed_s_per_B", "beside_mean_loss_s_per_B", "busy_share", "beside_steal_s_per_B"}
    assert all(keys <= set(q["terms"]) for q in d["points"])
    assert all(n["start_s"] > 0 and len(n["downtime_s"]) == 2 for n in d["node_loss"])
    earlier = recorded(EARLIER)             # the record before, its writers beside timed at 256 MB
    assert earlier["schema"] == d["schema"] and earlier["every"] == d["every"] and len(model_table(earlier)) == 62
    for run in (d, earlier):   # each stored prediction is the model's now (else: bench_lab_dist.py --remodel --record)
        again = remodel(run)
        stored, model = model_table(run), model_table(again)
        assert [r["refined_s"] for r in stored] == pytest.approx([r["refined_s"] for r in model], rel=1e-12)
        assert [r["measured_s"] for r in stored] == [r["measured_s"] for r in model]
        assert all(q["terms_s"] == pytest.approx(p["terms_s"], rel=1e-12) for q, p in zip(run["points"], again["points"]))
    verdicts = targets(d)
    assert len(verdicts) == len(d["points"]) + len(rows)
    assert [v[1] for v in verdicts[len(d["points"]):]] == [r["holds"] for r in rows]
    slow = copy.deepcopy(d)
    q = slow["points"][0]
    q["concurrent"]["stall_s"] = q["dcp_async"]["stall_s"]            # equal stalls miss "at most half"
    assert targets(slow)[0][1] is False
