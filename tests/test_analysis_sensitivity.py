"""Elasticities, hardware perturbation and inverse design (mlsysim.sensitivity)."""
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mlsysim as ms

DEVICES = ["a100-80gb", "h100", "h200", "b200", "mi300x", "l4"]
h100 = ms.hardware("h100")


def specs(solver=ms.roofline, workload="llama-3-8b", hw="h100", **kw):
    return ms.hardware_sensitivity(solver, workload, hw, **kw)


# --- the physics the elasticities must show ----------------------------------------
@pytest.mark.parametrize("dev", DEVICES)
def test_memory_bound_decode_has_elasticity_minus_one_to_bandwidth_and_zero_to_flops(dev):
    s = specs(hw=dev, inputs={"batch": 1})
    assert s.bound == "memory"
    assert s["bandwidth"].elasticity == pytest.approx(-1.0, abs=1e-9)
    assert s["peak"].elasticity == pytest.approx(0.0, abs=1e-9)
    assert s["capacity"].elasticity == 0.0
    assert s.most_influential == "bandwidth"


@pytest.mark.parametrize("dev", DEVICES)
def test_prefill_is_the_reverse(dev):
    s = specs(hw=dev, phase="prefill", seq_len=2048)
    assert s.bound == "compute"
    assert s["peak"].elasticity == pytest.approx(-1.0, abs=1e-9)
    assert s["bandwidth"].elasticity == pytest.approx(0.0, abs=1e-9)
    assert s.most_influential == "peak"


def test_batch_elasticity_of_decode_is_zero_when_memory_bound_and_one_when_compute_bound():
    assert specs(inputs={"batch": 1})["batch"].elasticity == pytest.approx(0.0, abs=1e-3)
    assert specs(inputs={"batch": 4096})["batch"].elasticity == pytest.approx(1.0, abs=1e-3)


def test_log_differences_are_exact_for_power_laws_whatever_the_step():
    for h in (0.01, 0.1, 0.5):
        s = ms.sensitivity(lambda x, y: 3.0 * x ** 2 * y ** -0.5, {"x": 2.0, "y": 7.0}, rel_step=h)
        assert s["x"].elasticity == pytest.approx(2.0, rel=1e-12)
        assert s["y"].elasticity == pytest.approx(-0.5, rel=1e-12)
        assert not s["x"].kink and s.bound == ""


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["llama-3-8b", "llama-2-7b", "mixtral-8x7b", "gpt-2"]), st.sampled_from(DEVICES),
       st.integers(1, 2048))
def test_time_is_homogeneous_of_degree_minus_one_in_peak_and_bandwidth(model, dev, batch):
    """Scaling P and B together by k scales T by 1/k, so e_P + e_B = -1 away from a kink."""
    try:
        s = specs(workload=model, hw=dev, specs=("peak", "bandwidth"), inputs={"batch": batch})
    except ms.InfeasibleError:
        return
    if s["peak"].kink or s["bandwidth"].kink:   # within ±10 % of the ridge: one-sided values differ
        assert s["peak"].up != s["peak"].down
        return
    assert s["peak"].elasticity + s["bandwidth"].elasticity == pytest.approx(-1.0, abs=1e-9)


def test_kink_at_the_balanced_point_reports_both_sides():
    b = ms.crossover_batch("llama-3-8b", "h100")          # first compute-bound batch
    s = specs(inputs={"batch": b})
    peak, bw = s["peak"], s["bandwidth"]
    assert peak.kink and bw.kink and "kink" in peak.note
    assert peak.down == pytest.approx(-1.0, abs=0.01)      # slower compute: compute-bound, -1
    assert peak.up > -0.1                                  # faster compute: memory binds, ~0
    assert bw.down < -0.9 and bw.up == pytest.approx(0.0, abs=1e-9)
    assert "below" in peak.shown() and "above" in peak.shown()
    assert peak.magnitude == pytest.approx(1.0, abs=0.01)


def test_kink_found_without_bound_labels_from_the_one_sided_values():
    s = ms.sensitivity(lambda x: np.maximum(1.0 / x, 1.0), {"x": 1.0})
    assert s["x"].kink and s["x"].down == pytest.approx(-1.0) and s["x"].up == pytest.approx(0.0)


# --- infeasible and bad input --------------------------------------------------------
def test_infeasible_base_configuration_is_an_error_not_zeros():
    with pytest.raises(ms.InfeasibleError, match="infeasible"):
        specs(workload="llama-3-70b", hw="h100")


