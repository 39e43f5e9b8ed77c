"""Serving: worked numbers, tensor parallelism, memory limits, paged KV, speculative decoding."""
import numpy as np
import pytest

import mlsysim as ms
from mlsysim import serving
from mlsysim.units import KiB


# --- worked numbers from the docstrings and the validation file ---------------------
def test_kv_bytes_per_token_match_the_published_derivations():
    expected_kib = {"llama-2-7b": 512, "llama-2-13b": 800, "llama-2-70b": 320, "llama-3-8b": 128,
                    "llama-3-70b": 320, "llama-3.1-405b": 504, "opt-13b": 800}
    for name, kib in expected_kib.items():
        assert ms.kv_cache_bytes(name, 1) == kib * KiB, name
    # DeepSeek-V3 MLA: (512 + 64) x 61 layers x 2 B = 70,272 B per token
    assert ms.kv_cache_bytes("deepseek-v3", 1) == 70272


def test_kv_cache_scales_with_precision_batch_and_context():
    one = ms.kv_cache_bytes("llama-3-8b", 4096, batch=1)
    assert ms.kv_cache_bytes("llama-3-8b", 4096, batch=3) == 3 * one
    assert ms.kv_cache_bytes("llama-3-8b", 8192, batch=1) == 2 * one
    assert ms.kv_cache_bytes("llama-3-8b", 4096, precision="fp8") == one / 2
    assert ms.kv_cache_bytes("opt-13b", 2048, precision="fp16") == pytest.approx(1.6 * 2**30, rel=0.03)


def test_decode_worked_number_llama2_7b_a100():
    r = ms.decode("llama-2-7b", "a100-80gb", context_tokens=0)
    weights = r.weight_bytes
    assert 13.0e9 < weights < 13.5e9          # the embedding table is only indexed
    assert r.memory_s == pytest.approx(r.bytes / (0.83 * 2039e9))
    assert r.overhead_s == pytest.approx(32 * 40e-6)
    assert r.comm_s == 0.0
    assert r.time_s == pytest.approx(r.memory_s + r.overhead_s)
    assert r.tokens_per_s == pytest.approx(110, rel=0.01)
    assert r.bound == "memory"


def test_prefill_worked_number_is_compute_bound_and_counts_causal_attention():
    r = ms.prefill("llama-2-7b", "a100-80gb", prompt_tokens=2048, precision="fp16", efficiency=0.70)
    roof = ms.roofline("llama-2-7b", "a100-80gb", phase="prefill", seq_len=2048, precision="fp16")
    assert r.flops == pytest.approx(roof.flops)         # one model of the pass, shared with roofline
    assert r.compute_s == pytest.approx(roof.flops / (0.7 * 312e12))
    assert r.bound == "compute" and r.time_s == pytest.approx(0.128, rel=0.01)
    assert round(r.time_s * 1e3, 1) == 127.8            # the scalar override keeps its number
    longer = ms.prefill("llama-2-7b", "a100-80gb", prompt_tokens=4096, precision="fp16")
    assert longer.flops > 2 * r.flops                   # attention pairs grow quadratically


def test_prefill_times_its_gemms_by_shape_by_default():
    kw = dict(prompt_tokens=2048, precision="fp16")
    d = ms.prefill("llama-2-7b", "a100-80gb", **kw)
    n = ms.prefill("llama-2-7b", "a100-80gb", efficiency=None, **kw)
    assert d == n and d.gemm_shapes and d.time_s == n.time_s
    assert round(d.time_s * 1e3, 1) == 126.5 and d.bound == "compute"    # docstring worked number
    # the record's efficiency is the achieved fraction, and it reproduces the compute time
    assert d.efficiency == pytest.approx(d.flops / (312e12 * d.compute_s))
    assert d.peak_flops == pytest.approx(d.efficiency * 312e12)
    assert "GEMM shapes" in str(d) and "71% of peak" in str(d)
    s = ms.prefill("llama-2-7b", "a100-80gb", efficiency=0.70, **kw)
    assert not s.gemm_shapes and s.efficiency == 0.70 and "GEMM shapes" not in str(s)
    # a short prompt: the default lands within 6 % of TensorRT-LLM's 16 ms, the scalar 42 % short
    shape = ms.prefill("llama-2-7b", "a100-80gb", prompt_tokens=128, precision="fp16")
    flat = ms.prefill("llama-2-7b", "a100-80gb", prompt_tokens=128, precision="fp16", efficiency=0.70)
    assert abs(shape.time_s / 0.016 - 1) < 0.07 and flat.time_s / 0.016 < 0.6


