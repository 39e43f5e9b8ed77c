"""The claims of the book pages (book/*.md), computed from the package.

A sentence of a page that compares, gives a cause, a tolerance or a percentage carries an
invisible mark ``<!-- claim: <id> -->``; the assert here whose message starts with
``claim <id>:`` keeps that sentence true when the models change (tools/prose_claims.py checks
that every mark has its assert).
"""
from __future__ import annotations


import numpy as np
import pytest

import mlsysim as ms
from mlsysim.validation import Case, Outcome
from mlsysim.validation import training as vt

OUTCOMES = ms.validation.run()
SERIES = ms.validation.series()


# --- accuracy.md ---------------------------------------------------------------------------------

def test_accuracy_tolerances_and_failures():
    counts = [o for o in OUTCOMES if o.case.id.startswith(("params/", "active/"))]
    coarse = [o.case.id for o in counts if o.case.tolerance > 0.02]
    assert counts and coarse == ["params/GPT-2-XL"] and max(o.case.tolerance for o in counts) <= 0.045, \
        "claim count-tolerance: parameter counts within 2 %, GPT-2 XL within its card's rounding"
    gpt2xl = next(o for o in counts if o.case.id == "params/GPT-2-XL")
    assert gpt2xl.case.tolerance == 0.045 and gpt2xl.case.published == 1.5e9 \
        and round(gpt2xl.predicted / 1e9, 3) == 1.558 and 0.02 < gpt2xl.miss <= 0.045, \
        "claim count-tolerance: GPT-2 XL within 4.5 %, its card rounding 1.558B to 1.5B"
    case = Case(id="x", area="x", title="x", published=1.0, unit="s", predict=lambda: 0.0, tolerance=0.1,
                source="x")
    assert not Outcome(case, 1.11).passed and all(o.passed for o in OUTCOMES), \
        "claim miss-fails-suite: a case that misses by more than its tolerance fails; every case passes"


def test_accuracy_scaling_series():
    assert len(SERIES) >= 5 and all(s.target == 0.15 for s in SERIES), \
        "claim series-within-15: every series aims at ±15 % on every point"
    for s in SERIES:
        points = s.run()
        pub, pred = [p for _, p, _ in points], [q for _, _, q in points]
        assert all(abs(q / p - 1) <= s.target for p, q in zip(pub, pred)), \
            f"claim every-series-meets-aim: {s.name} misses ±{s.target:.0%}"
        assert s.trend(pred) == s.trend(pub) != 0, f"claim every-series-meets-aim: {s.name}'s trend"
    case_ids = {o.case.id for o in OUTCOMES}
    assert all(label in case_ids for s in SERIES for label, _, _ in s.points), \
        "claim series-points-are-cases: every point of a series is also a case"
    titan = [s for s in SERIES if s.name.startswith("torchtitan")]
    assert titan and all(s.unit == "tokens/s per GPU" for s in titan), \
        "claim series-units: torchtitan's series are in tokens/s per GPU"


def test_accuracy_kernel_rates():
    h100, a100 = ms.hardware("h100"), ms.hardware("a100")
    assert abs(h100.matmul_efficiency * h100.peak("bf16") / 1e12 - 730) < 1, \
        "claim h100-sustained-gemm: the H100's GEMMs at 730 TFLOP/s"
    assert abs(vt.H100_BEST_ITERATION * h100.peak("bf16") / 1e12 - 794.5) < 0.05 \
        and vt.H100_BEST_ITERATION > h100.matmul_efficiency, \
        "claim h100-sustained-gemm: not the 794.5 TFLOP/s of a short benchmark's best iteration"
    assert a100.attention_efficiency == 0.60 and h100.attention_efficiency == 0.35, \
        "claim flash-attention-fraction: fused attention at 0.60 of the A100's peak, 0.35 of the H100's"


def test_accuracy_series_software():
    policies = {(rc, share) for _, _, _, rc, share, _, _ in vt.TORCHTITAN_RUNS}
    assert policies == {("none", 0.0), ("none", 0.5), ("full", 0.0)}, \
        "claim series-software: torchtitan recomputes none, every second layer or every layer"
    llama = vt.llama3(vt.LLAMA3_TABLE4[0])
    megatron = vt.megatron_core_strong(96)
    assert llama.grad_precision == "fp32" and megatron.grad_precision == "fp32" \
        and llama.precision == megatron.precision == "bf16", \
        "claim series-software: Megatron-LM and Llama 3 reduce their bf16 gradients in fp32"
    notes = {s.name.split(" ")[0]: s.note for s in SERIES}
    assert "Recomputing every layer" in notes["Llama"], \
        "claim series-other-choices: the Llama 3 note says what full recomputation would predict"
    h100_note = next(s.note for s in SERIES if "H100" in s.name and s.name.startswith("Megatron"))
    assert "794.5" in h100_note and "bf16 gradients" in h100_note, \
        "claim series-other-choices: the H100 note says what a cold GPU's rate or bf16 gradients predict"