def test_capacity_cliff_leaves_one_side_undefined_and_says_so():
    need = ms.roofline("llama-3-8b", "h100", batch=1, context_tokens=2048).footprint_B
    tight = dataclasses.replace(h100, memory_B=need * 1.05)      # fits, but not with 10 % less
    s = specs(hw=tight, inputs={"batch": 1}, context_tokens=2048)
    cap = s["capacity"]
    assert math.isnan(cap.down) and math.isnan(cap.low) and cap.up == 0.0
    assert cap.note == "infeasible at -10%"


@pytest.mark.parametrize("inputs, match", [
    ({}, "non-empty"), ({"x": 0.0}, "x"), ({"x": -1.0}, "x"), ({"x": float("nan")}, "x"),
    ({"x": [1.0, 2.0]}, "one number")])
def test_bad_inputs(inputs, match):
    with pytest.raises(ms.MlsysimError, match=match):
        ms.sensitivity(lambda x: x, inputs)


@pytest.mark.parametrize("h", [0, -0.1, 0.6, float("nan")])
def test_bad_rel_step(h):
    with pytest.raises(ms.MlsysimError, match="rel_step"):
        ms.sensitivity(lambda x: x, {"x": 1.0}, rel_step=h)


def test_bad_solver_or_output():
    with pytest.raises(ms.MlsysimError, match="callable"):
        ms.sensitivity(3, {"x": 1.0})
    with pytest.raises(ms.MlsysimError, match="no field 'speed'"):
        ms.sensitivity(lambda batch: ms.roofline("llama-3-8b", "h100", batch=batch), {"batch": 1}, output="speed")
    with pytest.raises(ms.MlsysimError, match="one value per input point"):
        ms.sensitivity(lambda x: np.ones((2, 1)) * x, {"x": 1.0})
    with pytest.raises(ms.MlsysimError, match="positive"):
        ms.sensitivity(lambda x: -x, {"x": 1.0})


def test_bad_hardware_specs():
    with pytest.raises(ms.UnknownNameError, match="Did you mean: bandwidth"):
        specs(specs=("bandwith",))
    with pytest.raises(ms.MlsysimError, match="given twice"):
        specs(inputs={"batch": 1}, batch=2)
    with pytest.raises(ms.MlsysimError, match="scale-up link"):
        specs(hw="apple-m2-ultra", specs=("link",))


def test_scalar_loop_gives_the_same_elasticities():
    def fn(peak, batch):
        return ms.roofline("llama-3-8b", ms.scale_hardware(h100, peak=peak), batch=batch)
    a = ms.sensitivity(fn, {"peak": 1.0, "batch": 64.0})
    b = ms.sensitivity(fn, {"peak": 1.0, "batch": 64.0}, vectorized=False)
    for name in ("peak", "batch"):
        assert a[name].elasticity == pytest.approx(b[name].elasticity, rel=1e-12)
        assert a[name].kink == b[name].kink
    assert a.bound == b.bound == "memory"


def test_table_and_ranking():
    s = specs(inputs={"batch": 1})
    assert [it.name for it in s.ranked()][0] == "bandwidth"
    text = str(s)
    assert "3.35 TB/s" in text and "989 TFLOP/s" in text and "memory-bound" in text
    assert "<table>" in s._repr_html_()
    assert s.elasticities["bandwidth"] == pytest.approx(-1.0)
    with pytest.raises(ms.UnknownNameError):
        s["latency"]


def test_other_outputs_and_link_specs():
    s = specs(specs=("bandwidth",), output="tokens_per_s")
    assert s["bandwidth"].elasticity == pytest.approx(1.0)
    s = specs(specs=("link", "host_link"), inputs={"batch": 1})
    assert s["link"].elasticity == 0.0 and s["host_link"].elasticity == 0.0


# --- scale_hardware and array-valued hardware -------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.sampled_from(DEVICES), st.lists(st.floats(0.2, 5.0), min_size=1, max_size=5), st.integers(1, 512))
def test_array_valued_specs_broadcast_like_scalar_calls(dev, factors, batch):
    hw = ms.hardware(dev)
    many = ms.roofline("llama-3-8b", ms.scale_hardware(hw, peak=factors, bandwidth=factors[::-1]), batch=batch)
    for i, (p, b) in enumerate(zip(factors, factors[::-1])):
        one = ms.roofline("llama-3-8b", ms.scale_hardware(hw, peak=p, bandwidth=b), batch=batch)
        assert many.time_s[i] == pytest.approx(one.time_s, rel=1e-12)
        assert many.bound[i] == one.bound


