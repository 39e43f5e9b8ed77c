"""Step time of parallel training: worked numbers, the parts of a step, properties, topology
errors, broadcasting, the vectorised search, FLOP accounting and the notebook 06 widgets."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mlsysim as ms
from mlsysim.validation.training import gpt

H100 = ms.cluster("dgx-h100", nodes=128)
KW = dict(global_batch=1024, seq_len=4096)


def test_korthikanti_175b_worked_number():
    c = ms.cluster("dgx-a100", nodes=8)
    r = ms.train_step("gpt-3", c, global_batch=64, seq_len=2048, tp=8, pp=8, attention="eager", efficiency=0.7)
    assert r.step_s == pytest.approx(13.75, rel=0.02) and r.mfu == pytest.approx(0.514, abs=0.005)
    assert r.bubble_fraction == pytest.approx(7 / 64)
    assert r.dp == 1 and r.microbatches == 64
    d = ms.train_step("gpt-3", c, global_batch=64, seq_len=2048, tp=8, pp=8, attention="eager")
    assert (round(d.step_s, 1), round(d.mfu, 3), round(d.gemm_efficiency, 2)) == (14.2, 0.496, 0.69)


@pytest.mark.parametrize("name", ["175B", "530B", "1T"])
def test_korthikanti_hfu_minus_mfu_within_one_point(name):
    from mlsysim.validation.training import KORTHIKANTI_RUNS, korthikanti
    *_, mfu, hfu = next(r for r in KORTHIKANTI_RUNS if r[0] == name)
    r = korthikanti(name)
    assert 0 < r.hfu - r.mfu and abs((r.hfu - r.mfu) - (hfu - mfu)) <= 0.01


def test_parts_add_up_and_units():
    r = ms.train_step("llama-3-70b", H100, tp=8, pp=4, interleave=2, zero_stage=1, **KW)
    assert sum(r.parts().values()) == pytest.approx(r.step_s)
    assert r.comm_s == pytest.approx(r.tp_comm_s + r.pp_comm_s + r.dp_comm_s + r.ep_comm_s + r.cp_comm_s)
    assert r.tokens_per_s == pytest.approx(1024 * 4096 / r.step_s)
    assert r.mfu == pytest.approx(r.model_flops / (r.step_s * 1024 * 989.4e12))
    assert r.achieved_flops_per_gpu == pytest.approx(r.mfu * 989.4e12)
    assert r.memory_per_gpu_B == r.memory.total_B and r.feasible
    assert "MFU" in str(r) and "<table>" in r._repr_html_()


def test_bubble_is_p_minus_1_slots_over_v():
    r = ms.train_step("llama-3-70b", H100, tp=8, pp=8, micro_batch=1, interleave=2, **KW)
    m = r.microbatches
    assert r.bubble_fraction == pytest.approx(7 / (2 * m))
    slot = (r.step_s - r.bubble_s - r.optimizer_s - r.dp_comm_s) / m   # ZeRO-1: no per-micro-batch DP traffic
    assert r.bubble_s == pytest.approx(7 / 2 * slot)


def test_tp_communication_is_eight_collectives_per_layer():
    c = ms.cluster("dgx-h100", nodes=1)
    m = ms.model("llama-3-8b")
    r = ms.train_step(m, c, global_batch=8, seq_len=4096, tp=8, pp=1, micro_batch=1, recompute="none")
    S = 4096 * m.d_model * 2
    per_layer = 8 * ms.reduce_scatter_time(S, 8, c.scaleup_Bps)
    assert r.tp_comm_s == pytest.approx(r.microbatches * m.layers * per_layer)
    full = ms.train_step(m, c, global_batch=8, seq_len=4096, tp=8, pp=1, micro_batch=1, recompute="full")
    assert full.tp_comm_s == pytest.approx(1.5 * r.tp_comm_s)
    hidden = ms.train_step(m, c, global_batch=8, seq_len=4096, tp=8, pp=1, micro_batch=1, tp_overlap=1.0)
    assert hidden.tp_comm_s == 0


def test_dp_reduction_is_hierarchical_and_hides_behind_backward():
    m = ms.model("llama-3-8b")
    c = ms.cluster("dgx-h100", nodes=16)
    kw = dict(global_batch=256, seq_len=4096, tp=2, pp=1, zero_stage=0, recompute="full")
    exposed = ms.train_step(m, c, overlap=0.0, **kw)
    grads = exposed.memory.params_per_gpu * 2
    ar = ms.hierarchical_allreduce_time(grads, 4, 16, c.scaleup_Bps, c.scaleout_Bps_per_accelerator,
                                        0.0, c.fabric.latency_s)
    assert exposed.dp_comm_s == pytest.approx(ar, rel=1e-6)
    assert ms.train_step(m, c, overlap=1.0, **kw).dp_comm_s < exposed.dp_comm_s


def test_zero3_pays_gathers_every_micro_batch():
    m = ms.model("llama-3-8b")
    c = ms.cluster("dgx-h100", nodes=16)
    kw = dict(global_batch=512, seq_len=4096, tp=2, pp=1, micro_batch=1, recompute="full", overlap=0.0)
    z = [ms.train_step(m, c, zero_stage=k, **kw) for k in range(4)]
    assert z[0].dp_comm_s == pytest.approx(z[1].dp_comm_s)     # reduce-scatter + all-gather = all-reduce
    assert z[3].dp_comm_s > z[2].dp_comm_s > z[1].dp_comm_s   # per-micro-batch traffic
    assert z[3].memory_per_gpu_B < z[2].memory_per_gpu_B < z[1].memory_per_gpu_B < z[0].memory_per_gpu_B


def test_recompute_hardware_flops():
    c = ms.cluster("dgx-a100", nodes=8)
    kw = dict(global_batch=64, seq_len=2048, tp=8, pp=8, attention="eager")
    full = ms.train_step("gpt-3", c, recompute="full", **kw)
    sel = ms.train_step("gpt-3", c, recompute="selective", **kw)
    assert full.hfu / full.mfu == pytest.approx(4 / 3, rel=0.01)
    assert 1 < sel.hfu / sel.mfu < 1.02
    assert full.step_s > sel.step_s


def _scaled_cluster(scaleout=1.0, scaleup=1.0, peak=1.0):
    c = H100
    hw = dataclasses.replace(c.accelerator, scaleup_Bps=c.accelerator.scaleup_Bps * scaleup,
                             peak_flops={p: v * peak for p, v in c.accelerator.peak_flops.items()})
    node = dataclasses.replace(c.node, accelerator=hw, nic_Bps=c.node.nic_Bps * scaleout)
    fabric = dataclasses.replace(c.fabric, port_Bps=c.fabric.port_Bps * scaleout)
    return dataclasses.replace(c, node=node, fabric=fabric)


layouts = st.sampled_from([(8, 4, 1), (8, 8, 2), (4, 4, 1), (2, 1, 1), (8, 2, 4), (1, 1, 1)])


@settings(max_examples=40, deadline=None)
@given(layouts, st.floats(1.01, 20), st.sampled_from([1, 2, 3]), st.sampled_from(["none", "full"]))
def test_more_bandwidth_is_never_slower(layout, k, zero, rc):
    tp, pp, v = layout
    kw = dict(tp=tp, pp=pp, interleave=v, zero_stage=zero, recompute=rc, overlap=0.5, **KW)
    base = ms.train_step("llama-3-8b", _scaled_cluster(), **kw).step_s
    assert ms.train_step("llama-3-8b", _scaled_cluster(scaleout=k), **kw).step_s <= base * (1 + 1e-12)
    assert ms.train_step("llama-3-8b", _scaled_cluster(scaleup=k), **kw).step_s <= base * (1 + 1e-12)
    assert ms.train_step("llama-3-8b", _scaled_cluster(peak=k), **kw).step_s < base


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([2, 4, 8, 16]), st.sampled_from([1, 2, 4]))
def test_bubble_falls_with_micro_batches(pp, v):
    m = gpt("g", 64, 4096, 32)
    c = ms.cluster("dgx-h100", nodes=pp)
    counts = np.array([16, 32, 64, 128, 256])
    r = ms.train_step(m, c, global_batch=counts, seq_len=2048, tp=8, pp=pp, dp=1, micro_batch=1,
                      interleave=v, zero_stage=1)
    assert np.all(np.diff(r.bubble_fraction) < 0) and np.all(np.diff(r.mfu) > 0)
    assert r.bubble_fraction == pytest.approx((pp - 1) / (v * counts))


def test_array_inputs_broadcast_with_nan_and_reasons():
    r = ms.train_step("llama-3-70b", H100, tp=np.array([1, 2, 4, 8, 16]), pp=4, **KW)
    assert r.step_s.shape == (5,) and list(r.feasible) == [False, False, True, True, False]
    assert np.isnan(r.step_s[0]) and "across nodes" in r.reason and "does not fit" in r.reason
    scalar = ms.train_step("llama-3-70b", H100, tp=8, pp=4, **KW)
    assert r.step_s[3] == pytest.approx(scalar.step_s)
    r = ms.train_step("llama-3-70b", H100, tp=8, pp=8, microbatches=np.array([3, 32, 64]), **KW)
    assert list(r.feasible) == [False, True, True] and "do not divide the batch" in r.reason


def test_an_expert_degree_beyond_the_data_parallel_ranks_is_masked_in_a_sweep():
    c = ms.cluster("dgx-h100", nodes=64)
    kw = dict(global_batch=512, seq_len=4096, tp=4, pp=2)
    r = ms.train_step("mixtral-8x7b", c, ep=np.array([2, 128]), **kw)   # 128 > dp = 64: no expert group
    assert list(r.feasible) == [True, False] and np.isnan(r.step_s[1]) and "dp × cp" in r.reason
    assert r.step_s[0] == pytest.approx(ms.train_step("mixtral-8x7b", c, ep=2, **kw).step_s, rel=1e-12)
    r = ms.train_step("mixtral-8x7b", c, ep=8, dp=np.array([64, 4]), **kw)    # 4 × 2 × 4 GPUs ≠ 512
    assert list(r.feasible) == [True, False] and np.isnan(r.step_s[1])


@pytest.mark.parametrize("kw,match", [
    (dict(tp=16, pp=4), "across nodes"), (dict(tp=3, pp=4), "divide the 8 GPUs"),
    (dict(tp=8, pp=128, dp=1), "80 layers"), (dict(tp=8, pp=8, dp=8), "1,024 GPUs"),
    (dict(tp=8, pp=8, microbatches=3), "do not divide the batch"),
    (dict(tp=8, pp=8, interleave=3, microbatches=4), "divisible by pp"),
    (dict(tp=8, pp=1, zero_stage=0), "80 GB"), (dict(tp=8, pp=8, ep=2), "no experts"),
    (dict(tp=8, pp=8, cp=3, dp=None), "cp does not divide seq_len"),
])
def test_topology_errors(kw, match):
    with pytest.raises(ms.MlsysimError, match=match):
        ms.train_step("llama-3-70b", H100, **{**KW, **kw})


def test_tp_must_divide_heads_and_kv_heads():
    m = ms.Transformer(name="odd", layers=8, d_model=2304, heads=24, kv_heads=6, d_ff=8192, vocab=1000)
    c = ms.cluster("dgx-h100", nodes=1)
    with pytest.raises(ms.InfeasibleError, match="KV heads"):
        ms.train_step(m, c, global_batch=8, seq_len=1024, tp=4, pp=1)
    with pytest.raises(ms.InfeasibleError, match="attention heads"):
        ms.train_step(ms.Transformer(name="odd", layers=8, d_model=1280, heads=20, d_ff=4096, vocab=100), c,
                      global_batch=8, seq_len=1024, tp=8, pp=1)


def test_bad_input():
    with pytest.raises(ValueError, match="efficiency"):
        ms.train_step("llama-3-8b", H100, efficiency=1.5, **KW)
    with pytest.raises(ValueError, match="overlap"):
        ms.train_step("llama-3-8b", H100, overlap=-0.1, **KW)
    with pytest.raises(ValueError, match="global_batch"):
        ms.train_step("llama-3-8b", H100, global_batch=0, seq_len=4096)
    with pytest.raises(ms.UnknownNameError, match="cluster"):
        ms.train_step("llama-3-8b", "dgx-h1000", **KW)
    with pytest.raises(ms.UnknownNameError, match="precision"):
        ms.train_step("llama-3-8b", ms.cluster("dgx-a100", nodes=128), precision="fp8", **KW)
    with pytest.raises(ValueError, match="not both"):
        ms.train_step("llama-3-8b", H100, microbatches=8, micro_batch=2, **KW)
    with pytest.raises(ValueError, match="Transformers"):
        ms.train_step("resnet-50", H100, **KW)


def test_moe_expert_parallel_all_to_all():
    c = ms.cluster("dgx-h100", nodes=8)
    inside = ms.train_step("mixtral", c, global_batch=256, seq_len=4096, tp=1, pp=1, ep=8, zero_stage=1)
    assert inside.ep_comm_s > 0 and inside.feasible
    assert ms.train_step("mixtral", c, global_batch=256, seq_len=4096, tp=1, pp=1, ep=1, zero_stage=3).ep_comm_s == 0
    # ep 8 with tp 2 spans two nodes: the all-to-all leaves the node and takes longer
    across = ms.train_step("mixtral", c, global_batch=256, seq_len=4096, tp=2, pp=1, ep=8, zero_stage=1)
    assert across.ep_comm_s / across.microbatches > inside.ep_comm_s / inside.microbatches


def test_context_parallel_hides_behind_attention_at_long_context():
    c = ms.cluster("dgx-h100", nodes=16)
    r = ms.train_step("llama-3-8b", c, global_batch=16, seq_len=131072, tp=8, pp=1, cp=16, zero_stage=1,
                      recompute="full")
    assert r.cp_comm_s == 0 and r.feasible
    short = ms.train_step("llama-3-8b", c, global_batch=128, seq_len=4096, tp=8, pp=1, cp=16, zero_stage=1)
    assert short.cp_comm_s > 0


def test_search_matches_the_scalar_model_and_counts_exclusions():
    c = ms.cluster("dgx-h100", nodes=16)
    s = ms.best_parallelism("llama-3-70b", c, 256, 4096, micro_batch=[1, 2], interleave=(1, 2))
    assert s.evaluated == sum(s.excluded.values()) + s.feasible
    assert any("does not fit" in k for k in s.excluded)
    best = s.best
    brute = []
    for tp in (1, 2, 4, 8):
        for pp in (1, 2, 4, 8, 16, 32, 64, 128):
            for b in (1, 2):
                for v in (1, 2):
                    for z in range(4):
                        for rc in ("none", "full"):
                            try:
                                brute.append(ms.train_step("llama-3-70b", c, 256, 4096, tp=tp, pp=pp, micro_batch=b,
                                                           interleave=v, zero_stage=z, recompute=rc).step_s)
                            except ms.MlsysimError:
                                pass
    assert len(brute) == s.feasible
    assert best.step_s == pytest.approx(min(brute))
    assert "fastest layouts" in str(s) and "<table>" in s._repr_html_()


def test_search_70b_on_1024_gpus():
    s = ms.best_parallelism("llama-3-70b", H100, 1024, 4096)
    assert s.evaluated > 10_000 and s.feasible > 100 and s.best.feasible
    assert s.best.mfu > 0.4


def test_search_rejects_impossible_requests():
    with pytest.raises(ms.InfeasibleError, match="fits in the 80 GB"):
        ms.best_parallelism("llama-3.1-405b", ms.cluster("dgx-h100", nodes=1), 8, 4096)
    with pytest.raises(ValueError, match="no candidates"):
        ms.best_parallelism("llama-3-8b", H100, 1024, 4096, tp=[], pp=[1])


def test_flop_accounting():
    gpt3 = ms.model("gpt-3")
    assert ms.training_flops(gpt3, 1, 2048) == pytest.approx(3 * gpt3.flops_per_token(2048))
    assert ms.training_flops(gpt3, 1, 2048, include_attention=False) == \
        pytest.approx(6 * gpt3.matmul_params_per_token)
    assert ms.mfu("palm", "tpu-v4", 6144, 238.3e3, 2048) == pytest.approx(0.462, abs=0.001)
    assert ms.time_to_train_s(8 * 300e9 * 175e9, 1024, 140e12) / 86400 == pytest.approx(34, rel=0.01)
    with pytest.raises(ValueError, match="accelerators"):
        ms.mfu("palm", "tpu-v4", 0, 1e5, 2048)


# --- notebook 06 widgets ---------------------------------------------------------
def test_parallel_explorer_updates_and_reports_infeasible():
    ex = ms.widgets.parallel_explorer()
    assert ex.result.feasible and "MFU" in ex.summary_text()
    before = ex.result.step_s
    ex.controls["microbatch"].value = 4
    assert ex.result.micro_batch == 4 and ex.result.step_s != before
    ex.controls["tp"].value = 1
    ex.controls["pp"].value = 1
    assert isinstance(ex.result, ms.MlsysimError) and "not feasible" in ex.summary_text()
    ex.controls["tp"].value = 8
    ex.controls["pp"].value = 4
    assert ex.error == "" and ex.result.tp == 8 and ex.result.pp == 4


def test_scaling_explorer():
    ex = ms.widgets.scaling_explorer()
    assert isinstance(ex.result[8], str) and "fits" in ex.result[8]     # 70B does not fit on 8 GPUs
    steps = [r for r in ex.result.values() if not isinstance(r, str)]
    assert len(steps) >= 4 and "1,024 GPUs" in ex.summary_text()
    ex.controls["model"].value = "Llama-3-8B"
    assert all(r.model == "Llama-3-8B" for r in ex.result.values())


@pytest.mark.parametrize("zero, ratio", [(0, 2.0), (1, 1.5)])
def test_fp32_gradients_double_what_the_reduction_moves_not_the_weight_gather(zero, ratio):
    # DDP all-reduces the gradients (fp32: twice the bytes); ZeRO-1 reduce-scatters them in
    # fp32 and all-gathers the bf16 weights: 4 + 2 bytes for 2 + 2
    c = ms.cluster("dgx-h100", nodes=16)
    kw = dict(tp=8, pp=4, zero_stage=zero, overlap=0.0)
    a = ms.train_step("llama-3-70b", c, 128, 4096, **kw)
    b = ms.train_step("llama-3-70b", c, 128, 4096, grad_precision="fp32", **kw)
    assert b.dp_comm_s / a.dp_comm_s == pytest.approx(ratio, rel=1e-4)   # the latency term stays
    assert "fp32 gradients" in str(b) and "gradients" not in str(a)
    assert b.grad_precision == "fp32" and a.grad_precision == ""


def test_the_search_keeps_the_gradient_format():
    s = ms.best_parallelism("llama-3-8b", ms.cluster("dgx-h100", nodes=2), 64, 4096, grad_precision="fp32")
    assert s.best.grad_precision == "fp32"
    assert s.best.memory.grads_B == pytest.approx(4 * s.best.memory.params_per_gpu / (s.best.dp if s.best.zero_stage >= 2 else 1))