# --- intro.md ------------------------------------------------------------------------------------

def test_intro_picture():
    decode = ms.roofline("llama-3-8b", "h100", batch=[1, 16, 256, 1024])
    prefill = ms.roofline("llama-3-8b", "h100", phase="prefill", seq_len=2048)
    assert decode.utilization[0] < 0.01, "claim intro-one-conversation-idle: batch 1 leaves almost all idle"
    assert decode.bound[-1] == "compute" and prefill.bound == "compute", \
        "claim intro-compute-roof: a large batch or a long prompt reaches the compute roof"


# --- conventions.md ------------------------------------------------------------------------------

def test_conventions():
    m = ms.model("llama-3-8b")
    assert m.flops_per_token(0) == 2 * m.matmul_params_per_token, \
        "claim forward-two-flop: 2 FLOP per weight per token plus attention"
    for s in (2048, 8192):
        assert ms.training_flops(m, 1, s) == pytest.approx(3 * m.flops_per_token(s), rel=1e-12), \
            "claim training-three-forward: training costs three times the forward pass"
    macs = next(c for c in ms.validation.cases() if c.id == "macs/ResNet-50")
    assert ms.model("resnet-50").flops_per_sample == pytest.approx(2 * macs.published, rel=0.01), \
        "claim macs-converted: torchvision's multiply-adds become 2 FLOP each"
    assert ms.hardware("h100").scaleup_Bps == 450e9, "claim nvlink-per-direction: 450 GB/s per direction"
    assert ms.hardware("tpu-v4").memory_B == 32 * 2**30, "claim tpu-v4-gib: TPU v4's 32 GiB"


# --- glossary.md ---------------------------------------------------------------------------------

A100_64 = ms.cluster("dgx-a100", nodes=8)
H100_64 = ms.cluster("dgx-h100", nodes=8)
FSDP = dict(tp=1, pp=1, micro_batch=1, zero_stage=3)


def test_glossary_recomputation_hfu_mfu():
    def step(**kw):
        return ms.train_step("llama-3-8b", H100_64, 64, 8192, **{**FSDP, **kw})
    none, half, full = step(recompute="none"), step(recompute="none", recompute_fraction=0.5), \
        step(recompute="full")
    assert none.step_s < half.step_s < full.step_s \
        and none.memory_per_gpu_B > half.memory_per_gpu_B > full.memory_per_gpu_B, \
        "claim partial-recompute-between: a share of the layers lies between none and full"
    assert full.mfu < none.mfu and full.hfu > full.mfu, \
        "claim recompute-hfu-mfu: recomputation lowers MFU and lifts HFU above it"
    assert none.attention == "flash" and none.hfu < none.mfu, \
        "claim hfu-below-mfu: without recomputation a causal kernel's HFU lies below MFU"


def test_glossary_fusion():
    m = ms.model("llama-3-8b")
    fwd, bwd = ms.elementwise.layer_bytes(m, 2.0)
    fused = 3 * (2 * (m.saved_activation_elements - 2 * m.d_model) + 4 * m.heads)
    assert (fwd + bwd) / fused > 3, "claim eager-bytes: an eager Llama layer moves several times the bytes"

    def extra(name, c):
        kw = dict(**FSDP, recompute="full", grad_precision="fp32")
        eager = ms.train_step(name, c, 64, 8192, elementwise="eager", **kw).step_s
        return eager / ms.train_step(name, c, 64, 8192, **kw).step_s - 1
    assert extra("llama-3-8b", A100_64) > extra("llama-3-70b", A100_64), \
        "claim eager-small-fast: eager kernels cost a small model more"
    assert extra("llama-3-8b", H100_64) > extra("llama-3-8b", A100_64), \
        "claim eager-small-fast: eager kernels cost a fast GPU more"


