"""Shape-aware GEMM efficiency (mlsysim.kernels): worked numbers, properties, and its use in the
step model (the breakdown adds up, the default says it is shape-aware, sweeps match scalars)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mlsysim as ms
from mlsysim.kernels import TILES, gemm_efficiency, gemm_time

A100, H100 = ms.hardware("a100"), ms.hardware("h100")


def test_worked_numbers_of_the_docstring():
    # 18.4B GPT, t = 8: 2,048 tokens × 2,304 QKV columns × 6,144 hidden; 288 tiles in 3 waves of 108
    assert gemm_efficiency(2048, 2304, 6144, A100, "fp16") == pytest.approx(0.737 * 288 / 324)
    # a full-wave 8,192³ GEMM reaches η_mm up to the last partial wave
    assert gemm_efficiency(8192, 8192, 8192, A100) == pytest.approx(0.736, abs=0.001)
    assert gemm_time(8192, 8192, 8192, A100) == pytest.approx(2 * 8192 ** 3 / (0.7356 * 312e12), rel=1e-3)
    # k = 96: 88 FLOP/B against the ridge of 153 FLOP/B: memory-bound
    intensity = 2 * 2048 * 2048 * 96 / ((2 * 2048 * 96 + 2048 ** 2) * 2)
    assert gemm_efficiency(2048, 2048, 96, A100) == pytest.approx(intensity / A100.ridge("bf16"))


def test_tile_and_wave_quantization_by_hand():
    # 108 tiles of 128 × 256 fill one wave exactly; one more row needs 109 such tiles (2 waves),
    # 55 × 2 of 256 × 128 (2 waves) or 109 × 2 of 128 × 128 (3 waves of half the work): 1.5 × the time
    full = gemm_time(128 * 108, 256, 4096, A100, roofline=False)
    assert gemm_time(128 * 108 + 1, 256, 4096, A100, roofline=False) == pytest.approx(1.5 * full)
    eta = A100.matmul_efficiency
    assert gemm_efficiency(128 * 108, 256, 4096, A100, roofline=False) == pytest.approx(eta)
    # a part without an SM count keeps the tile but not the wave
    tpu = ms.hardware("tpu-v4")
    assert tpu.sms is None and gemm_efficiency(100, 128, 4096, tpu, roofline=False) == pytest.approx(
        0.80 * 100 / 128)


def test_decode_sized_gemms_are_far_below_peak():
    assert gemm_efficiency(1, 8192, 8192, H100) < 0.01 < gemm_efficiency(4096, 8192, 8192, H100)


dims = st.integers(1, 20000)


@settings(max_examples=300, deadline=None)
@given(m=dims, n=dims, k=dims, factor=st.integers(1, 16), axis=st.integers(0, 2),
       hw=st.sampled_from(["a100", "h100", "b200", "tpu-v4", "l4"]))
def test_efficiency_is_monotone_in_gemm_size(m, n, k, factor, axis, hw):
    """Growing any dimension by a whole factor never lowers the efficiency: tiles and waves grow
    at most by that factor, the work by exactly it, and the intensity only rises."""
    h = ms.hardware(hw)
    shape = [m, n, k]
    bigger = list(shape)
    bigger[axis] *= factor
    assert gemm_efficiency(*bigger, h) >= gemm_efficiency(*shape, h) * (1 - 1e-12)
    assert 0 < gemm_efficiency(*shape, h) <= (h.matmul_efficiency or 0.80) + 1e-12


def test_arrays_broadcast_like_scalars():
    m = np.array([1, 512, 2048, 8192])
    eta = gemm_efficiency(m, 4096, 4096, H100)
    assert eta.shape == (4,) and np.all(np.diff(eta) >= 0) and eta[0] < 0.01 < eta[1]
    assert eta[2] == pytest.approx(gemm_efficiency(2048, 4096, 4096, H100))
    assert len(TILES) == 3


def test_registry_kernel_fields_have_sources():
    for h in ms.zoo("hardware", records=True):
        if h.sms is not None or h.matmul_efficiency is not None:
            assert h.kernel_source and any(ch.isdigit() for ch in h.kernel_source)
    with pytest.raises(ValueError, match="matmul_efficiency"):
        ms.systems.Hardware(name="x", kind="gpu", peak_flops={"bf16": 1e15}, memory_B=1e9, memory_bw_Bps=1e12,
                            matmul_efficiency=1.5)


# --- in the step model -------------------------------------------------------------------------
H100_128 = ms.cluster("dgx-h100", nodes=128)
KW = dict(global_batch=1024, seq_len=4096)


@pytest.mark.parametrize("kw", [dict(tp=8, pp=4, interleave=2, zero_stage=1),
                                dict(tp=4, pp=8, zero_stage=3, recompute="full"),
                                dict(tp=8, pp=8, efficiency=0.6)])
def test_breakdown_adds_up_to_the_step(kw):
    r = ms.train_step("llama-3-70b", H100_128, **KW, **kw)
    parts = r.breakdown()
    assert list(parts) == ["GEMM", "non-GEMM memory", "TP comm", "PP comm", "DP comm", "CP/EP comm", "bubble",
                           "optimizer"]
    assert sum(parts.values()) == pytest.approx(r.step_s, rel=1e-12)
    assert r.gemm_s + r.nongemm_s == pytest.approx(r.compute_s)
    assert all(v >= 0 for v in parts.values())


def test_breakdown_adds_up_for_moe_with_expert_and_context_parallelism():
    c = ms.cluster("dgx-h100", nodes=32)
    r = ms.train_step("mixtral-8x7b", c, global_batch=256, seq_len=8192, tp=2, pp=1, cp=2, ep=8, zero_stage=1)
    assert sum(r.breakdown().values()) == pytest.approx(r.step_s, rel=1e-12)
    assert r.breakdown()["CP/EP comm"] > 0


def test_default_is_shape_aware_and_a_scalar_still_overrides():
    r = ms.train_step("llama-3-70b", H100_128, tp=8, pp=8, **KW)
    assert r.efficiency == "shape-aware" and "shape-aware" in str(r)
    assert 0.5 < r.gemm_efficiency < H100.matmul_efficiency
    g = ms.train_step("llama-3-70b", H100_128, tp=8, pp=8, efficiency=0.5, **KW)
    assert g.efficiency == 0.5 and g.gemm_efficiency == pytest.approx(0.5) and "given" in str(g)


def test_bigger_gemms_per_gpu_run_closer_to_peak():
    """Less tensor parallelism leaves each GPU larger matrices: the GEMM efficiency rises."""
    effs = [ms.train_step("llama-3-70b", H100_128, tp=t, pp=8, zero_stage=3, recompute="full",
                          **KW).gemm_efficiency for t in (8, 4, 2)]
    assert effs[0] < effs[1] < effs[2]


def test_sweep_matches_scalar_calls():
    mb = np.array([1, 2, 4])
    v = ms.train_step("llama-3-70b", H100_128, tp=8, pp=8, micro_batch=mb, **KW)
    for i, b in enumerate(mb):
        s = ms.train_step("llama-3-70b", H100_128, tp=8, pp=8, micro_batch=int(b), **KW)
        assert v.step_s[i] == pytest.approx(s.step_s) and v.gemm_s[i] == pytest.approx(s.gemm_s)


def test_large_sweep_evaluates_each_distinct_shape_once_and_matches_scalars():
    mb = np.tile(np.array([1, 2]), 5000)
    tp = np.repeat(np.array([4, 8]), 5000)
    v = ms.train_step("llama-3-70b", H100_128, tp=tp, pp=8, micro_batch=mb, **KW)
    for i in (0, 1, 4998, 4999, 5000, 5001, 9998, 9999):
        s = ms.train_step("llama-3-70b", H100_128, tp=int(tp[i]), pp=8, micro_batch=int(mb[i]), **KW)
        assert v.step_s[i] == pytest.approx(s.step_s) and v.gemm_s[i] == pytest.approx(s.gemm_s)


# --- in the serving model (the default, efficiency=None) ----------------------------------------
def test_shape_aware_prefill_times_short_prompts_by_their_tiles():
    kw = dict(precision="fp16")
    short = ms.prefill("llama-2-7b", "a100-80gb", prompt_tokens=128, efficiency=None, **kw)
    flat = ms.prefill("llama-2-7b", "a100-80gb", prompt_tokens=128, efficiency=0.70, **kw)
    assert short.time_s > 1.4 * flat.time_s and short.bound == "compute" and flat.bound == "memory"
    assert 0.2 < short.efficiency < 0.5 and short.utilization == pytest.approx(
        short.flops / short.time_s / 312e12)
    long = ms.prefill("llama-2-7b", "a100-80gb", prompt_tokens=2048, efficiency=None, **kw)
    assert long.efficiency == pytest.approx(0.70, abs=0.03)


def test_shape_aware_decode_is_the_scalar_decode_and_arrays_broadcast():
    a = ms.decode("llama-3-8b", "h100", context_tokens=4096, batch=8, efficiency=0.70)
    b = ms.decode("llama-3-8b", "h100", context_tokens=4096, batch=8, efficiency=None)
    assert a.time_s == pytest.approx(b.time_s) and b.efficiency == a.efficiency == 0.70
    prompts = np.array([128.0, 2048.0])
    v = ms.prefill("llama-3-8b", ["a100-80gb", "h100"], prompt_tokens=prompts, efficiency=None)
    assert v.time_s.shape == (2, 2)
    s = ms.prefill("llama-3-8b", "h100", prompt_tokens=2048, efficiency=None)
    assert v.time_s[1, 1] == pytest.approx(s.time_s)
    m = ms.prefill("mixtral-8x7b", "h100", prompt_tokens=2048, tp=2, efficiency=None)
    assert 0.5 < m.efficiency < 0.81


def _with_attention(c, eff):
    """``c`` with its accelerator's fused-attention efficiency replaced."""
    import dataclasses
    hw = dataclasses.replace(c.node.accelerator, attention_efficiency=eff)
    return dataclasses.replace(c, node=dataclasses.replace(c.node, accelerator=hw))


