"""Quantization: bytes, speed-up by regime, memory, literature table, bad input, explorer."""
import dataclasses
import importlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mlsysim as ms
from mlsysim.units import BYTES_PER_ELEMENT

qz = importlib.import_module("mlsysim.quantization")
LLMS = ["llama-2-7b", "llama-3-8b", "mixtral-8x7b", "gpt-2", "opt-13b"]
DEVICES = ["a100-80gb", "h100", "h200", "b200", "mi300x"]


def _big(dev):
    """The device with ample memory, so that properties are checked where every pass fits."""
    h = ms.hardware(dev)
    return dataclasses.replace(h, name=h.name + "'", memory_B=1e15)


# --- worked numbers ------------------------------------------------------------
def test_bytes_per_weight_with_group_scales():
    assert ms.weight_bytes_per_param("int4") == BYTES_PER_ELEMENT["int4"] == 0.5
    assert ms.weight_bytes_per_param("int4", group_size=128) == 0.5 + 2 / 128
    assert ms.weight_bytes_per_param("int4", 32, 4.0) * 8 == 5.0        # gpt-fast: 5 bits per weight
    assert 2 / ms.weight_bytes_per_param("int4", 128) == pytest.approx(3.879, abs=1e-3)   # Marlin's 3.87x


def test_decode_gains_the_byte_ratio():
    w8 = ms.quantized("llama-2-7b", "a100-80gb", "w8a16")
    w4 = ms.quantized("llama-2-7b", "a100-80gb", "w4a16")
    assert w8.bound == w4.bound == w8.baseline_bound == "memory"
    assert w8.speedup == pytest.approx(2.0, rel=0.002) and w4.speedup == pytest.approx(4.0, rel=0.002)
    assert w8.weight_ratio == pytest.approx(2.0) and w4.weight_ratio == pytest.approx(4.0)
    base = ms.roofline("llama-2-7b", "a100-80gb")
    assert w4.baseline_s == base.time_s and w4.baseline_weight_B == base.weight_bytes


def test_prefill_gains_only_with_a_faster_compute_peak():
    kw = dict(phase="prefill", seq_len=2048)
    assert ms.quantized("llama-3-8b", "h100", "w4a16", **kw).speedup == pytest.approx(1.0, abs=1e-9)
    assert ms.quantized("llama-3-8b", "h100", "w8a16", **kw).speedup == pytest.approx(1.0, abs=1e-9)
    for s in ["w8a8", "fp8"]:
        q = ms.quantized("llama-3-8b", "h100", s, **kw)
        assert q.bound == "compute" and q.speedup == pytest.approx(1978.9 / 989.4, rel=0.002)
    assert ms.quantized("llama-3-8b", "a100-80gb", "w8a8", **kw).speedup == pytest.approx(2.0, rel=0.002)


def test_group_scales_add_traffic_and_memory():
    plain = ms.quantized("llama-2-7b", "a100-80gb", "w4a16")
    grouped = ms.quantized("llama-2-7b", "a100-80gb", "w4a16", group_size=32, group_B=4.0)
    assert grouped.weight_B == pytest.approx(plain.weight_B * 1.25)      # 5 bits instead of 4
    assert grouped.time_s > plain.time_s
    assert grouped.footprint_B - plain.footprint_B == pytest.approx(ms.model("llama-2-7b").params / 32 * 4)


def test_fixed_overhead_is_amdahl():
    t0 = 3e-3
    q = ms.quantized("llama-2-7b", "a100-80gb", "w8a16", overhead_s=t0)
    ideal = ms.quantized("llama-2-7b", "a100-80gb", "w8a16")
    assert q.time_s == pytest.approx(ideal.time_s + t0) and q.baseline_s == pytest.approx(ideal.baseline_s + t0)
    assert 1 < q.speedup < ideal.speedup