def test_generate_and_plan_use_the_shape_aware_prefill():
    g = ms.generate("llama-2-7b", "h100", prompt_tokens=128, output_tokens=20)
    assert g.ttft_s == ms.prefill("llama-2-7b", "h100", prompt_tokens=128).time_s
    assert g.gemm_shapes and g.prefill_efficiency == pytest.approx(
        ms.prefill("llama-2-7b", "h100", prompt_tokens=128).efficiency)
    s = ms.generate("llama-2-7b", "h100", prompt_tokens=128, output_tokens=20, efficiency=0.70)
    assert s.ttft_s == ms.prefill("llama-2-7b", "h100", prompt_tokens=128, efficiency=0.70).time_s
    assert s.itl_s == pytest.approx(g.itl_s) and s.prefill_efficiency == 0.70   # decode is unchanged
    plan = ms.serving_plan("llama-3-8b", "h100", tp=[1], prompt_tokens=4096, output_tokens=512)
    assert plan.candidates[0]["ttft_s"] == ms.prefill("llama-3-8b", "h100", prompt_tokens=4096).time_s


def test_defaults_are_explicit_inputs():
    a = ms.decode("llama-3-8b", "h100", efficiency=1.0, mem_efficiency=1.0, layer_overhead_s=0.0,
                  context_tokens=0)
    roof = ms.roofline("llama-3-8b", "h100", batch=1)
    assert a.time_s == pytest.approx(roof.time_s)       # with ideal inputs, the roofline bound
    b = ms.decode("llama-3-8b", "h100", context_tokens=0)
    assert b.time_s > a.time_s


def test_decode_turns_compute_bound_past_the_ridge():
    b_star = ms.crossover_batch("llama-3-8b", "h100", efficiency=serving.DEFAULT_EFFICIENCY,
                                mem_efficiency=serving.DEFAULT_MEM_EFFICIENCY)
    assert ms.decode("llama-3-8b", "h100", batch=b_star - 1, context_tokens=0).bound == "memory"
    assert ms.decode("llama-3-8b", "h100", batch=b_star, context_tokens=0).bound == "compute"
    r = ms.decode("llama-3-8b", "h100", batch=8)
    assert r.ridge == pytest.approx(0.7 * 989.4e12 / (0.83 * 3.35e12))


def test_step_time_is_roof_plus_communication_plus_overhead():
    r = ms.decode("llama-3-70b", "h100", tp=8, batch=4, context_tokens=1000)
    m = ms.model("llama-3-70b")
    msg = 4 * m.d_model * 2.0
    one = ms.allreduce_time(msg, 8, ms.hardware("h100").scaleup_Bps, serving.ALLREDUCE_STEP_S)
    assert r.comm_s == pytest.approx(2 * m.layers * (one + serving.ALLREDUCE_BASE_S))
    assert r.time_s == pytest.approx(max(r.compute_s, r.memory_s) + r.comm_s + r.overhead_s)


# --- tensor parallelism -----------------------------------------------------------------
def test_tp_divides_weights_flops_and_kv_heads():
    one = ms.decode("llama-3-8b", "h100", tp=1, batch=8)
    two = ms.decode("llama-3-8b", "h100", tp=2, batch=8)
    assert two.weight_bytes == pytest.approx(one.weight_bytes / 2)
    assert two.flops == pytest.approx(one.flops / 2)
    assert two.kv_bytes == pytest.approx(one.kv_bytes / 2)
    assert two.activation_bytes == one.activation_bytes     # the residual stream is whole on each GPU


