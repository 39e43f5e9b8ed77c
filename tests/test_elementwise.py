"""Eager (unfused) element-wise kernels and partial layer recomputation in the training step:
worked numbers, limits, properties, bad input, and the claims of the torchtitan series' note."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mlsysim as ms
from mlsysim.elementwise import layer_bytes, loss_bytes

A100_64 = ms.cluster("dgx-a100", nodes=8)
FSDP = dict(tp=1, pp=1, micro_batch=1, zero_stage=3)


def step(name="llama-3-8b", **kw):
    return ms.train_step(name, A100_64, 64, 8192, **{**FSDP, **kw})


def test_llama3_8b_layer_moves_3_93_times_the_fused_bytes():
    m = ms.model("llama-3-8b")
    fwd, bwd = layer_bytes(m, 2.0)
    assert (fwd, bwd) == (626_688.0, 1_015_808.0)   # summed kernel by kernel, module docstring
    # backward, per element of d: 2 norms × 64 B, 2 residual-gradient adds and 3 adds of the
    # projections' input gradients × 6 B; rotary 20 B on Q and K; repeat_kv, contiguous, SwiGLU
    d, q, kv, ff = 4096, 4096, 1024, 14336
    assert bwd == 2 * 64 * d + 5 * 6 * d + 20 * (q + kv) + 2 * 10 * kv + 4 * q + 16 * ff
    # the fused accounting: 3 × the saved activations (2·(saved − 2d) bytes + fp32 LSE per head)
    fused = 3 * (2 * (m.saved_activation_elements - 2 * m.d_model) + 4 * m.heads)
    assert fused == 418_176 and (fwd + bwd) / fused == pytest.approx(3.93, abs=0.005)
    assert loss_bytes(m, 2.0) == 36 * m.vocab       # cast, log-softmax; gradients back


def test_layer_bytes_split_by_tensor_parallelism():
    m = ms.model("llama-3-70b")
    one, eight = layer_bytes(m, 2.0), layer_bytes(m, 2.0, tp=8, sp=1)
    assert eight[0] == pytest.approx(one[0] / 8)    # SP splits the norms and residuals too
    no_sp = layer_bytes(m, 2.0, tp=8, sp=0)
    assert no_sp[0] > eight[0]
    arr = layer_bytes(m, 2.0, tp=np.array([1, 8]), sp=np.array([0, 1]))
    assert np.allclose(arr[0], [one[0], eight[0]])


def test_layernorm_gelu_blocks_count_fewer_kernels():
    gpt, llama = ms.model("gpt-3"), ms.model("llama-3-70b")
    per_d = lambda m: sum(layer_bytes(m, 2.0)) / m.d_model   # noqa: E731
    assert per_d(gpt) < per_d(llama)   # native LayerNorm and GeLU, no rotary, no K/V repeat


def test_eager_only_adds_memory_time():
    fused, eager = step(elementwise="fused"), step(elementwise="eager")
    assert eager.gemm_s == fused.gemm_s and eager.tp_comm_s == fused.tp_comm_s
    assert eager.nongemm_s > 3 * fused.nongemm_s
    assert eager.step_s == pytest.approx(sum(eager.breakdown().values()))
    assert eager.elementwise == "eager" and "eager element-wise" in str(eager)
    assert eager.memory_per_gpu_B == fused.memory_per_gpu_B


def test_recompute_fraction_interpolates_between_none_and_full():
    none, full = step(recompute="none"), step(recompute="full")
    half = step(recompute="none", recompute_fraction=0.5)
    assert step(recompute="none", recompute_fraction=0.0).step_s == none.step_s
    one = step(recompute="none", recompute_fraction=1.0)
    assert one.step_s == pytest.approx(full.step_s) and one.hfu == pytest.approx(full.hfu)
    assert one.memory_per_gpu_B == pytest.approx(full.memory_per_gpu_B)
    assert half.gemm_s == pytest.approx((none.gemm_s + full.gemm_s) / 2)
    assert full.memory_per_gpu_B < half.memory_per_gpu_B < none.memory_per_gpu_B
    assert half.mfu == pytest.approx(none.mfu * none.step_s / half.step_s)   # same model FLOPs
    assert half.recompute_fraction == 0.5 and "50% of the layers" in str(half)
    assert full.recompute_fraction == 0.0 and step(recompute="full", recompute_fraction=0.5).step_s == full.step_s


@settings(max_examples=25, deadline=None)
@given(a=st.floats(0.01, 1), b=st.floats(0.01, 1))
def test_more_recomputation_is_slower_and_smaller(a, b):
    # (from zero to a first recomputed layer the peak can grow: that layer's activations are
    # rebuilt in full during its backward while the others are still held)
    lo, hi = sorted((a, b))
    r_lo, r_hi = (step(recompute="none", recompute_fraction=x, elementwise="eager") for x in (lo, hi))
    assert r_hi.step_s >= r_lo.step_s * (1 - 1e-12)
    assert r_hi.memory_per_gpu_B <= r_lo.memory_per_gpu_B * (1 + 1e-12)


def test_arrays_match_scalars():
    shares = np.array([0.0, 0.25, 1.0])
    r = step(recompute="none", recompute_fraction=shares, elementwise="eager")
    for i, x in enumerate(shares):
        assert r.step_s[i] == pytest.approx(step(recompute="none", recompute_fraction=float(x),
                                                 elementwise="eager").step_s)
    mem = ms.training_memory("llama-3-8b", tp=1, micro_batch=1, seq_len=8192, recompute="none",
                             recompute_fraction=shares)
    assert mem.total_B[0] > mem.total_B[1] > mem.total_B[2] and mem.recompute_fraction is not None


def test_search_passes_both_through():
    s = ms.best_parallelism("llama-3-8b", A100_64, 64, 8192, tp=[1], pp=[1], zero_stage=(3,), recompute=("none",),
                            recompute_fraction=0.5, elementwise="eager")
    assert s.best.recompute_fraction == 0.5 and s.best.elementwise == "eager"
    assert s.best.step_s == pytest.approx(step(recompute="none", recompute_fraction=0.5, elementwise="eager",
                                               micro_batch=s.best.micro_batch).step_s)


@pytest.mark.parametrize("value", [-0.1, 1.5, float("nan"), float("inf"), "half", np.array([0.2, 2.0])])
def test_bad_recompute_fraction(value):
    with pytest.raises(ms.MlsysimError, match="recompute_fraction"):
        step(recompute="none", recompute_fraction=value)
    with pytest.raises(ms.MlsysimError, match="recompute_fraction"):
        ms.training_memory("llama-3-8b", recompute_fraction=value)


def test_bad_elementwise():
    with pytest.raises(ms.MlsysimError, match="elementwise"):
        step(elementwise="fast")
    with pytest.raises(ms.MlsysimError, match="latent attention"):
        ms.train_step("deepseek-v3", ms.cluster("dgx-h100", nodes=256), 2048, 4096, tp=8, pp=16, ep=16,
                      elementwise="eager")


def test_torchtitan_series_note_is_what_the_model_says():
    from mlsysim.validation.training import SERIES, TORCHTITAN_RUNS, torchtitan
    note = next(s for s in SERIES if s.name.startswith("torchtitan") and s.note).note
    m = ms.model("llama-3-8b")
    fused = 3 * (2 * (m.saved_activation_elements - 2 * m.d_model) + 4 * m.heads)
    assert "3.9 times" in note and round(sum(layer_bytes(m, 2.0)) / fused, 1) == 3.9
    # counted as fused, the 8B and 13B points are 18 to 21 % high
    misses = []
    for name, b, s, rc, share, pub, _ in TORCHTITAN_RUNS[:3]:
        r = ms.train_step(name, A100_64, 64 * b, s, **{**FSDP, "micro_batch": b}, recompute=rc,
                          recompute_fraction=share)
        misses.append(r.tokens_per_s / 64 / pub - 1)
    assert "18 to 21 %" in note and round(min(misses) * 100) == 18 and round(max(misses) * 100) == 21
    # eager kernels cost the 8B model about a tenth of its step
    eager = step(recompute="none", recompute_fraction=0.5, elementwise="eager")
    fused8 = step(recompute="none", recompute_fraction=0.5)
    assert (eager.nongemm_s - fused8.nongemm_s) / eager.step_s == pytest.approx(0.1, abs=0.015)
    # the op-checkpointing row lies between none and every second layer
    lo, hi = torchtitan("llama-3-8b", 1, 8192, "none", 0.5), torchtitan("llama-3-8b", 1, 8192, "none", 0.0)
    assert f"{hi:,.0f} predicted" in note and f"({lo:,.0f})" in note and lo < 2973 * 1.15


def test_cli_train_takes_both_and_refuses_bad_values():
    import json
    import subprocess
    import sys

    def run(*args):
        return subprocess.run([sys.executable, "-m", "mlsysim.cli", "train", "llama-3-8b", "dgx-a100", "--nodes", "8",
                               "--global-batch", "64", "--tp", "1", "--pp", "1", "--zero", "3",
                               "--recompute", "none", *args], capture_output=True, text=True)
    r = run("--recompute-fraction", "0.5", "--elementwise", "eager", "--json")
    d = json.loads(r.stdout)
    assert d["layout"]["recompute_fraction"] == 0.5 and d["layout"]["elementwise"] == "eager"
    best = ms.best_parallelism("llama-3-8b", A100_64, 64, 8192, tp=[1], pp=[1], zero_stage=[3],
                               recompute=["none"], recompute_fraction=0.5, elementwise="eager").best
    assert d["step_s"] == pytest.approx(best.step_s)
    for bad in (("--recompute-fraction", "1.5"), ("--elementwise", "compiled")):
        r = run(*bad)
        assert r.returncode == 2 and "Traceback" not in r.stderr and bad[0].strip("-").split("-")[0] in r.stderr


def test_search_takes_recompute_fraction_candidates():
    c = ms.cluster("dgx-h100", nodes=16)
    one = ms.best_parallelism("llama-3-70b", c, 256, 4096, recompute=("none", "full"), recompute_fraction=0.0)
    many = ms.best_parallelism("llama-3-70b", c, 256, 4096, recompute=("none", "full"),
                               recompute_fraction=(0.0, 0.25, 0.5))
    assert many.evaluated == 3 * one.evaluated
    rule = "full recomputation already re-runs every layer"   # full + a share: the same layout twice
    assert many.excluded[rule] > 0 and rule not in one.excluded
    assert many.best.step_s <= one.best.step_s
    b = many.best
    again = ms.train_step("llama-3-70b", c, 256, 4096, tp=b.tp, pp=b.pp, dp=b.dp, micro_batch=b.micro_batch,
                          interleave=b.interleave, zero_stage=b.zero_stage, recompute=b.recompute,
                          recompute_fraction=b.recompute_fraction)
    assert again.step_s == pytest.approx(b.step_s)
    with pytest.raises(ms.MlsysimError, match="recompute_fraction"):
        ms.best_parallelism("llama-3-70b", c, 256, 4096, recompute_fraction=(0.0, 1.5))


def test_llama3_series_note_is_what_the_model_says():
    from mlsysim.validation.training import LLAMA3_TABLE4, SERIES, llama3, llama3_full_recompute
    note = next(s for s in SERIES if s.name.startswith("Llama 3")).note
    rows = LLAMA3_TABLE4[:2]
    assert [llama3(row).recompute_fraction for row in rows] == [0.375, 0.25]
    assert "three eighths of the layers at 8K GPUs and a quarter at 16K" in note
    misses = [round((llama3_full_recompute(row).mfu / row[7] - 1) * 100) for row in rows]
    assert misses == [-12, -17] and "12 and 17 % below" in note


def test_megatron_h100_series_note_is_what_the_model_says():
    from mlsysim.validation.training import H100_BEST_ITERATION, SERIES, megatron_core_strong
    note = next(s for s in SERIES if s.name.startswith("Megatron-LM strong")).note
    published = {96: 0.47, 4608: 0.42}

    def miss(gpus, **kw):
        return round((megatron_core_strong(gpus, **kw).mfu / published[gpus] - 1) * 100)
    assert [miss(g, matmul_efficiency=H100_BEST_ITERATION) for g in published] == [22, 12]
    assert "(794.5) puts the model 22 and 12 % high" in note
    assert (miss(4608, grad_precision="bf16"), miss(4608)) == (9, 5)
    assert "the 4,608-GPU point is 9 % high instead of 5 %" in note


@pytest.mark.parametrize("attention, seq_len", [("flash", 8192), ("eager", 2048)])
def test_recomputing_every_layer_in_full_is_full_recomputation(attention, seq_len):
    # an eager attention's score kernels and FLOPs are re-run in the recomputed layers too
    def at(**kw):
        return ms.train_step("llama-3-8b", A100_64, 64, seq_len, **FSDP, attention=attention, **kw)
    full, one = at(recompute="full"), at(recompute="none", recompute_fraction=1.0)
    assert one.step_s == pytest.approx(full.step_s) and one.hfu == pytest.approx(full.hfu)
    assert one.nongemm_s == pytest.approx(full.nongemm_s) and one.gemm_s == pytest.approx(full.gemm_s)


@pytest.mark.parametrize("name", ["overlap", "tp_overlap", "efficiency"])   # recompute_fraction: candidates
def test_search_takes_one_value_of_each_setting(name):
    with pytest.raises(ms.MlsysimError, match=f"{name} must be one number in a search"):
        ms.best_parallelism("llama-3-8b", A100_64, 64, 8192, tp=[1], pp=[1], **{name: [0.5, 0.75]})
