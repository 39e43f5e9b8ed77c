"""Checkpoints: contents per optimizer, sharding, write/restore paths, strategies, feasibility, widget."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mlsysim as ms
from mlsysim.checkpoint import EXTRAS_PER_RANK_B

C128 = ms.cluster("dgx-h100", nodes=128)
LAYOUT = {"llama-3-8b": (1, 1), "llama-3-70b": (8, 4), "llama-3.1-405b": (8, 16)}


def ck(model="llama-3-70b", **kw):
    tp, pp = LAYOUT.get(model, (8, 4))
    kw = {"tp": tp, "pp": pp, **kw}
    return ms.checkpoint(model, kw.pop("cluster", C128), **kw)


# --- contents -------------------------------------------------------------------------
@pytest.mark.parametrize("optimizer, per_param", [("adamw", 14.0), ("adam", 14.0), ("sgd", 6.0),
                                                  ("sgd-momentum", 10.0), ("adam-8bit", 8.0)])
def test_bytes_per_parameter(optimizer, per_param):
    m = ms.model("llama-3-8b")
    assert sum(ms.checkpoint_bytes(m, optimizer).values()) / m.params == pytest.approx(per_param)


def test_adafactor_is_factored_and_fp32_has_no_master_copy():
    m = ms.model("llama-3-8b")
    ada = ms.checkpoint_bytes(m, "adafactor")
    assert ada["optimizer_B"] < 0.05 * m.params * 4 and ada["master_B"] == 4 * m.params
    fp32 = ms.checkpoint_bytes(m, "adamw", precision="fp32")
    assert fp32["master_B"] == 0 and fp32["weights_B"] == 4 * m.params
    assert ms.checkpoint_bytes(m, master_weights=False)["master_B"] == 0


def test_worked_number_and_extras():
    c = ck()
    assert round(c.size_B / 1e9) == 988 and c.dp == 32
    assert c.rank_B / 1e9 == pytest.approx(5.24, abs=0.005)
    assert c.stall_s == pytest.approx(1.53, abs=0.005)
    assert ck(strategy="async").stall_s == pytest.approx(c.d2h_s) and c.d2h_s == pytest.approx(0.082, abs=5e-4)
    assert c.extras_B == EXTRAS_PER_RANK_B * 1024
    assert c.bytes_per_param == pytest.approx(14.0)
    assert "Daly optimum" in str(c) and "<table>" in c._repr_html_()


def test_zero_sharding_spreads_the_writes():
    ranks = [ck(zero_stage=z).rank_B for z in (0, 1, 3)]
    assert ranks[0] > ranks[1] > ranks[2]
    assert ck(zero_stage=3).rank_B == pytest.approx(ck().size_B / 1024, rel=1e-9)   # every rank an equal share
    assert ck(zero_stage=0).rank_B == pytest.approx(ck(zero_stage=0).size_B / 32, rel=1e-3)


def test_storage_tiers_and_override():
    assert {t.name for t in ms.storage_tiers()} >= {"local-nvme", "lustre", "tectonic", "s3"}
    nvme = ms.storage_tier("local-nvme")
    assert nvme.write_Bps == 8 * 3.8e9 and not nvme.durable
    lustre = ms.storage_tier("pfs")
    assert lustre.write_Bps == pytest.approx(273e9 / 0.4)
    assert lustre.write_s(1e12, 1e9) == pytest.approx(1e12 / lustre.write_Bps)      # aggregate-bound
    assert lustre.write_s(1e9, 1e11) == pytest.approx(1e11 / 50e9)                  # client-link-bound
    slow = ck(storage_Bps=10e9)
    assert slow.storage_write_s == pytest.approx(slow.size_B / 10e9)
    assert ms.storage_tier("s3").write_s(1e15, 1e10) == pytest.approx(1e10 / 12.5e9)
    assert ck(read_Bps=10e9).restore_s > ck().restore_s + ck().size_B / 10e9 - ck().size_B / 1e12 - 1e-9


def test_megatron_and_opt_cases():
    from mlsysim.validation.checkpoint import megatron_1t, opt_175b
    k = megatron_1t()
    assert k.size_B == pytest.approx(14.11e12, rel=1e-3) and k.dp == 6
    assert megatron_1t(storage_Bps=273e9).write_s == pytest.approx(52.6, abs=0.1)
    assert opt_175b().bytes_per_param == pytest.approx(10.0)


# --- strategies ---------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.sampled_from(list(LAYOUT)), st.sampled_from(["lustre", "tectonic", "s3"]),
       st.floats(60.0, 7200.0), st.integers(0, 3))
def test_async_and_in_memory_never_stall_longer_than_sync(model, storage, interval, zero):
    kw = dict(storage=storage, zero_stage=zero)
    sync = ck(model, strategy="sync", **kw)
    for s in ("async", "pipelined", "in-memory"):
        other = ck(model, strategy=s, step_s=1.0, **kw)
        assert other.stall_s <= sync.stall_s
        assert other.write_s == pytest.approx(sync.write_s)           # same bytes reach storage


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(list(LAYOUT)), st.sampled_from(["sync", "async", "in-memory"]), st.floats(1.5, 20.0))
def test_goodput_falls_as_the_failure_rate_rises(model, strategy, k):
    base = ck(model, strategy=strategy, interval_s=1800.0)
    worse = ck(model, strategy=strategy, interval_s=1800.0,
               node_failures_per_day=k * ms.node_failure_rate_per_h(C128.node) * 24)
    assert worse.mtbf_s < base.mtbf_s and worse.goodput < base.goodput


def test_faster_host_link_lowers_the_async_stall():
    h = ms.hardware("h100")
    fast_h = dataclasses.replace(h, name="H100-C2C", host_link_Bps=450e9)
    fast = dataclasses.replace(C128, node=dataclasses.replace(C128.node, accelerator=fast_h))
    assert ck(cluster=fast, strategy="async").stall_s < ck(strategy="async").stall_s


def test_in_memory_restores_from_peers_and_models_double_failures():
    mem, asyn = ck(strategy="in-memory", storage="s3"), ck(strategy="async", storage="s3")
    assert mem.restore_s < asyn.restore_s and mem.lag_s < asyn.lag_s
    assert 0 < mem.p_memory_loss < 1e-3
    flaky = ck(strategy="in-memory", storage="s3", node_failures_per_day=50.0)
    assert flaky.p_memory_loss > 100 * mem.p_memory_loss
    three = ck(strategy="in-memory", storage="s3", replicas=3, node_failures_per_day=50.0)
    assert three.p_memory_loss < flaky.p_memory_loss
    assert mem.host_memory_needed_B == pytest.approx(3 * mem.node_B)


def test_default_interval_is_the_feasible_daly_optimum():
    for s in ("sync", "async", "in-memory"):
        c = ck("llama-3.1-405b", strategy=s)
        assert c.interval_s == pytest.approx(max(c.daly_s, c.min_interval_s))
        assert c.goodput >= ck("llama-3.1-405b", strategy=s, interval_s=c.interval_s * 1.5).goodput


def test_vectorised_over_interval_and_cluster_size():
    tau = np.geomspace(0.1, 1e4, 60)
    r = ck(strategy="async", interval_s=tau)
    assert r.goodput.shape == (60,) and not r.feasible[0] and r.feasible[-1]
    assert np.isnan(r.goodput[0]) and "persist" in r.reason
    nodes = np.array([3, 16, 128, 1024])[:, None]
    g = ck(strategy="async", nodes=nodes, interval_s=np.array([[300.0, 900.0]]))
    assert g.goodput.shape == (4, 2) and not g.feasible[0, 0] and "whole number" in g.reason
    assert g.goodput[2, 0] == pytest.approx(ck(strategy="async", interval_s=300.0).goodput)
    assert np.all(np.diff(g.goodput[1:, 0]) < 0)


# --- the pipelined strategy (CheckFreq) ---------------------------------------------------
def test_pipelined_worked_numbers():
    """The module docstring: behind a 1 s forward and backward the 82 ms copy is hidden; behind 50 ms,
    32 ms of it is left. The persist then runs as for async."""
    asyn = ck(strategy="async")
    hidden, short = ck(strategy="pipelined", step_s=1.0), ck(strategy="pipelined", step_s=0.05)
    assert hidden.stall_s == 0.0 and hidden.d2h_s == pytest.approx(0.082, abs=5e-4)
    assert short.stall_s == pytest.approx(short.d2h_s - 0.05) and short.stall_s == pytest.approx(0.032, abs=5e-4)
    for c in (hidden, short):
        assert c.write_s == pytest.approx(asyn.write_s) and c.host_memory_needed_B == asyn.host_memory_needed_B
        assert c.min_interval_s == pytest.approx(c.write_s - c.stall_s) and c.lag_s == pytest.approx(c.min_interval_s)
    assert hidden.interval_s == pytest.approx(hidden.min_interval_s)   # no stall: as often as the persist allows
    assert hidden.young_s == hidden.daly_s == 0.0 and hidden.goodput > asyn.goodput
    assert "overlapped by" in str(short) and short.step_s == 0.05


def test_pipelined_stall_is_the_uncovered_copy_and_the_others_ignore_step_s():
    steps = np.array([0.01, 0.05, 0.0818, 0.5, 10.0])
    r = ck(strategy="pipelined", step_s=steps)
    assert np.allclose(r.stall_s, np.maximum(0.0, r.d2h_s - steps)) and np.all(np.diff(r.stall_s) <= 0)
    assert np.all(np.isfinite(r.goodput)) and np.all(r.interval_s >= r.min_interval_s - 1e-12)
    for s in ("sync", "async", "in-memory"):
        assert ck(strategy=s, step_s=0.01).stall_s == ck(strategy=s).stall_s


def test_a_pipelined_snapshot_comes_at_most_once_a_step():
    quick = ck(strategy="pipelined", step_s=1.0)                 # the persist outlasts a step: it sets the interval
    assert quick.min_interval_s == pytest.approx(quick.write_s - quick.stall_s) and quick.min_interval_s > 1.0
    slow_step = quick.write_s * 2                                # a step longer than copy and persist together
    slow = ck(strategy="pipelined", step_s=slow_step)
    assert slow.stall_s == 0.0 and slow.min_interval_s == slow.interval_s == slow_step
    assert slow.lag_s == pytest.approx(slow.write_s)              # durable a copy and a persist after the snapshot
    with pytest.raises(ms.InfeasibleError, match="at least one forward and backward pass.*within the same step"):
        ck(strategy="pipelined", step_s=slow_step, interval_s=slow_step / 2)


def test_pipelined_needs_step_s_and_a_feasible_interval():
    with pytest.raises(ms.MlsysimError, match="step_s"):
        ck(strategy="pipelined")
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="step_s"):
            ck(strategy="pipelined", step_s=bad)
    with pytest.raises(ms.InfeasibleError, match="copy and persist"):
        ck(strategy="pipelined", step_s=1.0, interval_s=0.5)


def test_pipelined_on_nvlink_c2c_hides_a_larger_shard():
    h = ms.hardware("h100")
    c2c = dataclasses.replace(C128, node=dataclasses.replace(
        C128.node, accelerator=dataclasses.replace(h, name="H100-C2C", host_link_Bps=ms.hardware("gb200").host_link_Bps)))
    pcie, grace = (ck(cluster=x, strategy="pipelined", step_s=0.02, zero_stage=0) for x in (C128, c2c))
    assert grace.d2h_s == pytest.approx(pcie.d2h_s * 64e9 / 450e9) and grace.stall_s < pcie.stall_s


# --- bad input and infeasible settings ----------------------------------------------------
def test_unknown_names():
    with pytest.raises(ms.UnknownNameError, match="optimizer"):
        ck(optimizer="adagrad-9000")
    with pytest.raises(ms.UnknownNameError, match="strategy"):
        ck(strategy="lazy")
    with pytest.raises(ms.UnknownNameError, match="storage"):
        ck(storage="floppy")


@pytest.mark.parametrize("bad", [0, -60.0, float("nan")])
def test_bad_interval(bad):
    with pytest.raises(ValueError, match="interval_s"):
        ck(interval_s=bad)


def test_infeasible_settings_raise_for_scalars():
    with pytest.raises(ms.InfeasibleError, match="persist"):
        ck(strategy="async", interval_s=0.5)
    with pytest.raises(ms.InfeasibleError, match="peer copy"):
        ck(strategy="in-memory", interval_s=0.01)
    with pytest.raises(ms.InfeasibleError, match="host memory"):
        ck("llama-3.1-405b", strategy="in-memory", cluster=ms.cluster("dgx-h100", nodes=16), zero_stage=0,
           replicas=8)
    with pytest.raises(ms.InfeasibleError, match="not durable"):
        ck(storage="local-nvme")
    with pytest.raises(ms.InfeasibleError, match="must equal"):
        ck(dp=16)
    with pytest.raises(ms.InfeasibleError, match="whole number"):
        ck(cluster=ms.cluster("dgx-h100", nodes=3))
    with pytest.raises(ms.InfeasibleError, match="host link"):
        ms.checkpoint("llama-3-8b", dataclasses.replace(C128, node=dataclasses.replace(
            C128.node, accelerator=dataclasses.replace(ms.hardware("h100"), host_link_Bps=None))))
    with pytest.raises(ms.InfeasibleError, match="persist_every"):
        ck("llama-3.1-405b", strategy="in-memory", storage="s3", interval_s=1.0, persist_every=1)


@pytest.mark.parametrize("kw, name", [(dict(tp=0), "tp"), (dict(pp=1.5), "pp"), (dict(zero_stage=4), "zero_stage"),
                                      (dict(replicas=1), "replicas"), (dict(host_fraction=1.5), "host_fraction"),
                                      (dict(restart_s=-1), "restart_s"), (dict(storage_Bps=0), "storage_Bps"),
                                      (dict(nodes=0), "nodes"), (dict(dp=-2), "dp")])
def test_bad_parameters(kw, name):
    with pytest.raises(ValueError, match=name):
        ck(**kw)


# --- goodput from a checkpoint record, widget, measurement ---------------------------------------
def test_goodput_accepts_a_checkpoint():
    c = ck(strategy="async", interval_s=600.0)
    g = ms.goodput(C128, checkpoint=c)
    assert g.ratio == pytest.approx(c.goodput) and g.downtime_s == pytest.approx(c.downtime_s)
    assert ms.goodput(C128, checkpoint=c, restart_s=0.0).ratio > c.goodput


def test_checkpoint_explorer():
    ex = ms.widgets.checkpoint_explorer()
    assert ex.result.strategy == "async" and "goodput" in ex.summary_text()
    ex.controls["strategy"].value = "sync"
    sync_stall = ex.result.stall_s
    ex.controls["storage_GBps"].value = 10.0
    assert ex.result.stall_s > 10 * sync_stall
    ex.controls["strategy"].value = "async"
    ex.controls["interval_min"].value = 0.1                       # 6 s < the 99 s persist at 10 GB/s
    assert isinstance(ex.result, ms.InfeasibleError) and "not feasible" in ex.summary_text()
    ex.controls["interval_min"].value = 30.0
    ex.controls["nodes"].value = 2048                            # 16,384 GPUs: Llama 3's 3.09 h
    assert ex.error == "" and ex.result.mtbf_s == pytest.approx(3.093 * 3600, rel=1e-3)
    assert ex.result.cluster.startswith("2048 x DGX-H100")


def test_disk_bandwidth_measurement(tmp_path):
    d = ms.measure.disk_bandwidth(size_B=4e6, directory=str(tmp_path), repeats=1)
    assert d.size_B == pytest.approx(4e6, rel=1e-3) and d.write_Bps > 0 and d.read_Bps > 0
    assert list(tmp_path.iterdir()) == []