def test_glossary_collectives():
    n, bw, lat = 64, 50e9, 5e-6
    big = 1e9
    assert ms.allreduce_time(big, n, bw) == pytest.approx(2 * (n - 1) / n * big / bw), \
        "claim ring-traffic: a ring sends 2(n-1)/n times the buffer per rank"
    small = [ms.allreduce_time(1e4, n, bw, lat, algorithm=a) for a in ("ring", "tree")]
    large = [ms.allreduce_time(big, n, bw, lat, algorithm=a) for a in ("ring", "tree")]
    assert small[1] < small[0] and large[0] < large[1], \
        "claim tree-small-buffers: a tree wins for small buffers, a ring for large ones"


def test_glossary_carbon():
    g = lambda name: ms.grid(name).carbon_g_per_kWh  # noqa: E731
    clean, coal = ("Quebec", "France", "Norway", "Sweden", "Iceland"), ("Poland", "Warsaw", "India")
    ratios = [g(c) / g(k) for c in coal for k in clean]
    assert min(ratios) > 10 and max(ratios) > 100, \
        "claim carbon-spread: hydro or nuclear against coal, a factor of ten to several hundred"


def test_glossary_elasticity():
    h100 = ms.hardware("h100")
    time_at = lambda bandwidth: ms.roofline(  # noqa: E731
        "llama-3-8b", ms.scale_hardware(h100, peak=1.0, bandwidth=bandwidth)).time_s
    s = ms.sensitivity(lambda bandwidth: ms.roofline("llama-3-8b", ms.scale_hardware(h100, bandwidth=bandwidth)),
                       {"bandwidth": 1.0})
    change = time_at(1.1) / time_at(1.0) - 1
    assert s["bandwidth"].elasticity == pytest.approx(-1.0, abs=1e-6) and -0.11 < change < -0.08, \
        "claim elasticity-minus-one: 10 % more input gives about 10 % less result"


def test_glossary_serving():
    m = ms.model("llama-3-8b")
    assert ms.decode(m, "h100", context_tokens=2048, batch=1).bound == "memory", \
        "claim decode-memory-bound: decode is memory-bound at small batch"
    assert ms.prefill(m, "h100", prompt_tokens=2048, batch=1).bound == "compute", \
        "claim prefill-compute-bound: prefill is compute-bound for long prompts"
    r = ms.roofline(m, "h100", batch=np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]))
    assert np.all(np.diff(r.intensity) > 0) and r.bound[0] == "memory" and r.bound[-1] == "compute", \
        "claim crossover-batch: intensity grows with the batch until it reaches the ridge"
    weights = m.params * ms.units.BYTES_PER_ELEMENT["bf16"]
    assert ms.kv_cache_bytes(m, context_tokens=8192, batch=16, precision="bf16") > weights, \
        "claim kv-outgrows-weights: the KV cache of a modest batch outgrows the weights"


def test_glossary_pipeline():
    c = ms.cluster("dgx-h100", nodes=16)
    kw = dict(tp=8, pp=4, dp=4, micro_batch=1)
    plain = ms.train_step("llama-3-70b", c, 256, 4096, **kw)
    inter = ms.train_step("llama-3-70b", c, 256, 4096, interleave=2, **kw)
    p, m = plain.pp, plain.microbatches
    assert plain.bubble_fraction == pytest.approx((p - 1) / m) \
        and inter.bubble_fraction == pytest.approx((p - 1) / (2 * m)), \
        "claim bubble-formula: (p-1)/m of the ideal step, divided by v when interleaved"
    assert inter.bubble_s < plain.bubble_s and inter.pp_comm_s > plain.pp_comm_s, \
        "claim interleave-bubble-comm: interleaving shortens the bubble and adds communication"
    more = ms.train_step("llama-3-70b", c, 512, 4096, **kw)
    assert more.microbatches > m and more.bubble_fraction < plain.bubble_fraction, \
        "claim more-microbatches-less-bubble: more microbatches shrink the bubble"


def test_glossary_precision_and_sparsity():
    h100 = ms.hardware("h100")
    assert h100.peak("fp8") > h100.peak("bf16") > h100.peak("fp32"), \
        "claim precision-peak: fewer bytes per element raise the peak"
    assert ms.units.BYTES_PER_ELEMENT["fp8"] < ms.units.BYTES_PER_ELEMENT["bf16"] < \
        ms.units.BYTES_PER_ELEMENT["fp32"], "claim precision-peak: fp8 < bf16 < fp32 bytes"