def test_gqa_kv_heads_are_replicated_when_tp_exceeds_them():
    # Llama-3-70B has 8 KV heads: tp=16 still stores 1/8 of the cache per GPU
    assert ms.kv_cache_bytes("llama-3-70b", 1000, tp=8) == ms.kv_cache_bytes("llama-3-70b", 1000) / 8
    assert ms.kv_cache_bytes("llama-3-70b", 1000, tp=16) == ms.kv_cache_bytes("llama-3-70b", 1000) / 8
    # MLA keeps one latent per token: every GPU holds all of it
    assert ms.kv_cache_bytes("deepseek-v3", 1000, tp=8) == ms.kv_cache_bytes("deepseek-v3", 1000)


def test_tp_that_does_not_split_the_heads_is_an_error_or_masked():
    with pytest.raises(ms.InfeasibleError, match="tp=3.*64 query heads"):
        ms.decode("llama-3-70b", "h100", tp=3)
    odd = ms.Transformer(name="odd", layers=2, d_model=768, heads=24, kv_heads=8, d_ff=1024, vocab=100)
    with pytest.raises(ms.InfeasibleError, match="8 KV heads must divide one another"):
        ms.kv_cache_bytes(odd, 10, tp=12)       # 12 splits 24 query heads but not 8 KV heads
    r = ms.decode("llama-3-70b", "h100", tp=np.array([2, 3, 4, 8]))
    assert list(r.feasible) == [True, False, True, True] and np.isnan(r.time_s[1])
    assert "tp does not split" in r.reason


def test_model_too_large_for_one_gpu_is_never_timed_on_one():
    with pytest.raises(ms.InfeasibleError, match="tp=2"):
        ms.decode("llama-3-70b", "h100")
    assert ms.min_tp("llama-3-70b", "h100") == 2
    assert ms.decode("llama-3-70b", "h100", tp=ms.min_tp("llama-3-70b", "h100")).feasible
    assert ms.min_tp("llama-3-8b", "h100") == 1
    with pytest.raises(ms.InfeasibleError, match="does not fit on up to 8"):
        ms.min_tp("llama-3.1-405b", "h100")
    assert ms.min_tp("llama-3.1-405b", "h100", max_tp=16) == 16


def test_tp_needs_a_scale_up_link():
    with pytest.raises(ms.InfeasibleError, match="scale-up link"):
        ms.decode("llama-3-8b", "l4", tp=2, context_tokens=0)
    assert ms.decode("llama-3-8b", "l4", tp=1, context_tokens=0).feasible


# --- memory limits --------------------------------------------------------------------
@pytest.mark.parametrize("model,dev,context,tp", [("llama-3-8b", "h100", 8191, 1),
                                                  ("llama-3-70b", "h100", 4000, 4),
                                                  ("deepseek-v3", "b200", 16000, 8)])
def test_max_batch_is_the_largest_batch_decode_accepts(model, dev, context, tp):
    b = ms.max_batch(model, dev, context_tokens=context, tp=tp)
    assert b >= 1
    assert ms.decode(model, dev, batch=b, context_tokens=context, tp=tp).feasible
    with pytest.raises(ms.InfeasibleError):
        ms.decode(model, dev, batch=b + 1, context_tokens=context, tp=tp)


def test_max_context_is_the_longest_cache_decode_accepts():
    c = ms.max_context("llama-3-70b", "h100", batch=8, tp=2)
    assert ms.decode("llama-3-70b", "h100", batch=8, tp=2, context_tokens=c - 1).feasible
    with pytest.raises(ms.InfeasibleError):
        ms.decode("llama-3-70b", "h100", batch=8, tp=2, context_tokens=c)
    assert ms.max_context("llama-3-8b", "b200") == ms.model("llama-3-8b").max_context   # window caps it


def test_memory_limits_refuse_what_cannot_fit():
    with pytest.raises(ms.InfeasibleError, match="weights"):
        ms.max_batch("llama-3-70b", "h100")
    assert np.isnan(ms.max_batch("llama-3-70b", "h100", tp=np.array([1, 2])))[0]
    s = ms.serving_memory("llama-3-70b", "h100")
    assert not s.feasible and s.free_B < 0
    assert ms.serving_memory("llama-3-70b", "h100", tp=2).feasible