def test_array_capacity_gives_a_feasibility_mask():
    r = ms.roofline("llama-3-8b", ms.scale_hardware("h100", capacity=[0.1, 1.0]), batch=1)
    assert list(r.feasible) == [False, True] and np.isnan(r.time_s[0]) and r.reason


def test_scale_hardware():
    h = ms.scale_hardware("h100", peak=2.0, bandwidth=0.5, capacity=3, link=2, host_link=4)
    assert h.peak("bf16") == 2 * h100.peak("bf16") and h.peak("fp8") == 2 * h100.peak("fp8")
    assert h.memory_bw_Bps == 0.5 * h100.memory_bw_Bps and h.memory_B == 3 * h100.memory_B
    assert h.scaleup_Bps == 2 * h100.scaleup_Bps and h.host_link_Bps == 4 * h100.host_link_Bps
    assert ms.scale_hardware(h100) is h100
    assert isinstance(ms.scale_hardware(h100, peak=[1.0, 2.0]).peak("bf16"), np.ndarray)
    with pytest.raises(ms.MlsysimError, match="bandwidth"):
        ms.scale_hardware(h100, bandwidth=0)
    with pytest.raises(ms.MlsysimError, match="peak"):
        ms.scale_hardware(h100, peak=[1.0, -1.0])


def test_hardware_records_keep_float_peaks_and_accept_arrays():
    assert isinstance(h100.peak("bf16"), float)
    h = dataclasses.replace(h100, peak_flops={"bf16": [1e15, 2e15]})
    assert list(h.peak("bf16")) == [1e15, 2e15]
    with pytest.raises(ms.MlsysimError, match="peak_flops"):
        dataclasses.replace(h100, peak_flops={"bf16": [1e15, 0.0]})


# --- inverse design ----------------------------------------------------------------------
targets = st.floats(min_value=1e-4, max_value=1.0)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(DEVICES), st.integers(1, 256), targets)
def test_inverse_bandwidth_round_trip(dev, batch, target):
    r0 = ms.roofline("llama-3-8b", ms.scale_hardware(dev, capacity=100), batch=batch)
    if r0.compute_s > target:
        with pytest.raises(ms.InfeasibleError, match="compute term alone"):
            ms.inverse_roofline("llama-3-8b", dev, target_s=target, batch=batch)
        return
    req = ms.inverse_roofline("llama-3-8b", dev, target_s=target, batch=batch)
    hw = ms.scale_hardware(dev, bandwidth=req.bandwidth_factor, capacity=100)
    assert ms.roofline("llama-3-8b", hw, batch=batch).time_s == pytest.approx(target, rel=1e-9)
    assert req.bandwidth_Bps == pytest.approx(req.bandwidth_factor * ms.hardware(dev).memory_bw_Bps)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(DEVICES), st.integers(128, 8192), targets)
def test_inverse_peak_round_trip_for_prefill(dev, seq, target):
    kw = dict(phase="prefill", seq_len=seq)
    r0 = ms.roofline("llama-3-8b", ms.scale_hardware(dev, capacity=100), **kw)
    if r0.memory_s > target:
        with pytest.raises(ms.InfeasibleError, match="memory term alone"):
            ms.inverse_roofline("llama-3-8b", dev, target_s=target, solve_for="peak", **kw)
        return
    req = ms.inverse_roofline("llama-3-8b", dev, target_s=target, solve_for="peak", **kw)
    hw = ms.scale_hardware(dev, peak=req.peak_factor, capacity=100)
    assert ms.roofline("llama-3-8b", hw, **kw).time_s == pytest.approx(target, rel=1e-9)


def test_inverse_uniform_speed_up_and_token_rate_targets():
    req = ms.inverse_roofline("llama-3-8b", "h100", target_s=1e-3, solve_for="both", batch=8)
    hw = ms.scale_hardware("h100", peak=req.peak_factor, bandwidth=req.bandwidth_factor)
    assert ms.roofline("llama-3-8b", hw, batch=8).time_s == pytest.approx(1e-3, rel=1e-12)
    req = ms.inverse_roofline("llama-3-8b", "h100", tokens_per_s=2000, batch=8)
    hw = ms.scale_hardware("h100", bandwidth=req.bandwidth_factor)
    assert ms.roofline("llama-3-8b", hw, batch=8).tokens_per_s == pytest.approx(2000, rel=1e-9)


