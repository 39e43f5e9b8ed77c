"""Weight streaming and weights-resident execution on wafer-scale parts (mlsysim.wafer)."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mlsysim as ms
from mlsysim.errors import continuous_counts

cs3 = ms.hardware("cs-3")
DENSE = ["llama-3-8b", "llama-2-7b", "gpt-2", "gpt-2-xl"]


def ws(model="llama-3-8b", hw="cs-3", **kw):
    kw.setdefault("seq_len", 1024 if model.startswith("gpt-2") else 2048)
    kw.setdefault("recompute", "full")
    return ms.weight_streaming(model, hw, **kw)


# --- registry entries --------------------------------------------------------------
def test_wafer_entries_are_dense_and_per_direction():
    assert cs3.peak("fp16") == pytest.approx(900_000 * 8 * 2 * 1.1e9)
    assert ms.hardware("cs-2").peak("fp16") == pytest.approx(850_000 * 4 * 2 * 1.1e9)
    for name in ("cs-2", "cs-3"):
        h = ms.hardware(name)
        assert h.host_link_Bps * 8 == pytest.approx(1.2e12)       # 12 x 100 GbE, each direction
        assert h.kind == "wafer" and h.memory_B == h.sram_B
        assert "125" not in str(h.peak_flops)                     # the vendor figure counts sparsity


# --- weight streaming ------------------------------------------------------------------
def test_streaming_ridge_and_crossover_tokens():
    r = ws(batch=4)
    assert r.ridge == pytest.approx(cs3.peak("fp16") / cs3.host_link_Bps)
    # dense: compute-bound from ~ P * b / (2 R) tokens (attention adds a little work per token)
    tokens = r.compute_bound_batch * 2048
    assert tokens == pytest.approx(cs3.peak("fp16") * 2 / (2 * cs3.host_link_Bps), rel=0.03)


@pytest.mark.parametrize("model", DENSE)
def test_forward_sweep_is_balanced_at_the_compute_bound_batch(model):
    b = float(ws(model, hw="h100").compute_bound_batch)     # PCIe offload: reachable batches
    with continuous_counts():                                # the crossover lies between whole batches
        at = ws(model, hw="h100", batch=b)
        below, above = ws(model, hw="h100", batch=0.8 * b), ws(model, hw="h100", batch=1.25 * b)
    assert at.forward_compute_s == pytest.approx(at.forward_stream_s, rel=1e-6)
    assert below.forward_compute_s < below.forward_stream_s and below.bound in ("injection", "mixed")
    assert above.bound == "compute"


def test_moe_crossover_is_a_fixed_point():
    roomy = ms.scale_hardware(cs3, capacity=10)         # only the streaming balance is tested here
    r = ws("mixtral-8x7b", hw=roomy, batch=1)
    with continuous_counts():
        at = ws("mixtral-8x7b", hw=roomy, batch=float(r.compute_bound_batch))
    assert at.forward_compute_s == pytest.approx(at.forward_stream_s, rel=1e-3)
    assert r.compute_bound_batch > 3 * ws("llama-3-8b", batch=1).compute_bound_batch  # 2 of 8 experts work


def test_sram_limit_is_the_largest_batch_that_fits():
    r = ws("llama-2-7b", seq_len=4096, batch=1)
    n = float(r.max_batch)
    assert ws("llama-2-7b", seq_len=4096, batch=n).sram_needed_B <= cs3.memory_B
    with pytest.raises(ms.InfeasibleError, match="SRAM"):
        ws("llama-2-7b", seq_len=4096, batch=n + 1)


def test_reachability_verdict():
    big = ws("llama-3-70b", batch=1)
    assert not big.reachable and "not reachable" in big.verdict() and big.bound == "injection"
    small = ws("gpt-2-xl", batch=1)
    assert small.reachable and ": reachable" in small.verdict()
    with continuous_counts():
        assert ws("gpt-2-xl", batch=float(small.compute_bound_batch) + 1).bound == "compute"
    with pytest.raises(ValueError, match="batch"):
        ws("gpt-2-xl", batch=float(small.compute_bound_batch) + 1)       # outside it, a batch is whole


def test_mixed_bound_when_only_the_backward_sweep_is_compute_bound():
    r = ws("llama-2-7b", seq_len=4096, batch=22)         # the forward sweep has half the backward's work
    assert r.forward_compute_s < r.forward_stream_s and r.backward_compute_s > r.backward_stream_s
    assert r.bound == "mixed"
    assert ws("llama-2-7b", seq_len=4096, batch=1).bound == "injection"


def test_recomputation_trades_compute_for_sram():
    keep, redo = ws(batch=2, recompute="none"), ws(batch=2, recompute="full")
    assert redo.sram_needed_B < keep.sram_needed_B and redo.max_batch > keep.max_batch
    assert redo.backward_compute_s == pytest.approx(1.5 * keep.backward_compute_s)
    assert redo.flops == pytest.approx(4 / 3 * keep.flops) and redo.model_flops == keep.model_flops


def test_step_time_is_the_sum_of_the_two_sweeps():
    r = ws(batch=8)
    assert r.time_s == pytest.approx(max(r.forward_compute_s, r.forward_stream_s)
                                     + max(r.backward_compute_s, r.backward_stream_s))
    assert 0 < r.utilization <= 1
    inf = ws(batch=8, phase="prefill", recompute="none")
    assert inf.time_s == pytest.approx(max(inf.forward_compute_s, inf.forward_stream_s))
    assert inf.backward_compute_s == 0.0


def test_data_parallel_wafers_multiply_throughput_not_step_time():
    one, four = ws(batch=8), ws(batch=8, wafers=4)
    assert four.time_s == one.time_s and four.tokens_per_s == pytest.approx(4 * one.tokens_per_s)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(DENSE), st.floats(1.0, 20.0), st.floats(1.01, 50.0))
def test_faster_injection_is_never_slower(model, batch, k):
    with continuous_counts():
        base = ws(model, hw="cs-2", batch=batch, recompute="full")
        fast = ws(model, hw=ms.scale_hardware("cs-2", host_link=k), batch=batch, recompute="full")
    assert fast.time_s <= base.time_s
    # W(b) grows with the embedding rows the tokens touch, so the crossover falls at least as 1/k
    assert 0 < fast.compute_bound_batch <= base.compute_bound_batch / k * (1 + 1e-12)


def test_decode_by_streaming_is_hopeless():
    r = ws("llama-3-70b", phase="decode", recompute="none", batch=1, context_tokens=1024)
    assert r.bound == "injection"
    assert r.time_s == pytest.approx(r.weight_bytes / cs3.host_link_Bps)   # every weight, every token
    assert r.time_s > 0.5


def test_arrays_give_nan_and_a_mask_where_sram_runs_out():
    r = ws(batch=[1, 8, 64])
    assert list(r.feasible) == [True, True, False] and np.isnan(r.time_s[2]) and r.reason
    assert list(r.bound) == ["injection", "injection", "infeasible"]


def test_weight_streaming_bad_input():
    with pytest.raises(ms.UnknownNameError, match="phase"):
        ws(phase="inference")
    with pytest.raises(ms.UnknownNameError, match="recomputation"):
        ws(recompute="selective")
    with pytest.raises(ms.MlsysimError, match="training only"):
        ws(phase="prefill", recompute="full")
    with pytest.raises(ms.MlsysimError, match="wafers"):
        ws(wafers=0)
    with pytest.raises(ms.MlsysimError, match="batch"):
        ws(batch=0)
    with pytest.raises(ms.MlsysimError, match="Transformers"):
        ms.weight_streaming("resnet-50", "cs-3")
    no_link = dataclasses.replace(cs3, host_link_Bps=None)
    with pytest.raises(ms.MlsysimError, match="injection link"):
        ws(hw=no_link)
    with pytest.raises(ms.InfeasibleError, match="external memory"):
        ws("megatron-1t", batch=1, external_memory_B=1.5e12)
    with pytest.raises(ms.UnknownNameError, match="precision"):
        ws(precision="bf16")                      # the registry gives the wafer an fp16 peak only


# --- weights resident ----------------------------------------------------------------------
@pytest.mark.parametrize("model, wafers", [("llama-3-8b", 1), ("llama-3-70b", 4), ("llama-3.1-405b", 19)])
def test_wafers_needed(model, wafers):
    assert ms.wafers_needed(model, "cs-3") == wafers
    assert ms.weights_resident(model, "cs-3").wafers == wafers


def test_pipeline_step_time():
    r = ms.weights_resident("llama-3-70b", "cs-3", batch=4, context_tokens=1024)
    one = ms.roofline("llama-3-70b", ms.scale_hardware(cs3, capacity=4), batch=4, context_tokens=1024,
                      precision="fp16")
    assert r.time_s == pytest.approx(80 / 4 * one.time_s + r.transfer_s)
    assert r.transfer_s == pytest.approx(3 * 4 * 8192 * 2 / cs3.host_link_Bps)
    assert r.tokens_per_s == pytest.approx(4 / r.time_s)
    assert r.in_flight == min(80, r.max_batch // 4)
    assert r.pipeline_tokens_per_s == pytest.approx(r.in_flight * r.tokens_per_s)


def test_resident_capacity_limits_the_batch():
    r = ms.weights_resident("llama-3-70b", "cs-3", batch=1, context_tokens=8192)
    n = int(r.max_batch)
    ms.weights_resident("llama-3-70b", "cs-3", batch=n, context_tokens=8192, wafers=r.wafers)
    with pytest.raises(ms.InfeasibleError, match="x Cerebras-WSE-3"):
        ms.weights_resident("llama-3-70b", "cs-3", batch=n + 1, context_tokens=8192, wafers=r.wafers)
    arr = ms.weights_resident("llama-3-70b", "cs-3", batch=[1, n + 1], context_tokens=8192, wafers=r.wafers)
    assert list(arr.feasible) == [True, False] and np.isnan(arr.time_s[1])


def test_weights_resident_bad_input():
    with pytest.raises(ms.MlsysimError, match="wafer-scale"):
        ms.weights_resident("llama-3-8b", "h100")
    with pytest.raises(ms.InfeasibleError, match="4 x"):
        ms.weights_resident("llama-3-70b", "cs-3", wafers=2)
    with pytest.raises(ms.MlsysimError, match="wafers"):
        ms.weights_resident("llama-3-8b", "cs-3", wafers=0)
    with pytest.raises(ms.MlsysimError, match="Transformers"):
        ms.weights_resident("resnet-50", "cs-3")


def test_results_print():
    text = str(ws(batch=4))
    assert "streaming ridge" in text and "compute-bound batch" in text and "<table>" in ws()._repr_html_()
    text = str(ms.weights_resident("llama-3-70b"))
    assert "pipeline stages" in text and "4 x Cerebras-WSE-3" in text