def test_fused_attention_runs_at_the_parts_attention_efficiency():
    # FlashAttention-2: about 0.60 of an A100's peak forward + backward, 0.35 of an H100's
    assert (A100.attention_efficiency, H100.attention_efficiency) == (0.60, 0.35)
    c = ms.cluster("dgx-a100")
    kw = dict(global_batch=8, seq_len=8192, tp=8, pp=1, micro_batch=1, recompute="none")
    steps = {e: ms.train_step("llama-3-8b", _with_attention(c, e), **kw) for e in (0.30, 0.60)}
    # the attention core's hardware FLOPs per GPU: causal half of 4·s·(h·d_head) per token and layer,
    # forward plus a backward of 2.5 forwards
    m = ms.model("llama-3-8b")
    flops = 8 * 8192 * m.layers * (4 * 8192 * m.heads * m.head_dim / 2) * 3.5 / 8
    extra = flops / (0.30 * A100.peak("bf16")) - flops / (0.60 * A100.peak("bf16"))
    assert steps[0.30].gemm_s - steps[0.60].gemm_s == pytest.approx(extra, rel=1e-9)
    # an eager attention launches its score and value products as GEMMs: no fused kernel
    eager = {e: ms.train_step("llama-3-8b", _with_attention(c, e), attention="eager", **kw).step_s
             for e in (0.30, 0.60)}
    assert eager[0.30] == eager[0.60]
    with pytest.raises(ValueError, match="attention_efficiency"):
        ms.systems.Hardware(**{**{f: getattr(A100, f) for f in ("name", "kind", "vendor", "memory_B",
                                                              "memory_bw_Bps")},
                               "peak_flops": dict(A100.peak_flops), "attention_efficiency": 1.5})