def test_inverse_reports_capacity_and_arrays_of_targets():
    req = ms.inverse_roofline("llama-3-70b", "h100", target_s=[20e-3, 1e-6], batch=1)
    assert req.capacity_B == pytest.approx(ms.model("llama-3-70b").params * 2, rel=0.01) and not req.fits
    assert list(req.feasible) == [True, False] and np.isnan(req.bandwidth_Bps[1])
    assert "compute term alone" in req.reason
    traffic = ms.roofline("llama-3-70b", ms.scale_hardware("h100", capacity=2), batch=1).bytes
    assert req.bandwidth_Bps[0] == pytest.approx(traffic / 20e-3, rel=1e-12)


def test_inverse_bad_input():
    with pytest.raises(ms.MlsysimError, match="exactly one"):
        ms.inverse_roofline("llama-3-8b", "h100")
    with pytest.raises(ms.MlsysimError, match="exactly one"):
        ms.inverse_roofline("llama-3-8b", "h100", target_s=1, tokens_per_s=1)
    with pytest.raises(ms.UnknownNameError, match="solve for"):
        ms.inverse_roofline("llama-3-8b", "h100", target_s=1e-3, solve_for="capacity")
    with pytest.raises(ms.MlsysimError, match="target_s"):
        ms.inverse_roofline("llama-3-8b", "h100", target_s=-1)
    with pytest.raises(ms.MlsysimError, match="one configuration"):
        ms.inverse_roofline("llama-3-8b", "h100", target_s=1, batch=[1, 2])


@dataclasses.dataclass
class _WithOverhead:
    """A result whose time has a fixed term beside the max(): the closed form does not apply."""
    r: object
    overhead_s: float = 1e-3

    def __getattr__(self, name):
        return getattr(self.r, name)

    @property
    def time_s(self):
        return self.r.time_s + self.overhead_s


def _slow_solver(workload, hardware, **kw):
    return _WithOverhead(ms.roofline(workload, hardware, **kw))


def test_inverse_falls_back_to_bracketing_when_time_is_not_a_max():
    req = ms.inverse_roofline("llama-3-8b", "h100", target_s=3e-3, solver=_slow_solver, batch=1)
    hw = ms.scale_hardware("h100", bandwidth=req.bandwidth_factor)
    assert _slow_solver("llama-3-8b", hw, batch=1).time_s == pytest.approx(3e-3, rel=1e-8)
    with pytest.raises(ms.InfeasibleError, match="another term"):
        ms.inverse_roofline("llama-3-8b", "h100", target_s=0.9e-3, solver=_slow_solver, batch=1)


def test_solve_for_rising_and_falling_outputs():
    f = lambda batch: ms.roofline("llama-3-8b", "h100", batch=batch, context_tokens=1024)  # noqa: E731
    b = ms.solve_for(f, "batch", 5000.0, output="tokens_per_s", bracket=(1, 4096))
    with ms.errors.continuous_counts():                 # solve_for works on the relaxation of batch
        assert f(b).tokens_per_s == pytest.approx(5000.0, rel=1e-8)
    g = lambda bandwidth: ms.roofline("llama-3-8b", ms.scale_hardware(h100, bandwidth=bandwidth))  # noqa: E731
    k = ms.solve_for(g, "bandwidth", 2e-3)
    assert g(k).time_s <= 2e-3 and g(k).time_s == pytest.approx(2e-3, rel=1e-8)
    assert k == pytest.approx(ms.inverse_roofline("llama-3-8b", "h100", target_s=2e-3).bandwidth_factor,
                              rel=1e-8)


def test_solve_for_errors():
    g = lambda bandwidth: ms.roofline("llama-3-8b", ms.scale_hardware(h100, bandwidth=bandwidth))  # noqa: E731
    with pytest.raises(ms.InfeasibleError, match="another term"):
        ms.solve_for(g, "bandwidth", 1e-6)
    with pytest.raises(ms.MlsysimError, match="lower end"):
        ms.solve_for(g, "bandwidth", 10.0)
    with pytest.raises(ms.MlsysimError, match="bracket"):
        ms.solve_for(g, "bandwidth", 1e-3, bracket=(2, 1))
    with pytest.raises(ms.MlsysimError, match="target"):
        ms.solve_for(g, "bandwidth", 0.0)
    with pytest.raises(ms.MlsysimError, match="do not also pass"):
        ms.solve_for(g, "bandwidth", 1e-3, inputs={"bandwidth": 1})
    big = lambda batch: ms.roofline("llama-3-70b", "b200", batch=batch, context_tokens=8192)  # noqa: E731
    with pytest.raises(ms.InfeasibleError, match="tokens_per_s"):
        ms.solve_for(big, "batch", 1e6, output="tokens_per_s", bracket=(1, 4096))


