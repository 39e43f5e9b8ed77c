"""Reasoning depth on a serving deployment: identities, properties, bad input and the explorer."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mlsysim as ms

BASE = dict(model="llama-3-70b", hardware="h100", qps=10, price=2.99, tokens_per_step=512)


def test_service_is_built_on_serving_generate():
    s = ms.reasoning_service(**BASE, steps=4, tp=8, batch=32)
    g = ms.generate("llama-3-70b", "h100", prompt_tokens=1024, output_tokens=4 * 512 + 256, batch=32, tp=8)
    assert s.e2e_s == pytest.approx(g.e2e_s) and s.ttft_s == pytest.approx(g.ttft_s)
    x = 32 / g.e2e_s
    assert s.requests_per_s_per_replica == pytest.approx(x)
    assert s.replicas == math.ceil(10 / x) and s.gpus == 8 * s.replicas
    assert s.usd_per_year == pytest.approx(s.gpus * 2.99 * 8760)
    assert s.usd_per_request == pytest.approx(s.gpus * 2.99 / 36000)
    assert s.usd_per_million_tokens == pytest.approx(
        ms.usd_per_million_tokens(s.usd_per_hour, 10 * s.output_tokens))
    assert 0 < s.utilization <= 1
    assert "cost per year" in str(s) and "<table>" in s._repr_html_()


def test_default_batch_is_the_largest_that_fits():
    s = ms.reasoning_service(**BASE, steps=8, tp=4)
    kv = ms.max_batch("llama-3-70b", "h100", context_tokens=1024 + 8 * 512 + 256, tp=4)
    assert s.batch <= min(kv, ms.reasoning.MAX_BATCH)
    with pytest.raises(ms.InfeasibleError):
        ms.generate("llama-3-70b", "h100", prompt_tokens=1024, output_tokens=8 * 512 + 256, batch=s.batch + 1,
                    tp=4)



def test_max_num_seqs_caps_the_batch_in_scalar_and_sweep_calls():
    """The server's limit on running requests: 256 by default (vLLM's V0 engine); a larger limit
    (vLLM's V1 engine sets 1,024 on an H100) lets the batch grow to what the KV cache holds."""
    assert ms.reasoning.MAX_BATCH == 256
    capped = ms.reasoning_service(**BASE, steps=8, tp=8)
    kv = ms.max_batch("llama-3-70b", "h100", context_tokens=1024 + 8 * 512 + 256, tp=8)
    assert kv > 256 and capped.batch == 256
    wide = ms.reasoning_service(**BASE, steps=8, tp=8, max_num_seqs=1024)
    assert 256 < wide.batch <= min(kv, 1024) and wide.gpus <= capped.gpus
    small = ms.reasoning_service(**BASE, steps=8, tp=8, max_num_seqs=16)
    assert small.batch == 16 and small.gpus >= capped.gpus
    sweep = ms.reasoning_service(**BASE, steps=np.array([0.0, 8.0]), tp=8, max_num_seqs=1024)
    assert sweep.batch[1] == wide.batch and sweep.gpus[1] == wide.gpus
    r = ms.routing("llama-3-8b", "llama-3-70b", "h100", qps=10, fraction_small=0.0, price=2.99, steps_large=8,
                   tokens_per_step=512, max_num_seqs=1024)
    assert r.large.batch == ms.reasoning_service(**BASE, steps=8, max_num_seqs=1024).batch


@pytest.mark.parametrize("bad", [0, -1, 2.5, np.array([256, 1024]), "256"])
def test_max_num_seqs_must_be_one_whole_number(bad):
    with pytest.raises(ValueError, match="max_num_seqs"):
        ms.reasoning_service(**BASE, steps=8, max_num_seqs=bad)

def test_cheapest_tp_is_chosen():
    auto = ms.reasoning_service(**BASE, steps=8)
    for tp in (2, 4, 8):
        assert auto.gpus <= ms.reasoning_service(**BASE, steps=8, tp=tp).gpus


def test_latency_target_is_met_and_costs_more():
    free = ms.reasoning_service(**BASE, steps=8)
    held = ms.reasoning_service(**BASE, steps=8, latency_slo_s=60)
    assert held.e2e_s <= 60 < free.e2e_s and held.gpus > free.gpus
    with pytest.raises(ms.InfeasibleError, match="within"):
        ms.reasoning_service(**BASE, steps=16, latency_slo_s=60)


def test_array_sweep_matches_scalar_calls_and_marks_infeasible():
    ks = np.array([0.0, 4.0, 8.0, 16.0])
    v = ms.reasoning_service(**BASE, steps=ks, latency_slo_s=60)
    assert list(v.feasible) == [True, True, True, False] and "latency" in v.reason
    assert np.isnan(v.usd_per_year[3])
    for i, k in enumerate(ks[:3]):
        s = ms.reasoning_service(**BASE, steps=k, latency_slo_s=60)
        assert v.usd_per_year[i] == pytest.approx(s.usd_per_year) and v.tp[i] == s.tp


def test_past_a_few_steps_cost_grows_faster_than_tokens():
    # the KV cache of long reasoning crowds the batch: cost per generated token rises
    s = ms.reasoning_service(**BASE, steps=np.array([4.0, 16.0, 32.0]))
    assert s.usd_per_year[2] / s.usd_per_year[0] > s.output_tokens[2] / s.output_tokens[0]
    assert np.all(np.diff(s.usd_per_million_tokens) > 0) and np.all(np.diff(s.batch) < 0)


def test_routing_splits_the_load():
    r = ms.routing("llama-3-8b", "llama-3-70b", "h100", qps=10, fraction_small=0.7, price=2.99, steps_large=8,
                   tokens_per_step=512)
    assert r.small.qps == pytest.approx(7) and r.large.qps == pytest.approx(3)
    assert r.usd_per_year == pytest.approx(r.small.usd_per_year + r.large.usd_per_year)
    assert r.gpus == r.small.gpus + r.large.gpus and "small model" in str(r)
    all_large = ms.routing("llama-3-8b", "llama-3-70b", "h100", qps=10, fraction_small=0.0, price=2.99,
                           steps_large=8, tokens_per_step=512)
    assert all_large.small.gpus == 0
    assert all_large.usd_per_year == pytest.approx(ms.reasoning_service(**BASE, steps=8).usd_per_year)


def test_cloud_offer_must_rent_the_same_device():
    s = ms.reasoning_service(**{**BASE, "price": "lambda-h100"}, steps=0)
    assert s.usd_per_gpu_hour == pytest.approx(2.99)
    with pytest.raises(ValueError, match="rents H100"):
        ms.reasoning_service(**{**BASE, "price": "aws-p5", "hardware": "a100-80gb"})


@settings(max_examples=15, deadline=None)
@given(st.integers(min_value=0, max_value=12), st.integers(min_value=1, max_value=4))
def test_more_reasoning_never_costs_less(k, dk):
    a = ms.reasoning_service(**BASE, steps=k)
    b = ms.reasoning_service(**BASE, steps=k + dk)
    assert b.usd_per_year >= a.usd_per_year
    # a longer request is slower on the same replica; past the point where its KV cache needs a
    # wider replica (tp 4 -> 8 for 5 steps), that replica's faster passes may serve it sooner
    assert b.e2e_s > a.e2e_s or b.tp > a.tp


@settings(max_examples=15, deadline=None)
@given(st.floats(min_value=0.5, max_value=50.0), st.floats(min_value=1.1, max_value=4.0))
def test_more_load_never_costs_less(qps, k):
    a = ms.reasoning_service(**{**BASE, "qps": qps}, steps=2)
    b = ms.reasoning_service(**{**BASE, "qps": qps * k}, steps=2)
    assert b.gpus >= a.gpus


@pytest.mark.parametrize("kw, match", [
    (dict(steps=-1), "steps"), (dict(steps=1.5), "steps"), (dict(tokens_per_step=0), "tokens_per_step"),
    (dict(qps=-1), "qps"), (dict(price=-2.0), "price"), (dict(price="aws-p99"), "cloud offer"),
    (dict(latency_slo_s=0), "latency_slo_s"), (dict(max_utilization=1.5), "max_utilization"),
    (dict(answer_tokens=1, steps=0), "at least 2 tokens"),
])
def test_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        ms.reasoning_service(**{**BASE, **kw})


def test_bad_routing_fraction_and_unfit_batch():
    with pytest.raises(ValueError, match="fraction_small"):
        ms.routing("llama-3-8b", "llama-3-70b", "h100", qps=10, fraction_small=1.2, price=2.99)
    with pytest.raises(ms.InfeasibleError, match="cannot serve"):
        ms.reasoning_service(**BASE, steps=8, tp=2, batch=200)


def test_reasoning_explorer():
    ex = ms.widgets.reasoning_explorer()
    k, s = ex.result
    assert k == 8 and "cost per year" in ex.summary_text()
    before = s.usd_per_year[8]
    ex.controls["slo"].value = 60
    assert ex.result[1].usd_per_year[8] > before
    ex.controls["steps"].value = 20
    assert isinstance(ex.result, ms.InfeasibleError) and "not feasible" in ex.summary_text()
    ex.controls["slo"].value = 0
    assert ex.error == "" and ex.result[0] == 20