def test_array_sweep_masks_infeasible_points_and_matches_scalar_calls():
    b = np.array([1.0, 64.0, 512.0])[:, None]
    c = np.array([0.0, 8192.0])[None, :]
    r = ms.decode("llama-3-8b", ["a100-80gb", "h100"], batch=b, context_tokens=c)
    assert r.time_s.shape == (2, 3, 2) and r.bound.shape == (2, 3, 2)
    assert not r.feasible[1, 2, 1] and np.isnan(r.time_s[1, 2, 1]) and r.bound[1, 2, 1] == "infeasible"
    single = ms.decode("llama-3-8b", "h100", batch=64, context_tokens=0)
    assert r.time_s[1, 1, 0] == pytest.approx(single.time_s)


def test_contexts_beyond_the_window_raise_or_are_masked():
    with pytest.raises(ms.InfeasibleError, match="context window"):
        ms.decode("llama-2-7b", "h100", context_tokens=4096)
    r = ms.decode("llama-2-7b", "h100", context_tokens=np.array([100.0, 4096.0]))
    assert list(r.feasible) == [True, False] and "window" in r.reason


# --- paged KV -------------------------------------------------------------------------
def test_paged_waste_is_the_last_block_and_capacity_follows_block_size_and_mix():
    p = ms.paged_kv("llama-3-8b", "h100", lengths=[100, 1000], probabilities=[0.5, 0.5], block_tokens=16,
                    max_tokens=2048)
    # blocks: ceil(100/16) = 7 (12 slots wasted), ceil(1000/16) = 63 (8 wasted)
    assert p.mean_blocks == 35.0 and p.waste_tokens == pytest.approx(10.0)
    budget = 0.9 * 80e9 - ms.model("llama-3-8b").params * 2
    assert p.requests_paged == pytest.approx(budget / (35 * 16 * 128 * KiB))
    assert p.requests_contiguous == np.floor(budget / (2048 * 128 * KiB))
    sizes = ms.paged_kv("llama-3-8b", "h100", lengths=[100, 1000], block_tokens=np.array([1, 16, 256, 1024]),
                        max_tokens=2048)
    assert np.all(np.diff(sizes.requests_paged) < 0)          # bigger blocks, more waste, fewer requests
    short = ms.paged_kv("llama-3-8b", "h100", lengths=[100], block_tokens=16, max_tokens=2048)
    assert short.requests_paged > p.requests_paged             # the mix matters
    assert short.requests_contiguous == p.requests_contiguous  # contiguous ignores it


def test_paged_kv_bad_input():
    with pytest.raises(ms.InfeasibleError, match="max_tokens"):
        ms.paged_kv("llama-3-8b", "h100", lengths=[5000], max_tokens=4096)
    with pytest.raises(ValueError, match="probabilities"):
        ms.paged_kv("llama-3-8b", "h100", lengths=[10, 20], probabilities=[1.0])
    with pytest.raises(ValueError, match="block_tokens"):
        ms.paged_kv("llama-3-8b", "h100", lengths=[10], block_tokens=2.5)
    with pytest.raises(ms.InfeasibleError, match="no KV memory"):
        ms.paged_kv("llama-3-70b", "h100", lengths=[10])


# --- a whole request ----------------------------------------------------------------
def test_generate_sums_decode_steps_exactly():
    for b, p, n in [(1, 128, 20), (64, 512, 300), (400, 16, 200)]:
        g = ms.generate("llama-3-8b", "h100", prompt_tokens=p, output_tokens=n, batch=b)
        steps = ms.decode("llama-3-8b", "h100", batch=b, context_tokens=p + np.arange(n - 1.0)).time_s
        assert g.decode_s == pytest.approx(np.sum(steps), rel=1e-9)
        assert g.ttft_s == pytest.approx(ms.prefill("llama-3-8b", "h100", prompt_tokens=p, batch=b).time_s)
        assert g.e2e_s == pytest.approx(g.ttft_s + g.decode_s)


def test_generate_checks_memory_at_the_last_token():
    with pytest.raises(ms.InfeasibleError, match="last token"):
        ms.generate("llama-3-8b", "h100", prompt_tokens=1000, output_tokens=8000, batch=64)
    g = ms.generate("llama-3-8b", "h100", prompt_tokens=1000, output_tokens=np.array([100.0, 8000.0]), batch=64)
    assert list(g.feasible) == [True, False]
    with pytest.raises(ValueError, match="output_tokens"):
        ms.generate("llama-3-8b", "h100", output_tokens=1)


