"""Reliability: component MTTFs, cluster MTBF, Young/Daly intervals, ETTR and goodput."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mlsysim as ms
from mlsysim import reliability as rel

H100_16K = ms.cluster("dgx-h100", nodes=2048)
durations = st.floats(min_value=0.1, max_value=1e5)


# --- docstring and worked numbers ------------------------------------------------------
def test_llama3_rate_is_reproduced():
    assert ms.cluster_mtbf_h(H100_16K) == pytest.approx(54 * 24 / 419, rel=1e-9)
    assert ms.expected_failures(H100_16K, 54 * 24) == pytest.approx(419)
    shares = {c.name: c.failures for c in rel.components()}
    assert sum(shares.values()) == 419 and shares["GPU"] + shares["HBM"] == 268


def test_component_mttfs_follow_from_counts():
    gpu = next(c for c in rel.components() if c.name == "GPU")
    assert gpu.mttf_h == pytest.approx(16384 * 54 * 24 / 196)
    host = next(c for c in rel.components() if c.name == "host")
    assert host.per == "node" and host.mttf_h == pytest.approx(2048 * 54 * 24 / 43)


def test_worked_intervals_and_goodput():
    m = ms.cluster_mtbf_h(H100_16K) * 3600
    assert ms.young_interval_s(30.0, m) / 60 == pytest.approx(13.62, abs=0.01)
    assert ms.daly_interval_s(30.0, m) / 60 == pytest.approx(13.29, abs=0.01)
    assert ms.goodput(H100_16K, checkpoint=30.0).ratio == pytest.approx(0.8797, abs=5e-5)
    assert ms.p_any_failure(ms.cluster("dgx-h100", nodes=128), hours=24) == pytest.approx(0.384, abs=5e-4)


def test_daly_branch_for_long_checkpoints():
    assert ms.daly_interval_s(3000.0, 1000.0) == 1000.0          # δ ≥ 2M: checkpoint every M
    a = ms.daly_interval_s(np.array([10.0, 3000.0]), 1000.0)
    assert a[1] == 1000.0 and a[0] < ms.young_interval_s(10.0, 1000.0)


def test_kokolis_projection_and_ettr():
    c = ms.cluster("dgx-a100")
    assert ms.cluster_mtbf_h(c, nodes=2048, node_failures_per_day=6.5e-3) == pytest.approx(1.80, abs=0.01)
    m = 86400 / (2000 * 6.5e-3)
    assert ms.ettr(3600.0, 0.0, m, 300.0) == pytest.approx(0.72, abs=0.005)


def test_lost_work_and_step_rounding():
    assert ms.lost_work_s(1800.0, 600.0) == 1500.0
    assert ms.lost_work_s(1800.0, 600.0, checkpoint_s=20.0, lag_s=5.0) == 1515.0
    g = ms.goodput(H100_16K, step_s=7.0, checkpoint=30.0, interval_s=100.0)
    assert g.steps_per_checkpoint == 15 and g.interval_s == 105.0
    assert "goodput" in str(g) and "<table>" in g._repr_html_()


def test_breakdown_rows_sum_to_the_cluster_rate():
    rows = rel.failure_breakdown(H100_16K, hours=24)
    assert sum(r["failures"] for r in rows) == pytest.approx(24 / ms.cluster_mtbf_h(H100_16K))


# --- properties ---------------------------------------------------------------------------
@settings(max_examples=80, deadline=None)
@given(durations, durations)
def test_daly_never_exceeds_young(delta, mtbf):
    assert ms.daly_interval_s(delta, mtbf) <= ms.young_interval_s(delta, mtbf) + 1e-9


@settings(max_examples=80, deadline=None)
@given(st.floats(1.0, 600.0), st.floats(3600.0, 1e6), st.floats(1.01, 10.0), st.floats(0.0, 3600.0))
def test_goodput_falls_as_mtbf_falls(delta, mtbf, k, restart):
    tau = ms.daly_interval_s(delta, mtbf)
    assert ms.ettr(tau, delta, mtbf / k, restart) < ms.ettr(tau, delta, mtbf, restart)


@settings(max_examples=60, deadline=None)
@given(st.floats(1.0, 300.0), st.floats(3600.0, 1e6), st.floats(0.0, 1800.0))
def test_overhead_is_convex_in_the_interval(delta, mtbf, restart):
    tau = np.geomspace(1.0, 20 * mtbf, 400)
    waste = ms.reliability.wall_time_per_interval_s(tau, delta, mtbf, restart) / tau   # wall s per useful s
    # convex along a geometric grid means second differences weighted by the spacing are >= 0
    slope = np.diff(waste) / np.diff(tau)
    assert np.all(np.diff(slope) >= -1e-12 * np.abs(slope[1:]).max())


@settings(max_examples=60, deadline=None)
@given(st.floats(1.0, 300.0), st.floats(3600.0, 1e6), st.floats(0.0, 1800.0))
def test_daly_optimum_beats_its_neighbours(delta, mtbf, restart):
    tau = ms.daly_interval_s(delta, mtbf)
    best = ms.ettr(tau, delta, mtbf, restart)
    assert best >= ms.ettr(tau * 0.8, delta, mtbf, restart) and best >= ms.ettr(tau * 1.25, delta, mtbf, restart)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5000), st.integers(1, 5000))
def test_mtbf_inversely_proportional_to_nodes(a, b):
    c = ms.cluster("dgx-h100")
    assert ms.cluster_mtbf_h(c, nodes=a) * a == pytest.approx(ms.cluster_mtbf_h(c, nodes=b) * b)


def test_vectorised_over_interval_and_cluster_size():
    nodes = np.array([16, 128, 1024, 4096])[:, None]
    tau = np.geomspace(60, 7200, 50)[None, :]
    g = ms.goodput(ms.cluster("dgx-h100"), checkpoint=10.0, interval_s=tau, nodes=nodes)
    assert g.ratio.shape == (4, 50) and np.all(np.diff(g.ratio, axis=0) < 0)
    one = ms.goodput(ms.cluster("dgx-h100", nodes=1024), checkpoint=10.0, interval_s=float(tau[0, 7]))
    assert g.ratio[2, 7] == pytest.approx(one.ratio)
    assert ms.cluster_mtbf_h(ms.cluster("dgx-h100"), nodes=np.array([1, 2])).shape == (2,)


# --- bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), np.array([5.0, 0.0])])
def test_bad_durations(bad):
    with pytest.raises(ValueError, match="checkpoint_s"):
        ms.young_interval_s(bad, 3600.0)
    with pytest.raises(ValueError, match="mtbf_s"):
        ms.daly_interval_s(10.0, bad)
    with pytest.raises(ValueError, match="interval_s"):
        ms.ettr(bad, 1.0, 3600.0)


def test_bad_cluster_inputs():
    c = ms.cluster("dgx-h100")
    with pytest.raises(ValueError, match="nodes"):
        ms.cluster_mtbf_h(c, nodes=0)
    with pytest.raises(ValueError, match="node_failures_per_day"):
        ms.cluster_mtbf_h(c, node_failures_per_day=-1)
    with pytest.raises(ValueError, match="hours"):
        ms.p_any_failure(c, hours=-2)
    with pytest.raises(ValueError, match="restart_s"):
        ms.daly_interval_s(10.0, 100.0, restart_s=-1)
    with pytest.raises(ValueError, match="checkpoint"):
        ms.goodput(c)
    with pytest.raises(ValueError, match="step_s"):
        ms.goodput(c, step_s=0, checkpoint=1.0)
    with pytest.raises(ValueError, match="lag_s"):
        ms.lost_work_s(10.0, 1.0, lag_s=-1)


def test_observations_are_sourced():
    for o in rel.observations().values():
        assert o.source and o.date and o.mtbf_h > 0
    assert math.isclose(rel.observations()["meta-rsc-1"].node_failures_per_day, 6.5e-3)


# --- downtime per failure, term by term ----------------------------------------------------------
def test_downtime_worked_number_and_sources():
    d = rel.downtime(interval_s=1800.0)
    assert (d.detection_s, d.replacement_s, d.rendezvous_s, d.restore_s) == (600.0, 300.0, 60.0, 0.0)
    assert d.restart_s == 960.0 and d.recomputation_s == 900.0 and d.total_s == 1860.0
    assert 5 * 60 <= d.restart_s <= 20 * 60          # inside the 5-20 min of Kokolis et al.
    assert list(d.terms()) == list(rel.DOWNTIME_TERMS) and sum(d.terms().values()) == d.total_s
    defaults = rel.downtime_defaults()
    assert not defaults["detection"]["choice"] and "10 minutes for NCCL" in defaults["detection"]["source"]
    assert defaults["replacement"]["choice"] and "SlurmdTimeout" in defaults["replacement"]["source"]
    assert defaults["rendezvous"]["choice"] and "last_call_timeout" in defaults["rendezvous"]["source"]
    assert rel.RESTART_S == 600.0                      # the round figure the notebooks use is unchanged
    assert "per failure" in str(d)


def test_downtime_takes_restore_and_recomputation_from_a_checkpoint():
    k = ms.checkpoint("llama-3-70b", ms.cluster("dgx-h100", nodes=128), tp=8, pp=4, strategy="async")
    d = rel.downtime(k)
    assert d.restore_s == k.restore_s
    assert d.recomputation_s == pytest.approx((k.interval_s + k.stall_s) / 2 + k.lag_s)
    assert d.restart_s + d.restore_s + k.lag_s == pytest.approx(
        ms.checkpoint("llama-3-70b", ms.cluster("dgx-h100", nodes=128), tp=8, pp=4, strategy="async",
                      restart_s=d.restart_s).downtime_s)
    fast = rel.downtime(k, detection_s=30.0, restore_s=0.0)
    assert fast.total_s == pytest.approx(d.total_s - 570.0 - k.restore_s)


def test_downtime_is_vectorised_and_refuses_bad_terms():
    d = rel.downtime(interval_s=np.array([600.0, 1800.0]), detection_s=np.array([[30.0], [600.0]]))
    assert d.total_s.shape == (2, 2) and d.total_s[1, 1] == 1860.0 and "shape" in str(d)
    with pytest.raises(ValueError, match="interval_s"):
        rel.downtime()
    for kw, name in ((dict(detection_s=-1.0), "detection_s"), (dict(rendezvous_s=float("nan")), "rendezvous_s"),
                     (dict(restore_s=-2.0), "restore_s"), (dict(interval_s=0.0), "interval_s")):
        with pytest.raises(ValueError, match=name):
            rel.downtime(**{"interval_s": 600.0, **kw})
    with pytest.raises(ValueError, match="checkpoint"):
        rel.downtime(checkpoint=42.0)
