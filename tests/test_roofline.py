import numpy as np
import pytest

import mlsysim as ms


def test_worked_number_llama3_8b_decode_h100():
    r = ms.roofline("llama-3-8b", "h100", batch=1)
    assert r.time_s == pytest.approx(4.48e-3, rel=0.005)
    assert r.bound == "memory" and r.intensity == pytest.approx(1.0, rel=0.01)
    assert r.ridge == pytest.approx(989.4e12 / 3.35e12)
    assert r.time_s == max(r.compute_s, r.memory_s)


def test_decode_turns_compute_bound_near_the_ridge():
    for dev in ["a100-80gb", "h100", "h200", "b200"]:
        b = ms.crossover_batch("llama-3-8b", dev)
        ridge = ms.hardware(dev).ridge("bf16")
        assert ridge <= b <= 1.1 * ridge, dev
        assert ms.roofline("llama-3-8b", dev, batch=b).bound == "compute"
        assert ms.roofline("llama-3-8b", dev, batch=b - 1).bound == "memory"


def test_long_context_keeps_decode_memory_bound():
    assert ms.crossover_batch("llama-3-8b", "h100", context_tokens=2048) == float("inf")


def test_prefill_is_compute_bound_and_counts_causal_attention():
    m = ms.model("llama-2-7b")
    r = ms.roofline(m, "a100-40gb", phase="prefill", seq_len=2048, precision="fp16")
    s = 2048
    expected = s * 2 * m.matmul_params_per_token - (s - 1) * 2 * m.vocab * m.d_model \
        + s * (s + 1) / 2 * m.attention_flops_per_pair()
    assert r.flops == pytest.approx(expected)
    assert r.flops == pytest.approx(27.6e12, rel=0.03)   # ≈ 2·6.7e9·2048, the validation file's figure
    assert r.bound == "compute"


def test_training_is_three_forward_passes():
    fwd = ms.roofline("resnet-50", "a100", batch=32)
    train = ms.roofline("resnet-50", "a100", batch=32, phase="training")
    assert train.flops == pytest.approx(3 * fwd.flops)
    assert train.footprint_B > fwd.footprint_B


def test_vectorised_over_batch_devices_and_precisions():
    b = np.array([1, 16, 256, 4096])
    r = ms.roofline("llama-3-8b", ["a100", "h100", "b200"], batch=b)
    assert r.time_s.shape == (3, 4) and r.bound.shape == (3, 4)
    r2 = ms.roofline("llama-3-8b", "h100", batch=b, precision=["bf16", "fp8"])
    assert r2.time_s.shape == (2, 4)
    assert np.allclose(r2.time_s[1], ms.roofline("llama-3-8b", "h100", batch=b, precision="fp8").time_s)
    r3 = ms.roofline("llama-3-8b", ["h100", "b200"], batch=b, precision=["bf16", "fp8"])
    assert r3.time_s.shape == (2, 2, 4)
    for i, dev in enumerate(["h100", "b200"]):
        single = ms.roofline("llama-3-8b", dev, batch=16, precision="fp8")
        assert r3.time_s[i, 1, 1] == pytest.approx(single.time_s)


def test_array_call_masks_what_does_not_fit():
    r = ms.roofline("llama-3-8b", "h100", batch=np.array([1, 32, 1024]), context_tokens=8192)
    assert list(r.feasible) == [True, True, False]
    assert np.isnan(r.time_s[2]) and not np.isnan(r.time_s[0])
    assert r.bound[2] == "infeasible" and r.reason


def test_scalar_call_refuses_what_does_not_fit():
    with pytest.raises(ms.InfeasibleError, match="80 GB"):
        ms.roofline("llama-3-70b", "h100", batch=1)


def test_low_precision_weights_cut_decode_traffic():
    bf16 = ms.roofline("llama-3-8b", "h100", batch=1)
    w4 = ms.roofline("llama-3-8b", "h100", batch=1, weight_precision="int4")
    assert w4.weight_bytes == pytest.approx(bf16.weight_bytes / 4)
    assert w4.time_s < bf16.time_s / 3


def test_moe_weight_traffic_grows_with_batch_until_all_experts_are_touched():
    r = ms.roofline("mixtral-8x7b", "h200", batch=np.array([1, 2, 8, 64, 512]))
    w = r.weight_bytes
    assert np.all(np.diff(w) >= 0)
    m = ms.model("mixtral-8x7b")
    assert w[0] < 0.4 * m.params * 2           # one token touches 2 of 8 experts
    assert w[-1] == pytest.approx((m.params - m.embedding_params + m.vocab * m.d_model) * 2, rel=0.01)


def test_mla_decode_reads_the_compressed_cache():
    mla = ms.Transformer(name="tiny-mla", layers=4, d_model=512, heads=8, head_dim=64, d_ff=1024, vocab=1000,
                         kv_lora_rank=64, q_lora_rank=96, qk_rope_dim=16, qk_nope_dim=32, v_head_dim=32)
    assert mla.kv_bytes_per_token("bf16") == 4 * (64 + 16) * 2
    r = ms.roofline(mla, "h100", batch=4, context_tokens=100)
    assert r.kv_bytes == pytest.approx(4 * (100 + 2) * mla.kv_bytes_per_token("bf16"))
    # decode attends in the latent space (absorbed up-projections): more FLOP per key than prefill's form
    assert mla.attention_flops_per_pair(absorbed=True) > mla.attention_flops_per_pair(absorbed=False)


def test_result_prints_a_readable_table():
    text = str(ms.roofline("llama-3-8b", "h100", batch=8))
    assert "bound" in text and "memory" in text and "ms" in text
    assert "<table>" in ms.roofline("resnet-50", "a100", batch=8)._repr_html_()


def test_context_window_is_enforced():
    with pytest.raises(ms.InfeasibleError, match="context window"):
        ms.roofline("llama-2-7b", "h100", batch=1, context_tokens=5000)