# --- speculative decoding ------------------------------------------------------------
def test_expected_accepted_tokens():
    assert ms.expected_accepted_tokens(4, 0.0) == 1.0
    assert ms.expected_accepted_tokens(4, 1.0) == 5.0
    assert ms.expected_accepted_tokens(4, 0.8) == pytest.approx(sum(0.8 ** i for i in range(5)))
    a = np.array([0.0, 0.5, 1.0])
    assert np.allclose(ms.expected_accepted_tokens(3, a), [1.0, 1.875, 4.0])
    with pytest.raises(ValueError, match="acceptance_rate"):
        ms.expected_accepted_tokens(3, 1.5)


def test_speculative_speedup_follows_its_definition():
    s = ms.speculative_decode("llama-2-70b", "h100", draft="llama-2-7b", k=4, acceptance_rate=0.8, tp=4)
    assert s.time_per_token_s == pytest.approx((s.draft_s + s.verify_s) / s.tokens_per_step)
    assert s.speedup == pytest.approx(s.baseline_s / s.time_per_token_s)
    flat = ms.speculative_decode("llama-2-70b", "h100", draft="llama-2-7b", k=4, acceptance_rate=0.8, tp=4,
                                 efficiency=0.70)
    assert flat.verify_s == pytest.approx(flat.baseline_s, rel=0.05)   # verifying 5 tokens costs about one step
    assert flat.baseline_s == s.baseline_s and flat.draft_s == s.draft_s  # decode steps do not change
    # by GEMM shape 5 rows are a GEMV-like pass (at most THIN_ROWS rows): memory-bound like a decode step
    v = ms.prefill("llama-2-70b", "h100", prompt_tokens=5, context_tokens=2048, tp=4)
    assert v.bound == "memory" and s.verify_s > v.time_s   # plus the 4 extra positions' logits,
    assert s.verify_s - v.time_s == pytest.approx(4 * 2 * 32000 * 8192 / 4 / (0.70 * 989.4e12))  # at 0.70·P
    assert round(s.verify_s / s.baseline_s, 2) == 1.0 and round(s.speedup, 2) == 1.92
    # past THIN_ROWS rows the pass runs in 128-row output tiles and turns compute-bound
    wide = ms.speculative_decode("llama-2-70b", "h100", draft="llama-2-7b", k=4, acceptance_rate=0.8, tp=4,
                                 batch=16)
    assert wide.verify_s > 1.2 * wide.baseline_s and ms.prefill("llama-2-70b", "h100", prompt_tokens=5, batch=16,
                                                                context_tokens=2048, tp=4).bound == "compute"
    none = ms.speculative_decode("llama-2-70b", "h100", draft="llama-2-7b", k=4, acceptance_rate=0.0, tp=4)
    assert none.speedup < 1.0                                     # nothing accepted: pure overhead
    assert "speed-up" in str(s)


# --- records and bad input --------------------------------------------------------------
def test_records_print_and_render():
    for rec in [ms.decode("llama-3-8b", "h100"), ms.prefill("llama-3-70b", "h100", tp=4),
                ms.serving_memory("llama-3-8b", "h100"), ms.generate("llama-3-8b", "h100"),
                ms.paged_kv("llama-3-8b", "h100", lengths=[100, 200], max_tokens=4096)]:
        text = str(rec)
        assert text and "<table>" in rec._repr_html_()
        assert all(len(line) <= 90 for line in text.split("\n")), text
    assert "shape" in str(ms.decode("llama-3-8b", "h100", batch=np.array([1, 2])))


