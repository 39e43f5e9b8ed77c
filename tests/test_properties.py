"""Property tests: monotonicity and identities that must hold for any input."""
import dataclasses

import numpy as np
from hypothesis import given, settings, strategies as st

import mlsysim as ms

MODELS = ["llama-3-8b", "llama-2-7b", "mixtral-8x7b", "gpt-2", "resnet-50", "mobilenetv2"]
DEVICES = ["a100-80gb", "h100", "h200", "b200", "l4", "mi300x"]
batches = st.integers(min_value=1, max_value=512)
scales = st.floats(min_value=1.01, max_value=100.0)


def _scaled(dev, bw=1.0, peak=1.0):
    h = ms.hardware(dev)
    return dataclasses.replace(h, name=h.name + "'", memory_bw_Bps=h.memory_bw_Bps * bw,
                               peak_flops={p: v * peak for p, v in h.peak_flops.items()}, memory_B=1e15)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(DEVICES), batches, scales)
def test_more_bandwidth_is_never_slower(model, dev, b, k):
    slow, fast = _scaled(dev), _scaled(dev, bw=k)
    assert ms.roofline(model, fast, batch=b).time_s <= ms.roofline(model, slow, batch=b).time_s


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(DEVICES), batches, scales)
def test_more_flops_is_never_slower(model, dev, b, k):
    assert ms.roofline(model, _scaled(dev, peak=k), batch=b).time_s <= \
        ms.roofline(model, _scaled(dev), batch=b).time_s


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(DEVICES), batches, st.integers(1, 512))
def test_more_batch_never_lowers_step_time(model, dev, b, extra):
    h = _scaled(dev)
    assert ms.roofline(model, h, batch=b + extra).time_s >= ms.roofline(model, h, batch=b).time_s


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(DEVICES), st.sampled_from(["bf16", "fp8", "int8"]))
def test_ridge_is_peak_over_bandwidth(dev, precision):
    h = ms.hardware(dev)
    if precision not in h.peak_flops:
        return
    r = ms.roofline("llama-3-8b", h, batch=1, precision=precision)
    assert np.isclose(r.ridge, h.peak(precision) / h.memory_bw_Bps)
    assert np.isclose(h.ridge(precision), h.peak(precision) / h.memory_bw_Bps)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(DEVICES), batches)
def test_time_is_the_larger_of_the_two_terms_and_bound_agrees(model, dev, b):
    r = ms.roofline(model, _scaled(dev), batch=b)
    assert r.time_s == max(r.compute_s, r.memory_s)
    assert (r.bound == "compute") == (r.intensity >= r.ridge)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 4000), st.integers(1, 64))
def test_kv_traffic_linear_in_context_and_batch(c, b):
    r1 = ms.roofline("llama-3-8b", _scaled("h100"), batch=b, context_tokens=c)
    r2 = ms.roofline("llama-3-8b", _scaled("h100"), batch=2 * b, context_tokens=c)
    assert np.isclose(r2.kv_bytes, 2 * r1.kv_bytes)


def test_vectorised_equals_scalar_calls():
    b = np.array([1, 3, 17, 300])
    vec = ms.roofline("llama-3-8b", "h100", batch=b, context_tokens=512).time_s
    one = [ms.roofline("llama-3-8b", "h100", batch=int(x), context_tokens=512).time_s for x in b]
    assert np.allclose(vec, one)