def test_memory_and_what_newly_fits():
    bf16 = ms.quantized_footprint("llama-3-70b", "h100", "bf16", context_tokens=4096)
    int4 = ms.quantized_footprint("llama-3-70b", "h100", "w4a16", context_tokens=4096)
    m = ms.model("llama-3-70b")
    assert int4.weights_B == pytest.approx(m.params * 0.5) and round(int4.weights_B / 1e9, 1) == 35.3
    assert not bf16.fits and int4.fits and bf16.headroom_B < 0 < int4.headroom_B
    assert int4.kv_B == pytest.approx(4097 * m.kv_bytes_per_token("bf16"))
    assert int4.footprint_B == pytest.approx(int4.weights_B + int4.kv_B + int4.other_B)
    decode = ms.roofline("llama-3-70b", "h100", weight_precision="int4", context_tokens=4096)
    assert int4.footprint_B == pytest.approx(decode.footprint_B)
    many = ms.quantized_footprint("llama-3-70b", "h100", "w4a16", batch=np.arange(1, 100), context_tokens=4096)
    assert many.fits[0] and not many.fits[-1] and np.all(np.diff(many.fits.astype(int)) <= 0)


def test_cnn_inference_w8a8():
    q = ms.quantized("resnet-50", "a100-80gb", "w8a8", batch=256)
    assert q.phase == "inference" and q.speedup == pytest.approx(2.0, rel=0.01)
    assert ms.quantized_footprint("resnet-50", "a100-80gb", "w8a8").kv_B == 0


def test_precision_table_shows_missing_peaks_explicitly():
    t = ms.precision_table("h100")
    row = {r["format"]: r for r in t.rows}
    assert row["int4"]["H100-SXM dense peak"] == "no peak" and row["fp8"]["H100-SXM dense peak"] != "no peak"
    assert [r["format"] for r in t.rows] == list(BYTES_PER_ELEMENT)
    assert row["fp4"]["bytes per element"] == "0.5" and row["int8"]["parameters per GB"] == "1G"
    assert "peak" not in str(ms.precision_table())


def test_result_prints_and_renders():
    q = ms.quantized("llama-2-7b", "a100-80gb", "w4a16")
    assert "speed-up" in str(q) and repr(q) == str(q) and "<table>" in q._repr_html_()


# --- properties --------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.sampled_from(LLMS), st.sampled_from(DEVICES), st.integers(1, 16), st.integers(0, 512))
def test_lower_weight_precision_never_slows_memory_bound_decode(model, dev, batch, context):
    times = [ms.quantized(model, _big(dev), s, batch=batch, context_tokens=context).time_s
             for s in ["bf16", "w8a16", "w4a16"]]
    assert times[0] >= times[1] >= times[2]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(LLMS), st.sampled_from(DEVICES), st.integers(1, 64), st.integers(0, 1000))
def test_speedup_never_exceeds_the_traffic_ratio_nor_falls_below_one(model, dev, batch, context):
    q = ms.quantized(model, _big(dev), "w4a16", batch=batch, context_tokens=context)
    traffic = q.baseline_pass.bytes / q.quantized_pass.bytes
    assert 1.0 - 1e-9 <= q.speedup <= traffic * (1 + 1e-9)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["llama-2-7b", "llama-3-8b"]), st.sampled_from(DEVICES), st.integers(512, 4096))
def test_weight_only_never_helps_compute_bound_prefill(model, dev, seq):
    q = ms.quantized(model, _big(dev), "w4a16", phase="prefill", seq_len=seq)
    assert q.bound == q.baseline_bound == "compute" and q.speedup == pytest.approx(1.0, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.floats(0, 0.05), st.sampled_from(["w8a16", "w4a16"]))
def test_overhead_only_shrinks_the_gain(t0, s):
    assert ms.quantized("llama-2-7b", "h100", s, overhead_s=t0).speedup <= \
        ms.quantized("llama-2-7b", "h100", s).speedup + 1e-12


def test_vectorised_equals_scalar_calls():
    b = np.array([1, 8, 64, 512])
    vec = ms.quantized("llama-3-8b", "h100", "w4a16", batch=b, context_tokens=128)
    one = [ms.quantized("llama-3-8b", "h100", "w4a16", batch=int(x), context_tokens=128).speedup for x in b]
    assert np.allclose(vec.speedup, one)
    assert list(vec.bound) == [ms.quantized("llama-3-8b", "h100", "w4a16", batch=int(x),
                                            context_tokens=128).bound for x in b]


# --- infeasible and bad input ------------------------------------------------------------
def test_baseline_that_does_not_fit():
    with pytest.raises(ms.InfeasibleError, match="baseline bf16"):
        ms.quantized("llama-3-70b", "h100", "w4a16")
    ok = ms.quantized("llama-3-70b", "h100", "w4a16", baseline="w8a16")
    assert ok.speedup == pytest.approx(2.0, rel=0.01)
    arr = ms.quantized("llama-3-8b", "h100", "w4a16", batch=np.array([1, 2048]), context_tokens=4096)
    assert arr.feasible.tolist() == [True, False] and np.isnan(arr.speedup[1]) and arr.reason
    assert arr.bound[1] == "infeasible"


