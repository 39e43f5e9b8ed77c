"""The claims of the book pages (book/*.md), computed from the package.

A sentence of a page that compares, gives a cause, a tolerance or a percentage carries an
invisible mark ``<!-- claim: <id> -->``; the assert here whose message starts with
``claim <id>:`` keeps that sentence true when the models change (tools/prose_claims.py checks
that every mark has its assert).
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

import mlsysim as ms
from mlsysim.validation import Case, Outcome
from mlsysim.validation import training as vt

ROOT = Path(__file__).resolve().parents[1]
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


def test_accuracy_bounds():
    bounds = [o for o in OUTCOMES if o.case.kind == "bound"]
    roof = [o for o in bounds if o.case.area == "roofline"]
    assert any(o.case.direction == "lower" for o in roof) \
        and all(o.case.unit == "s" and o.predicted <= o.case.published for o in roof if o.case.direction == "lower") \
        and all(o.predicted >= o.case.published for o in roof if o.case.direction == "upper"), \
        "claim roofline-lower-bound: every roofline time is shorter than the measured one (a rate higher)"
    for o in bounds:
        c, tau = o.case, o.case.tolerance
        edge = c.published * (1 - tau) if c.direction == "lower" else c.published / (1 - tau)
        beyond = c.published * (1 - tau) * 0.99 if c.direction == "lower" else c.published / (1 - tau) / 0.99
        assert 0 < tau < 1 and Outcome(c, edge * (1 + 1e-9 if c.direction == "lower" else 1 - 1e-9)).passed \
            and not Outcome(c, beyond).passed, \
            f"claim bound-states-gap: {c.id} accepts a gap 1 - min(r, 1/r) up to its tolerance, no more"
    factor = lambda o: 1 / (1 - o.case.tolerance)  # noqa: E731 (the largest ratio a bound accepts)
    wafer = [o for o in bounds if o.case.area == "wafer"]
    assert wafer and all("decode" in o.case.title for o in wafer) \
        and max(factor(o) for o in bounds if o not in wafer) <= 4 + 1e-9 \
        and sum(factor(o) > 10 and "batch-1 speed" in o.case.note for o in wafer) == 2, \
        "claim bound-gap-sizes: all bounds but the wafer decode rates accept at most 4x off, two of those over 10x"


def test_accuracy_parity_plot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = ms.plots.accuracy_parity(OUTCOMES)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    areas = {o.case.area for o in OUTCOMES}
    assert {ax.get_title().split(" (")[0] for ax in shown} == areas and len(shown) == len(areas) \
        and all(ax.get_xscale() == ax.get_yscale() == "log" for ax in shown), \
        "claim parity-log-panels: one panel per area, each on log-log axes"
    plt.close(fig)


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
    others = [s for s in SERIES if s not in titan]
    assert titan and all(s.unit == "tokens/s per GPU" for s in titan) \
        and all(s.unit in ("MFU", "TFLOP/s per GPU") for s in others), \
        "claim series-units: torchtitan's series are in tokens/s per GPU, the others in the unit their source gave"
    palm = next(o for o in OUTCOMES if o.case.id == "V16-PaLM")
    assert palm.passed and "App. B" in palm.case.source, \
        "claim series-units: this library's MFU is PaLM's (every query-key pair counted)"


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
    name, b, s, rc, share = vt.TORCHTITAN_RUNS[0][:5]
    kw = dict(tp=1, pp=1, micro_batch=b, zero_stage=3, recompute=rc, recompute_fraction=share,
              grad_precision="fp32")
    a100_64 = ms.cluster("dgx-a100", nodes=8)
    eager = ms.train_step(name, a100_64, 64 * b, s, elementwise="eager", **kw).tokens_per_s / 64
    fused = ms.train_step(name, a100_64, 64 * b, s, **kw).tokens_per_s / 64
    assert vt.torchtitan(name, b, s, rc, share) == pytest.approx(eager, rel=1e-12) and eager < fused, \
        "claim series-software: torchtitan's runs are timed with one kernel per element-wise operator"
    llama = vt.llama3(vt.LLAMA3_TABLE4[0])
    megatron = vt.megatron_core_strong(96)
    assert llama.grad_precision == "fp32" and megatron.grad_precision == "fp32" \
        and llama.precision == megatron.precision == "bf16", \
        "claim series-software: Megatron-LM and Llama 3 reduce their bf16 gradients in fp32"
    for row in vt.LLAMA3_TABLE4[:2]:
        best, full = vt.llama3(row), vt.llama3_full_recompute(row)
        assert (best.tp, best.cp, best.pp, best.dp) == row[1:5] and best.recompute_fraction in vt.EIGHTHS \
            and best.step_s <= full.step_s, \
            "claim series-other-choices: Llama 3's recomputation is searched within the published layout"
    notes = {s.name.split(" ")[0]: s.note for s in SERIES}
    full_miss = [round((vt.llama3_full_recompute(row).mfu / row[7] - 1) * 100) for row in vt.LLAMA3_TABLE4[:2]]
    assert full_miss == [-12, -17] and "12 and 17 % below" in notes["Llama"], \
        "claim series-other-choices: the Llama 3 note's numbers are what full recomputation predicts"
    hot = [round((vt.megatron_core_strong(g, matmul_efficiency=vt.H100_BEST_ITERATION).mfu / pub - 1) * 100)
           for g, pub in ((96, 0.47), (4608, 0.42))]
    h100_series = next(s for s in SERIES if "H100" in s.name and s.name.startswith("Megatron"))
    assert hot == [22, 12] and "22 and 12 % high" in h100_series.note, \
        "claim series-other-choices: the H100 note's numbers are what a short benchmark's rate predicts"
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


def test_intro_notebook_06_range():
    path = next((ROOT / "notebooks").glob("06_*.ipynb"))
    cells = json.loads(path.read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    gpus = {int(n) * ms.cluster(name, nodes=1).accelerators
            for name, n in re.findall(r'ms\.cluster\("([\w-]+)", nodes=(\d+)\)', code)}
    assert ms.exercises.notebook_id(path) == "06" and min(gpus) == 8 and max(gpus) == 16384, \
        "claim intro-06-range: notebook 06 scales from one node of 8 GPUs to 16,384 GPUs"


# --- how_to_use.md -------------------------------------------------------------------------------

def test_how_to_use_expected_answers(capsys):
    notebooks = sorted({ms.exercises.notebook_id(p) for p in (ROOT / "notebooks").glob("*.ipynb")})
    exercises = [ms.exercises.get(i) for nb in notebooks for i in ms.exercises.ids(nb)]
    calls = []
    probe = ms.exercises.Exercise(id="x.1", question="?", expected=lambda: calls.append(1) or 1.0)
    checked = [ms.exercises.is_correct(probe, 1.0) for _ in range(2)]
    answer = ms.roofline("llama-3-8b", "h100", batch=1).intensity   # the page's example
    assert exercises and all(callable(e.expected) for e in exercises) and checked == [True, True] \
        and len(calls) == 2 and ms.exercises.check("00.1", answer) \
        and ms.exercises.get("00.1").expected() == pytest.approx(answer), \
        "claim expected-computed: every expected answer is computed by the package at each check"
    assert "00.1 correct" in capsys.readouterr().out


# --- instructors.md ------------------------------------------------------------------------------

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _cells(path, kind="code"):
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == kind]


def test_instructors_labs_and_torch():
    uses_torch = {ms.exercises.notebook_id(p) for p in NOTEBOOKS
                  if re.search(r"^\s*(import torch|from torch\b)|mlsysim\.lab\.(pytorch|distributed)",
                               "\n".join(_cells(p)), re.M)}
    labs = {ms.exercises.notebook_id(p) for p in NOTEBOOKS if "_lab_" in p.name}
    assert labs == {"06a", "06b", "06c"} and uses_torch == {"06b", "06c"}, \
        "claim torch-labs-two: two of the three labs after 06, 06b and 06c, use PyTorch"
    from mlsysim.lab.distributed import results as distributed_results
    from mlsysim.lab.pytorch import results as pytorch_results
    recorded = {"06b": pytorch_results.recorded(), "06c": distributed_results.recorded()}
    checkpoint_lab = next(p for p in NOTEBOOKS if p.name.startswith("06a_"))
    modules = sorted(set(re.findall(r"^\s*(?:from|import) (mlsysim[\w.]*)", "\n".join(_cells(checkpoint_lab)), re.M)))
    probe = f"import sys, {', '.join(modules)}; sys.exit('torch' in sys.modules)"
    numpy_only = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=120)
    assert all(recorded.values()) and numpy_only.returncode == 0 and modules \
        and all("results.recorded()" in "\n".join(_cells(p)) for p in NOTEBOOKS
                if ms.exercises.notebook_id(p) in recorded), \
        "claim torch-labs: without PyTorch 06b and 06c show recorded runs; 06a needs NumPy only"


def _run_s(path) -> float:
    """Seconds the stored run of a notebook spent executing its cells (the cells' own timestamps)."""
    at = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    cells = json.loads(path.read_text())["cells"]
    runs = [c["metadata"]["execution"] for c in cells if c.get("metadata", {}).get("execution")]
    return sum((at(r["shell.execute_reply"]) - at(r["iopub.execute_input"])).total_seconds() for r in runs)


def test_instructors_run_times():
    runs = {ms.exercises.notebook_id(p): _run_s(p) for p in NOTEBOOKS}
    slow = {"06a", "06c"}
    assert all(0 < s < 40 for n, s in runs.items() if n not in slow) and 10 < runs["06a"] < 30 \
        and 60 < runs["06c"] < 400, \
        f"claim notebook-run-times: under a minute; 06a up to two, stored under 30 s; 06c a few: {runs}"


def test_instructors_markdown_markers():
    markdown_it = pytest.importorskip("markdown_it")
    answer = "Why?\n<!-- BEGIN SOLUTION -->\nBecause bandwidth.\n<!-- END SOLUTION -->"
    from mlsysim.assign import TEXT_STUB, clear_solutions
    student, regions = clear_solutions(answer, TEXT_STUB)
    shown = re.sub(r"<!--.*?-->", "", markdown_it.MarkdownIt("commonmark").render(answer), flags=re.S)
    assert (student, regions) == ("Why?\nYOUR ANSWER HERE", 1) and "SOLUTION" not in shown \
        and "Because bandwidth." in shown, \
        "claim markdown-markers-hidden: comment markers are cleared for students and not shown on the site"


def test_instructors_score_execute(tmp_path):
    pytest.importorskip("nbclient")
    from mlsysim.assign import execute, score
    sources = ["import mlsysim as ms",
               'ms.exercises.check("00.3", 1.0)',                                     # wrong, output edited
               "raise RuntimeError('a student error')",
               'ms.exercises.check("00.2", ms.hardware("a100-80gb").ridge("bf16"))']  # right
    cells = [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "outputs": [], "execution_count": None,
              "source": s} for i, s in enumerate(sources)]
    cells[1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "✅ 00.3 correct: 1\n"}]
    nb = {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                      "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    ran = execute(nb, tmp_path)
    assert score(nb) == {"00.3": True, "00.2": False} and score(ran) == {"00.3": False, "00.2": True} \
        and [c["execution_count"] for c in ran["cells"]] == [1, 2, 3, 4], \
        "claim score-execute: --execute runs from the top in a fresh kernel past errors, scoring what the code prints"


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
    a100, n = ms.hardware("a100"), 8192
    matmul_s = ms.gemm_time(n, n, n, a100, roofline=False)   # full waves: 2,048 tiles of 128 x 256
    assert m.flops_per_token(0) == 2 * m.matmul_params_per_token \
        and 2 * n**3 / (matmul_s * a100.matmul_efficiency * a100.peak("bf16")) == pytest.approx(1, rel=0.01), \
        "claim multiply-add-two-flop: 2 FLOP per multiply-add in a pass's work and in a GEMM's time"


RAW_HARDWARE = ms.registry._read("hardware.yaml")   # the registry file as written, vendor units


def test_conventions_peaks_and_units():
    h100 = ms.hardware("h100")
    tflops = h100.peak("bf16") / 1e12
    assert round(tflops, 1) == 989.4 and abs(1979 / tflops - 4 / 2) < 1e-3, \
        "claim dense-not-sparse: the H100's bf16 peak is the dense 989.4 TFLOP/s, half the 1,979 of 2:4 sparsity"
    sparse = [ms.hardware(e["name"]) for e in RAW_HARDWARE if "sparse" in e["source"]]
    assert sparse and all("dense" in h.source.lower() for h in sparse) \
        and ms.hardware("jetson-agx-orin-64gb").peak("int8") == 170e12 / 2 \
        and ms.hardware("jetson-orin-nano-super").peak("int8") == 67e12 / 2, \
        "claim sparse-derived: an entry with a sparse figure only states its dense = sparse / 2"
    assert ms.units.GB == 1e9 and ms.units.TB == 1e12 and ms.fmt(1e12, "B/s") == "1 TB/s", \
        "claim decimal-prefixes: 1 GB = 1e9 bytes, 1 TB/s = 1e12 bytes per second"
    binary = [e for e in RAW_HARDWARE if "memory_GiB" in e]
    assert ms.hardware("tpu-v4").memory_B == 32 * 2**30 and ms.units.GiB == 2**30 \
        and binary and all("GiB" in e["source"] for e in binary), \
        "claim tpu-v4-gib: GiB only where the vendor's source says GiB, as TPU v4's 32 GiB"
    sxm = next(e for e in RAW_HARDWARE if e["name"] == "H100-SXM")
    node = ms.cluster("dgx-h100", nodes=1)
    assert sxm["scaleup_bidir_GBps"] == 900 and h100.scaleup_Bps == 900e9 / 2 == 450e9 \
        and node.scaleup_Bps == h100.scaleup_Bps, \
        "claim nvlink-per-direction: the vendor's 900 GB/s both ways is stored as 450 GB/s per direction"


def test_conventions_infeasible():
    with pytest.raises(ms.InfeasibleError, match="needs .* GB of memory but H100-SXM has 80 GB"):
        ms.roofline("llama-3-70b", "h100", batch=1)
    r = ms.roofline("llama-3-8b", "h100", batch=[1, 4096], context_tokens=8192)
    assert issubclass(ms.InfeasibleError, ValueError) and list(r.feasible) == [True, False] \
        and np.isnan(r.time_s[1]) and not np.isnan(r.time_s[0]), \
        "claim infeasible-not-silent: a scalar call raises, an array call gives NaN and a feasible mask"


# --- symbols.md ----------------------------------------------------------------------------------

def test_symbols():
    m, cnn = ms.model("llama-3-8b"), ms.model("resnet-50")
    macs = next(c for c in ms.validation.cases() if c.id == "macs/ResNet-50")
    assert m.flops_per_token(0) == 2 * m.matmul_params_per_token \
        and cnn.flops_per_sample == pytest.approx(2 * macs.published, rel=0.01), \
        "claim symbol-work-two-flop: W counts 2 FLOP per multiply-add"


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
    m = ms.model("llama-3-8b")
    matmuls = ms.training_flops(m, 1, 8192, recompute="none", include_attention=False)
    causal = ms.training_flops(m, 1, 8192, recompute="none") - matmuls
    every_pair = ms.training_flops(m, 1, 8192, recompute="none", causal=False) - matmuls
    assert none.attention == "flash" and none.hfu < none.mfu and causal / every_pair == pytest.approx(0.5), \
        "claim hfu-below-mfu: HFU counts half the pairs, so without recomputation HFU lies below MFU"


def test_glossary_experts():
    m = ms.model("mixtral-8x7b")
    _, cost, _ = ms.pass_cost(m, phase="decode", batch=1)
    memory = ms.serving_memory(m, "h100", context_tokens=1)
    assert m.is_moe and m.matmul_params_per_token < m.params / 3 \
        and cost.flops == pytest.approx(2 * m.matmul_params_per_token, rel=1e-4) \
        and memory.weights_B == m.params * ms.units.BYTES_PER_ELEMENT["bf16"], \
        "claim active-compute-all-memory: compute follows the active parameters, memory holds all of them"
    more = dataclasses.replace(m, experts=2 * m.experts)
    assert more.params > 1.9 * m.params and more.flops_per_token(0) == pytest.approx(m.flops_per_token(0), rel=1e-3), \
        "claim moe-params-not-compute: more experts add parameters, not compute per token"


def test_glossary_formats_and_flop():
    bpe = ms.units.BYTES_PER_ELEMENT
    assert bpe["bf16"] == 2 and bpe["bf16"] == 0.5 * bpe["fp32"], "claim bf16-bytes: 2 bytes, half of fp32's"
    solvers = (ms.roofline, ms.decode, ms.prefill, ms.generate, ms.train_step, ms.training_memory, ms.serving_memory)
    assert all(inspect.signature(f).parameters["precision"].default == "bf16" for f in solvers), \
        "claim bf16-default: training and inference default to bf16"
    h100 = ms.hardware("h100")
    tflops = h100.peak("bf16") / 1e12
    assert round(tflops, 1) == 989.4 and abs(1979 / tflops - 4 / 2) < 1e-3, \
        "claim sparse-twice-dense: 2:4 sparsity's 1,979 TFLOP/s on the H100 is twice its dense 989.4"
    m = ms.model("llama-3-8b")
    assert m.flops_per_token(0) == 2 * m.matmul_params_per_token \
        and ms.hardware("stm32h743").peak("fp32") == 2 * 480e6 \
        and ms.hardware("apple-m2-ultra").peak("fp32") == pytest.approx(76 * 128 * 2 * 1.398e9, rel=1e-4), \
        "claim fma-two-flop: 2 FLOP per multiply-add in the work and in the peaks (one FMA per lane and cycle)"


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
    assert min(ratios) > 10 and 100 < max(ratios) < 1000, \
        "claim carbon-spread: hydro or nuclear against coal, a factor of ten to several hundred"


def test_glossary_elasticity():
    h100 = ms.hardware("h100")
    time_at = lambda bandwidth: ms.roofline(  # noqa: E731
        "llama-3-8b", ms.scale_hardware(h100, peak=1.0, bandwidth=bandwidth)).time_s
    s = ms.sensitivity(lambda bandwidth: ms.roofline("llama-3-8b", ms.scale_hardware(h100, bandwidth=bandwidth)),
                       {"bandwidth": 1.0})
    more = 0.1   # 10 % more bandwidth
    change = time_at(1 + more) / time_at(1.0) - 1
    assert s["bandwidth"].elasticity == pytest.approx(-1.0, abs=1e-6) and abs(change - (-0.1)) < 0.01, \
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
    context = 4096
    _, none_cached, _ = ms.pass_cost(m, phase="decode", batch=1, context_tokens=0)
    _, cached, _ = ms.pass_cost(m, phase="decode", batch=1, context_tokens=context)
    recompute_kv = 2 * 2 * m.d_model * m.kv_heads * m.head_dim * m.layers   # K and V projections per token
    assert cached.flops - none_cached.flops == pytest.approx(m.attention_flops_per_pair() * context) \
        and m.attention_flops_per_pair() < recompute_kv, \
        "claim kv-no-recompute: a decode step attends to the cached keys and values without recomputing them"
    prompt = ms.prefill(m, "h100", prompt_tokens=2048)
    assert ms.generate(m, "h100", prompt_tokens=2048, output_tokens=16).ttft_s == pytest.approx(prompt.time_s), \
        "claim prefill-is-ttft: without a queue the TTFT is the prefill time"
    weights = m.params * ms.units.BYTES_PER_ELEMENT["bf16"]
    kv = lambda c, b: ms.kv_cache_bytes(m, context_tokens=c, batch=b, precision="bf16")  # noqa: E731
    assert kv(8192, 16) == 2 * kv(4096, 16) == 4 * kv(4096, 8) and kv(8192, 16) > weights, \
        "claim kv-outgrows-weights: the KV cache grows with context and batch; a modest batch's outgrows the weights"


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


def test_glossary_tensor_parallel_and_streaming():
    m, node = ms.model("llama-3-8b"), ms.cluster("dgx-h100", nodes=1)
    step = ms.train_step(m, node, 8, 4096, tp=8, pp=1, dp=1, micro_batch=1, sequence_parallel=False,
                         recompute="none")
    one = ms.allreduce_time(4096 * m.d_model * ms.units.BYTES_PER_ELEMENT["bf16"], 8, node.scaleup_Bps)
    assert step.tp_comm_s == pytest.approx(step.microbatches * m.layers * (2 + 2) * one), \
        "claim tp-two-per-layer: two all-reduces per layer forward and two backward"
    wafer = ms.hardware("cs-3")
    streamed = ms.weight_streaming("llama-3-70b", wafer, batch=1, seq_len=2048, recompute="full")
    assert streamed.weight_bytes > wafer.memory_B and streamed.external_needed_B <= streamed.external_B, \
        "claim streaming-external-limit: weights larger than the wafer's SRAM stream from external memory"
    with pytest.raises(ms.InfeasibleError, match="exceed the external memory"):
        ms.weight_streaming("llama-3-70b", wafer, batch=1, seq_len=2048, recompute="full", external_memory_B=100e9)


def test_glossary_precision_and_sparsity():
    h100 = ms.hardware("h100")
    assert h100.peak("fp8") > h100.peak("bf16") > h100.peak("fp32"), \
        "claim precision-peak: fewer bytes per element raise the peak"
    assert ms.units.BYTES_PER_ELEMENT["fp8"] < ms.units.BYTES_PER_ELEMENT["bf16"] < \
        ms.units.BYTES_PER_ELEMENT["fp32"], "claim precision-peak: fp8 < bf16 < fp32 bytes"