@pytest.mark.parametrize("call,match", [
    (lambda: ms.decode("llama-3-8b", "h100", batch=0), "batch"),
    (lambda: ms.decode("llama-3-8b", "h100", context_tokens=-1), "context_tokens"),
    (lambda: ms.prefill("llama-3-8b", "h100", prompt_tokens=0), "prompt_tokens"),
    (lambda: ms.decode("llama-3-8b", "h100", tp=0), "tp"),
    (lambda: ms.decode("llama-3-8b", "h100", tp=1.5), "tp"),
    (lambda: ms.decode("llama-3-8b", "h100", efficiency=0), "efficiency"),
    (lambda: ms.decode("llama-3-8b", "h100", mem_efficiency=1.2), "mem_efficiency"),
    (lambda: ms.decode("llama-3-8b", "h100", layer_overhead_s=-1e-6), "layer_overhead_s"),
    (lambda: ms.decode("llama-3-8b", "h100", precision="fp12"), "precision"),
    (lambda: ms.decode("llama-3-8b", "a100", precision="fp8"), "A100"),
    (lambda: ms.decode("resnet-50", "h100"), "not a Transformer"),
    (lambda: ms.decode("llama-3-8b", []), "empty"),
    (lambda: ms.min_tp("llama-3-8b", "h100", phase="training"), "phase"),
    (lambda: ms.speculative_decode("llama-3-8b", "h100", draft="llama-2-7b", k=-1), "k"),
])
def test_bad_input_names_the_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- planning helpers -------------------------------------------------------------------
def test_length_mix_is_a_normalised_skewed_distribution():
    lengths, p = ms.length_mix(500, 2048)
    assert lengths[0] == 1 and lengths[-1] == 2048 and np.isclose(p.sum(), 1.0)
    assert np.all(np.diff(p) < 0)                       # shorter requests are more likely
    assert 400 < lengths @ p < 500.5                     # truncation lowers the mean a little
    with pytest.raises(ValueError, match="mean_tokens"):
        ms.length_mix(0, 2048)


def test_serving_plan_agrees_with_decode_and_prefill():
    plan = ms.serving_plan("llama-3-70b", ["h100", "b200"], ttft_s=0.5, itl_s=0.03, prompt_tokens=4096,
                           output_tokens=512)
    by = {(c["device"], c["tp"]): c for c in plan.candidates}
    assert not by[("H100-SXM", 1)]["fits"] and by[("B200-HGX", 1)]["fits"]
    c = by[("H100-SXM", 4)]
    b = int(c["max_batch"])
    assert ms.decode("llama-3-70b", "h100", tp=4, batch=b, context_tokens=4608).time_s <= 0.03
    slower = ms.decode("llama-3-70b", "h100", tp=4, batch=b + 1, context_tokens=4608)
    assert slower.time_s > 0.03
    assert c["ttft_s"] == pytest.approx(ms.prefill("llama-3-70b", "h100", prompt_tokens=4096, tp=4).time_s)
    assert c["tokens_per_s"] == pytest.approx(b / ms.decode("llama-3-70b", "h100", tp=4, batch=b,
                                                            context_tokens=4608).time_s)
    best = plan.best
    assert best["meets"] and all(best["tokens_per_s_per_gpu"] >= x["tokens_per_s_per_gpu"]
                                 for x in plan.candidates if x["meets"])
    assert "best" in str(plan) and len(plan.table_rows()) == len(plan.candidates)
    none = ms.serving_plan("llama-3-70b", "a100-80gb", ttft_s=0.01, itl_s=0.001)
    assert none.best is None and "none meets" in str(none)


def test_utilization_is_achieved_over_dense_peak():
    r = ms.prefill("llama-2-7b", "a100-80gb", prompt_tokens=2048, precision="fp16", efficiency=0.70)
    assert r.utilization == pytest.approx(r.flops / r.time_s / 312e12)
    assert 0.6 < r.utilization < 0.7                     # close to the 66 % TensorRT-LLM reached
    d = ms.prefill("llama-2-7b", "a100-80gb", prompt_tokens=2048, precision="fp16")
    assert d.utilization == pytest.approx(d.flops / d.time_s / 312e12)
    assert round(d.utilization, 3) == 0.700              # GEMMs by shape: 0.707 of peak less the fixed costs


