"""Serving properties that must hold for any input (hypothesis)."""
import dataclasses

import numpy as np
from hypothesis import assume, given, settings, strategies as st

import mlsysim as ms

MODELS = ["llama-3-8b", "llama-2-7b", "mixtral-8x7b", "llama-3-70b", "deepseek-v3"]
DEVICES = ["a100-80gb", "h100", "h200", "b200", "mi300x"]


def _big(dev, bw=1.0):
    """A device with endless memory (so that every configuration fits) and scaled bandwidth."""
    h = ms.hardware(dev)
    return dataclasses.replace(h, name=h.name + "'", memory_bw_Bps=h.memory_bw_Bps * bw, memory_B=1e16)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.integers(0, 100_000), st.integers(1, 256), st.sampled_from([1, 2, 4, 8]))
def test_kv_linear_in_context_and_batch(model, c, b, tp):
    one = ms.kv_cache_bytes(model, c, batch=b, tp=tp)
    assert np.isclose(ms.kv_cache_bytes(model, 2 * c, batch=b, tp=tp), 2 * one)
    assert np.isclose(ms.kv_cache_bytes(model, c, batch=3 * b, tp=tp), 3 * one)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(DEVICES), st.integers(1, 512), st.integers(0, 30000),
       st.floats(1.01, 50.0), st.sampled_from([1, 2, 8]))
def test_decode_time_never_increases_with_bandwidth(model, dev, b, c, k, tp):
    assume(c < ms.model(model).max_context)
    slow = ms.decode(model, _big(dev), batch=b, context_tokens=c, tp=tp)
    fast = ms.decode(model, _big(dev, bw=k), batch=b, context_tokens=c, tp=tp)
    assert fast.time_s <= slow.time_s


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(DEVICES), st.integers(1, 512), st.integers(0, 30000),
       st.integers(1, 5000))
def test_decode_time_never_decreases_with_context(model, dev, b, c, extra):
    assume(c + extra < ms.model(model).max_context)
    h = _big(dev)
    assert ms.decode(model, h, batch=b, context_tokens=c + extra).time_s >= \
        ms.decode(model, h, batch=b, context_tokens=c).time_s


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.integers(0, 30000), st.integers(1, 64))
def test_more_tp_never_increases_per_gpu_weight_or_kv_bytes(model, c, b):
    assume(c < ms.model(model).max_context)
    h = _big("h100")
    tps = [t for t in (1, 2, 4, 8, 16) if ms.model(model).heads % t == 0]
    steps = [ms.decode(model, h, batch=b, context_tokens=c, tp=t) for t in tps]
    for a, z in zip(steps, steps[1:]):
        assert z.weights_B <= a.weights_B and z.weight_bytes <= a.weight_bytes
        assert z.kv_cache_B <= a.kv_cache_B and z.footprint_B <= a.footprint_B


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(MODELS), st.lists(st.integers(1, 4096), min_size=1, max_size=20),
       st.sampled_from([1, 2, 8, 16, 32, 64, 256, 1024, 4096]), st.sampled_from([4096, 8192]))
def test_paged_capacity_is_at_least_contiguous(model, lengths, block, max_tokens):
    # a block that divides the reservation never needs more slots than the reservation
    p = ms.paged_kv(model, _big("b200"), lengths=lengths, block_tokens=block, max_tokens=max_tokens)
    assert p.requests_paged >= p.requests_contiguous
    assert 0 <= p.waste_tokens < block and 0 <= p.fragmentation < 1


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 4096), min_size=1, max_size=20), st.integers(0, 8))
def test_smaller_blocks_never_hold_fewer_requests(lengths, log_block):
    small, large = 2 ** log_block, 2 ** (log_block + 1)
    a = ms.paged_kv("llama-3-8b", "h100", lengths=lengths, block_tokens=small, max_tokens=8192)
    b = ms.paged_kv("llama-3-8b", "h100", lengths=lengths, block_tokens=large, max_tokens=8192)
    assert a.requests_paged >= b.requests_paged


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(MODELS), st.integers(1, 2000), st.integers(2, 400), st.integers(1, 300))
def test_generate_equals_the_sum_of_its_steps(model, p, n, b):
    assume(p + n <= ms.model(model).max_context)
    h = _big("h100")
    g = ms.generate(model, h, prompt_tokens=p, output_tokens=n, batch=b)
    steps = ms.decode(model, h, batch=b, context_tokens=p + np.arange(n - 1.0)).time_s
    assert np.isclose(g.decode_s, np.sum(steps), rtol=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 16), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_accepted_tokens_grow_with_acceptance_and_stay_in_range(k, a1, a2):
    lo, hi = sorted((a1, a2))
    e_lo, e_hi = ms.expected_accepted_tokens(k, lo), ms.expected_accepted_tokens(k, hi)
    assert 1.0 <= e_lo <= e_hi + 1e-12 <= k + 1 + 1e-9


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(DEVICES), st.integers(1, 8192), st.integers(1, 4096),
       st.integers(1, 16), st.sampled_from([1, 2, 8]), st.integers(0, 4096))
def test_shape_aware_ttft_never_decreases_with_prompt_tokens(model, dev, p, extra, b, tp, c):
    """Tiles and waves only grow with the rows, so a longer prompt never prefills faster (default η)."""
    m = ms.model(model)
    assume(c + p + extra <= m.max_context)
    h = _big(dev)
    short = ms.prefill(model, h, prompt_tokens=p, batch=b, tp=tp, context_tokens=c)
    long = ms.prefill(model, h, prompt_tokens=p + extra, batch=b, tp=tp, context_tokens=c)
    assert short.gemm_shapes and long.time_s >= short.time_s * (1 - 1e-12)
    assert long.compute_s >= short.compute_s * (1 - 1e-12)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(MODELS), st.lists(st.integers(1, 4096), min_size=1, max_size=5),
       st.lists(st.integers(1, 32), min_size=1, max_size=3))
def test_shape_aware_prefill_sweep_equals_its_scalar_calls(model, prompts, batches):
    """A (device x batch x prompt) sweep broadcasts and matches the memoised scalar path entry by entry."""
    devices = ["a100-80gb", "h100"]
    p, b = np.array(prompts, float)[None, :], np.array(batches, float)[:, None]
    hs = [_big(d) for d in devices]
    v = ms.prefill(model, hs, prompt_tokens=p, batch=b)
    assert v.time_s.shape == (2, len(batches), len(prompts))
    for i, h in enumerate(hs):
        for j, bb in enumerate(batches):
            for k, pp in enumerate(prompts):
                s = ms.prefill(model, h, prompt_tokens=pp, batch=bb)
                assert v.time_s[i, j, k] == np.float64(s.time_s) or np.isclose(v.time_s[i, j, k], s.time_s,
                                                                                 rtol=1e-12)
                assert np.isclose(v.efficiency[i, j, k], s.efficiency, rtol=1e-12)
