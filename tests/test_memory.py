"""Training memory: Korthikanti's activation constants, ZeRO's model states, pipeline in-flight
micro-batches, monotonicity, feasibility and bad input."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mlsysim as ms
from mlsysim.validation.training import gpt

GPT3 = ms.model("gpt-3")
S, H, A = 2048, 12288, 96


def layer(**kw):
    kw = {"seq_len": S, "micro_batch": 1, "attention": "eager", **kw}
    return ms.training_memory(GPT3, **kw).layer_activation_B


def test_korthikanti_table2_constants():
    sbh = S * H
    assert layer(recompute="none", sequence_parallel=False) == pytest.approx(sbh * (34 + 5 * A * S / H))
    assert layer(recompute="none", sequence_parallel=False) / 1e9 == pytest.approx(2.87, abs=0.005)
    t = 8
    assert layer(tp=t, recompute="none", sequence_parallel=False) == \
        pytest.approx(sbh * (10 + 24 / t + 5 * A * S / (H * t)))
    assert layer(tp=t, recompute="none") == pytest.approx(sbh * (34 + 5 * A * S / H) / t)
    assert layer(tp=t, recompute="selective", sequence_parallel=False) == pytest.approx(sbh * (10 + 24 / t))
    assert layer(tp=t, recompute="selective") == pytest.approx(34 * sbh / t)
    assert layer(tp=t, recompute="selective") / 1e6 == pytest.approx(107, abs=0.5)
    assert layer(recompute="full", sequence_parallel=False) == pytest.approx(2 * sbh)
    assert layer(tp=t, recompute="full") == pytest.approx(2 * sbh / t)


def test_flash_layer_keeps_saved_elements_minus_the_two_projection_outputs():
    m = ms.model("llama-3-8b")
    r = ms.training_memory(m, seq_len=4096, recompute="none", precision="bf16")
    expected = 4096 * (2 * (m.saved_activation_elements - 2 * m.d_model) + 4 * m.heads)
    assert r.layer_activation_B == pytest.approx(expected)
    assert ms.training_memory(m, seq_len=4096, recompute="selective").layer_activation_B == r.layer_activation_B
    assert ms.training_memory(m, seq_len=4096, recompute="full").layer_activation_B == 4096 * m.d_model * 2
    g = ms.training_memory(GPT3, seq_len=S, recompute="none").layer_activation_B
    assert g == pytest.approx(S * (2 * 16 * H + 4 * A))   # 32 bytes per token vs Korthikanti's 34


@pytest.mark.parametrize("zero,per_param", [(0, lambda n: 16), (1, lambda n: 4 + 12 / n),
                                            (2, lambda n: 2 + 14 / n), (3, lambda n: 16 / n)])
@pytest.mark.parametrize("dp", [8, 64, 1024])
def test_zero_model_states(zero, per_param, dp):
    m = ms.model("llama-2-7b")
    r = ms.training_memory(m, zero_stage=zero, dp=dp, recompute="full")
    assert r.model_states_B == pytest.approx(per_param(dp) * m.params)
    assert ms.model_states_B(m, zero, dp) == pytest.approx(per_param(dp) * m.params)


def test_v8_zero_paper_numbers():
    assert ms.model_states_B(7.5e9) == pytest.approx(120e9)
    assert ms.model_states_B(1.5e9) == pytest.approx(24e9)
    assert ms.model_states_B(7.5e9, 1, 64) / 1e9 == pytest.approx(31.4, abs=0.05)


def test_other_optimizers_change_the_states():
    m = ms.model("llama-2-7b")
    assert ms.model_states_B(m, optimizer="sgd") == pytest.approx(8 * m.params)   # 2 + 2 + fp32 master
    assert ms.model_states_B(m, optimizer="adam-8bit") == pytest.approx(10 * m.params)
    assert ms.model_states_B(m, optimizer="adafactor") < ms.model_states_B(m, optimizer="sgd-momentum")


def test_pipeline_in_flight_micro_batches():
    m = gpt("g", 64, 4096, 32)
    one = ms.training_memory(m, pp=1, recompute="selective", seq_len=2048).layer_activation_B
    f = lambda **kw: ms.training_memory(m, recompute="selective", seq_len=2048, **kw)  # noqa: E731
    assert f(pp=8, microbatches=64).layers_in_flight == 64            # 1F1B: p micro-batches of L/p layers
    assert f(pp=8, microbatches=3).layers_in_flight == 3 * 8           # fewer micro-batches than stages
    assert f(pp=8, microbatches=64, interleave=2).layers_in_flight == pytest.approx(64 * (1 + 7 / 16))
    assert f(pp=8, microbatches=64).layer_activation_B == one
    assert f(pp=8, interleave=4, microbatches=64).activations_B > f(pp=8, microbatches=64).activations_B


def test_last_stage_can_be_the_peak():
    # a huge vocabulary and one in-flight micro-batch: the logits make the last stage heavier
    m = ms.Transformer(name="v", layers=8, d_model=1024, heads=8, d_ff=4096, vocab=1_000_000)
    r = ms.training_memory(m, pp=8, microbatches=1, seq_len=4096, recompute="full")
    assert r.activations_B > 4096 * 4 * m.vocab


def test_context_and_expert_parallelism_divide():
    m = ms.model("mixtral")
    base = ms.training_memory(m, dp=8, seq_len=8192, zero_stage=1)
    assert ms.training_memory(m, dp=8, cp=2, seq_len=8192, zero_stage=1).activations_B == \
        pytest.approx(base.activations_B / 2, rel=1e-6)
    ep = ms.training_memory(m, dp=8, ep=8, seq_len=8192, zero_stage=1)
    assert ep.weights_B < base.weights_B
    # ZeRO-1 over 8 ranks already holds 1/8 of every optimizer state: EP 8 changes nothing there
    assert ep.optimizer_B == pytest.approx(base.optimizer_B)
    ddp = ms.training_memory(m, dp=8, seq_len=8192, zero_stage=0)
    assert ms.training_memory(m, dp=8, ep=8, seq_len=8192, zero_stage=0).optimizer_B < ddp.optimizer_B / 3


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["llama-3-8b", "llama-3-70b", "gpt-3", "mixtral"]), st.sampled_from([1, 2, 4, 8]),
       st.sampled_from([1, 2, 4]), st.sampled_from([1, 8, 64]), st.sampled_from(["none", "selective", "full"]))
def test_more_zero_never_raises_memory(name, tp, pp, dp, rc):
    # (ZeRO-3's two gathered layers can outweigh its savings when a stage holds one or two layers)
    r = ms.training_memory(name, zero_stage=np.arange(4), tp=tp, pp=pp, dp=dp, recompute=rc, seq_len=2048)
    assert np.all(np.diff(r.total_B) <= 1e-6 * r.total_B[0])


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["llama-3-8b", "llama-3-70b", "gpt-3", "palm"]), st.sampled_from([1, 2, 4, 8]),
       st.sampled_from([0, 1, 2, 3]))
def test_more_tp_or_pp_never_raises_weights(name, pp, zero):
    m = ms.model(name)
    tps = np.array([t for t in (1, 2, 4, 8, 16) if m.heads % t == 0])
    w = ms.training_memory(m, tp=tps, pp=pp, dp=8, zero_stage=zero, seq_len=2048).weights_B
    assert np.all(np.diff(w) < 0)
    pps = np.array([1, 2, 4, 8, 16])
    w = ms.training_memory(m, tp=1, pp=pps, dp=8, zero_stage=zero, seq_len=2048).weights_B
    assert np.all(np.diff(w) <= 0)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["llama-3-8b", "gpt-3"]), st.sampled_from(["flash", "eager"]), st.sampled_from([1, 8]),
       st.booleans())
def test_recomputing_more_never_raises_activations(name, attention, tp, sp):
    a = [ms.training_memory(name, tp=tp, recompute=rc, attention=attention, sequence_parallel=sp,
                            seq_len=2048).activations_B for rc in ("none", "selective", "full")]
    assert a[0] >= a[1] > a[2]


def test_feasibility_against_hardware():
    ok = ms.training_memory("llama-3-8b", dp=8, zero_stage=1, seq_len=4096, hardware="h100")
    assert ok.feasible and ok.capacity_B == 80e9 and "fits" in str(ok)
    with pytest.raises(ms.InfeasibleError, match="80 GB"):
        ms.training_memory("llama-3-70b", hardware="h100")
    r = ms.training_memory("llama-3-70b", tp=np.array([1, 8]), pp=4, dp=32, zero_stage=1, hardware="h100")
    assert list(r.feasible) == [False, True] and np.isnan(r.total_B[0]) and "does not fit" in r.reason


def test_readable_result():
    r = ms.training_memory("gpt-3", tp=8, pp=8, seq_len=2048)
    text = str(r)
    for part in ("weights", "gradients", "optimizer states", "activations", "total"):
        assert part in text
    assert "<table>" in r._repr_html_()
    assert sum(r.parts().values()) == pytest.approx(r.total_B)


def test_bad_input():
    with pytest.raises(ms.UnknownNameError, match="optimizer"):
        ms.training_memory("llama-3-8b", optimizer="adamax")
    with pytest.raises(ms.UnknownNameError, match="recompute"):
        ms.training_memory("llama-3-8b", recompute="some")
    with pytest.raises(ms.UnknownNameError, match="attention"):
        ms.training_memory("llama-3-8b", attention="sparse")
    with pytest.raises(ValueError, match="zero_stage"):
        ms.training_memory("llama-3-8b", zero_stage=4)
    with pytest.raises(ms.InfeasibleError, match="heads"):
        ms.training_memory("llama-3-8b", tp=3)
    with pytest.raises(ms.InfeasibleError, match="KV heads"):
        ms.training_memory(ms.Transformer(name="x", layers=4, d_model=1536, heads=12, kv_heads=4, d_ff=4096,
                                          vocab=100), tp=6)
    with pytest.raises(ms.InfeasibleError, match="layers"):
        ms.training_memory("llama-3-8b", pp=64)
    with pytest.raises(ms.InfeasibleError, match="experts"):
        ms.training_memory("llama-3-8b", ep=2)
    with pytest.raises(ValueError, match="seq_len"):
        ms.training_memory("llama-3-8b", seq_len=-1)
    with pytest.raises(ms.InfeasibleError, match="learned positions"):
        ms.training_memory("gpt-3", seq_len=4096)
    with pytest.raises(ValueError, match="tp"):
        ms.training_memory("llama-3-8b", tp=0)
    with pytest.raises(ValueError, match="Transformers"):
        ms.training_memory("resnet-50")
    with pytest.raises(ValueError, match="params"):
        ms.model_states_B(-1)


def test_fp32_gradients_give_megatrons_distributed_optimizer_bytes():
    # Megatron-LM's distributed optimizer with bf16 weights and fp32 gradients: 6 + 12/N bytes
    # per parameter (docs/source/api-guide/dist_optimizer.md); ZeRO's bf16 gradients: 4 + 12/N
    for n in (1, 8, 64):
        r = ms.training_memory("gpt-3", zero_stage=1, dp=n, tp=8, pp=8, seq_len=2048, grad_precision="fp32")
        assert r.model_states_B / r.params_per_gpu == pytest.approx(6 + 12 / n)
        z = ms.training_memory("gpt-3", zero_stage=1, dp=n, tp=8, pp=8, seq_len=2048)
        assert z.model_states_B / z.params_per_gpu == pytest.approx(4 + 12 / n)


def test_an_unknown_gradient_format_is_named():
    with pytest.raises(ms.MlsysimError, match="grad_precision"):
        ms.training_memory("gpt-3", seq_len=2048, grad_precision="fp9")