def test_group_scales_that_do_not_fit():
    with pytest.raises(ms.InfeasibleError, match="group scales"):
        ms.quantized("llama-2-70b", "a100-80gb", "w8a16", baseline="w8a16", group_size=1, group_B=8.0)


def test_missing_low_precision_peak_is_an_error():
    with pytest.raises(ms.UnknownNameError, match="A100-80GB"):
        ms.quantized("llama-3-8b", "a100-80gb", "fp8")
    with pytest.raises(ms.UnknownNameError, match="H100-SXM"):
        ms.quantized("llama-3-8b", "h100", "fp4")
    assert ms.quantized("llama-3-8b", "b200", "fp4").speedup > 3


def test_bad_input():
    with pytest.raises(ms.UnknownNameError, match="quantization scheme"):
        ms.quantized("llama-3-8b", "h100", "int3")
    with pytest.raises(ms.MlsysimError, match="inference passes"):
        ms.quantized("llama-3-8b", "h100", "w4a16", phase="training")
    with pytest.raises(ms.MlsysimError, match="overhead_s"):
        ms.quantized("llama-3-8b", "h100", "w4a16", overhead_s=-1e-3)
    with pytest.raises(ms.MlsysimError, match="group_size"):
        ms.weight_bytes_per_param("int4", group_size=0)
    with pytest.raises(ms.MlsysimError, match="group_B"):
        ms.weight_bytes_per_param("int4", group_size=64, group_B=0.0)
    with pytest.raises(ms.UnknownNameError, match="precision"):
        ms.weight_bytes_per_param("int3")
    with pytest.raises(ms.MlsysimError, match="batch"):
        ms.quantized("llama-3-8b", "h100", "w4a16", batch=0)
    with pytest.raises(ms.MlsysimError, match="CNN"):
        ms.quantized("resnet-50", "h100", "w8a8", context_tokens=128)
    with pytest.raises(ms.MlsysimError, match="CNN"):
        ms.quantized_footprint("resnet-50", "h100", "w8a8", context_tokens=128)


# --- the literature table -------------------------------------------------------------------
def test_accuracy_table_is_sourced_literature():
    results = qz.accuracy_results()
    assert len(results) >= 10
    for a in results:
        assert a.source and a.date and a.better in ("lower", "higher")
        assert a.cite and a.cite in a.source.replace(" et al.", "").replace(" & Alistarh", "")
    t = ms.accuracy_table()
    assert "not a model" in t.title and len(t.rows) == len(results)
    assert all(" W4" in r["method"] for r in ms.accuracy_table("W4").rows)
    with pytest.raises(ms.UnknownNameError):
        ms.accuracy_table("W2")


def test_accuracy_figures_as_published():
    by = {(a.method, a.scheme, a.model): a for a in qz.accuracy_results()}
    resnet = by[("Integer-only QAT", "W8A8", "ResNet-50")]
    assert (resnet.baseline, resnet.quantized, resnet.worse_by) == (76.4, 74.9, pytest.approx(1.5))
    opt = by[("GPTQ", "W4A16", "OPT-175B")]
    assert (opt.baseline, opt.quantized) == (8.34, 8.37) and opt.worse_by == pytest.approx(0.03)
    awq = by[("AWQ g128", "W4A16", "Llama-2-7B")]
    assert (awq.baseline, awq.quantized) == (5.47, 5.60)


# --- explorer ---------------------------------------------------------------------------------
def test_quantization_explorer():
    ex = ms.widgets.quantization_explorer()
    assert ex.result.speedup == pytest.approx(4.0, rel=0.01) and "4x" in ex.summary_text()
    ex.controls["phase"].value = "prefill"
    assert ex.result.bound == "compute" and ex.result.speedup == pytest.approx(1.0)
    ex.controls["scheme"].value = "fp8"
    assert isinstance(ex.result, ms.UnknownNameError) and "not feasible" in ex.summary_text()
    ex.controls["hardware"].value = "H100-SXM"
    assert ex.error == "" and ex.result.speedup == pytest.approx(2.0, rel=0.01)
    ex.controls["workload"].value = "ResNet-50"
    assert ex.result.phase == "inference"