def test_decode_and_prefill_broadcast_over_hardware_fields():
    """Array-valued hardware specs (sensitivity studies) give arrays, one per spec value."""
    h = ms.scale_hardware(ms.hardware("h100"), bandwidth=np.array([0.5, 1.0, 2.0]))
    itl = ms.decode("llama-3-8b", h, context_tokens=1024).time_s
    assert itl.shape == (3,) and itl[0] > itl[1] > itl[2]
    assert itl[1] == pytest.approx(ms.decode("llama-3-8b", "h100", context_tokens=1024).time_s)
    ttft = ms.prefill("llama-3-8b", h, prompt_tokens=2048).time_s
    assert ttft.shape == (3,)


def test_thin_prefill_costs_a_decode_step_and_ttft_never_falls_at_the_switch():
    from mlsysim.kernels import THIN_ROWS
    for model, hw, tp in [("llama-3-8b", "a100", 1), ("llama-2-70b", "h100", 4), ("llama-2-70b", "h100", 8)]:
        one = ms.prefill(model, hw, prompt_tokens=1, context_tokens=2048, tp=tp)
        step = ms.decode(model, hw, context_tokens=2048, tp=tp)
        assert one.time_s == pytest.approx(step.time_s, rel=0.01) and one.bound == step.bound == "memory"
        times = [ms.prefill(model, hw, prompt_tokens=t, tp=tp).time_s for t in (THIN_ROWS - 1, THIN_ROWS,
                                                                              THIN_ROWS + 1)]
        assert times[0] <= times[1] <= times[2]
    sweep = ms.prefill("llama-3-8b", "h100", prompt_tokens=np.arange(1, 200))
    assert np.all(np.diff(sweep.time_s) >= 0)
    assert sweep.time_s[THIN_ROWS - 1] == ms.prefill("llama-3-8b", "h100", prompt_tokens=THIN_ROWS).time_s


def test_serving_case_notes_state_what_the_model_gives():
    from mlsysim.validation import serving as v
    cases = {c.id: c for c in v.CASES}
    out = {c.id: o for c, o in zip(v.CASES, ms.validation.run(v.CASES))}
    pct = lambda x: round(abs(x) * 100)   # noqa: E731
    a100 = dict(precision="fp16")
    long7 = ms.prefill("llama-2-7b", "a100-80gb", prompt_tokens=2048, **a100)
    assert pct(long7.efficiency) == 71 and "reach 71 % of the 312 TFLOP/s" in cases["V4-serving"].note
    r70 = ms.prefill("llama-2-70b", "a100-80gb", prompt_tokens=2048, tp=4, **a100)
    assert pct(r70.comm_s / r70.time_s) == 8 and "about 8 % of the time" in \
        cases["trt-llm/ttft/llama-2-70b-tp4-2048"].note
    short = [ms.prefill(n, "a100-80gb", prompt_tokens=128, tp=t, **a100).efficiency
             for n, t in (("llama-2-7b", 1), ("llama-2-70b", 4))]
    scalar = [out[f"trt-llm/ttft/{n}-128-eta0.70"].error for n in ("llama-2-7b-tp1", "llama-2-70b-tp4")]
    for n in ("llama-2-7b-tp1-128", "llama-2-70b-tp4-128"):
        assert f"reach {pct(min(short))}-{pct(max(short))} % of peak" in cases[f"trt-llm/ttft/{n}"].note
        assert f"misses that by {pct(min(scalar))} %" in cases[f"trt-llm/ttft/{n}"].note
        assert f"is {pct(max(scalar))} % short" in cases[f"trt-llm/ttft/{n}-eta0.70"].note
    b384 = cases["trt-llm/throughput/llama-2-7b-b384-128-128"]
    m7 = ms.model("llama-2-7b")
    assert f"{384 * m7.kv_heads * m7.layers:,} small work blocks" in b384.note
    bytes_only = ms.generate("llama-2-7b", "a100-80gb", prompt_tokens=128, output_tokens=128, batch=384, **a100)
    assert f"{pct(bytes_only.tokens_per_s / b384.published - 1)} % optimistic" in b384.note
    nemo = [o.error for i, o in out.items() if i.startswith("nemo/")]
    assert all(e < 0 for e in nemo)
    assert all(f"{pct(max(nemo))}-{pct(min(nemo))} % under" in cases[i].note for i in out if i.startswith("nemo/"))