# --- serving solvers (time = max() + communication + fixed overheads) -----------------------
def test_serving_decode_elasticities_are_diluted_by_fixed_costs():
    s = ms.hardware_sensitivity(ms.decode, "llama-3-8b", "h100", inputs={"batch": 64}, context_tokens=4096)
    r = ms.decode("llama-3-8b", "h100", batch=64, context_tokens=4096)
    assert s.bound == "memory"
    # T = T_mem + overhead: the local derivative is e_B = -T_mem / T; not a power law, so the
    # finite difference approaches it as the step shrinks
    assert s["bandwidth"].elasticity == pytest.approx(-r.memory_s / r.time_s, rel=1e-3)
    fine = ms.hardware_sensitivity(ms.decode, "llama-3-8b", "h100", specs=("bandwidth",), rel_step=0.001,
                                   inputs={"batch": 64}, context_tokens=4096)
    assert fine["bandwidth"].elasticity == pytest.approx(-r.memory_s / r.time_s, rel=1e-6)
    loop = ms.hardware_sensitivity(ms.decode, "llama-3-8b", "h100", specs=("bandwidth", "link"), batch=64,
                                   context_tokens=4096)          # hardware arrays only: point by point
    assert loop["bandwidth"].elasticity == pytest.approx(s["bandwidth"].elasticity, rel=1e-12)
    assert loop["link"].elasticity == 0.0 and loop.bound == "memory"


def test_inverse_with_serving_round_trips_by_bracketing():
    kw = dict(batch=64, context_tokens=4096)
    req = ms.inverse_roofline("llama-3-8b", "h100", target_s=10e-3, solver=ms.decode, **kw)
    hw = ms.scale_hardware("h100", bandwidth=req.bandwidth_factor)
    assert ms.decode("llama-3-8b", hw, **kw).time_s == pytest.approx(10e-3, rel=1e-8)
    assert "other terms" in str(req)
    req = ms.inverse_roofline("llama-3-70b", "h100", target_s=20e-3, solver=ms.decode, tp=4)
    hw = ms.scale_hardware("h100", bandwidth=req.bandwidth_factor)
    assert ms.decode("llama-3-70b", hw, tp=4).time_s == pytest.approx(20e-3, rel=1e-8)
    req = ms.inverse_roofline("llama-3-8b", "h100", target_s=0.1, solve_for="peak", solver=ms.prefill,
                              prompt_tokens=8192)
    hw = ms.scale_hardware("h100", peak=req.peak_factor)
    assert ms.prefill("llama-3-8b", hw, prompt_tokens=8192).time_s == pytest.approx(0.1, rel=1e-8)
    with pytest.raises(ms.InfeasibleError, match="another term"):
        ms.inverse_roofline("llama-3-8b", "h100", target_s=1e-3, solver=ms.decode, batch=512)


def test_predict_is_exact_within_a_regime_and_wrong_across_one():
    a100, b200 = ms.hardware("a100-80gb"), ms.hardware("b200")
    ratios = {"peak": b200.peak("bf16") / a100.peak("bf16"),
              "bandwidth": b200.memory_bw_Bps / a100.memory_bw_Bps}
    for kw, exact in [(dict(batch=1), True), (dict(batch=512, context_tokens=512), False)]:
        s = ms.hardware_sensitivity(ms.roofline, "llama-3-8b", a100, specs=("peak", "bandwidth"), **kw)
        t = ms.roofline("llama-3-8b", ["a100-80gb", "b200"], **kw).time_s
        assert bool(s.predict(ratios) == pytest.approx(t[1] / t[0], rel=1e-9)) is exact
    with pytest.raises(ms.MlsysimError, match="ratios"):
        s.predict({"peak": 0})
    with pytest.raises(ms.UnknownNameError):
        s.predict({"capacity": 2})
