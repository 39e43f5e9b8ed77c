"""Explorers for one device (notebooks 00–05): roofline, generations, prefill and decode, KV cache,
input pipeline, quantization."""
from __future__ import annotations

import ipywidgets as W
import numpy as np

from .. import plots
from ..roofline import roofline
from ..units import fmt
from ..workloads import CNN
from ._common import Explorer, _dropdown, _log_slider, _transformers


# --- roofline (notebooks 00, 01) -------------------------------------------
def roofline_explorer(workload: str = "Llama-3-8B", hardware: str = "H100-SXM", batch: int = 1,
                      precision: str = "bf16", phase: str = "decode", context_tokens: int = 0) -> Explorer:
    """Explore :func:`mlsysim.roofline`: workload, device, batch, precision, phase, context."""
    controls = {
        "workload": _dropdown("models", workload, "workload"),
        "hardware": _dropdown("hardware", hardware, "device"),
        "phase": W.Dropdown(options=["decode", "prefill", "training", "inference"], value=phase,
                            description="phase", style={"description_width": "8em"}),
        "precision": W.Dropdown(options=["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"],
                                value=precision, description="precision", style={"description_width": "8em"}),
        "batch": _log_slider("batch", batch, 0, 12),
        "context_tokens": W.IntSlider(value=context_tokens, min=0, max=32768, step=512, description="context",
                                      style={"description_width": "8em"}),
    }

    def compute(workload, hardware, phase, precision, batch, context_tokens):
        from ..workloads import CNN
        from ..registry import model
        if isinstance(model(workload), CNN):
            phase = "training" if phase == "training" else "inference"
            return roofline(workload, hardware, batch=batch, precision=precision, phase=phase)
        phase = "decode" if phase == "inference" else phase
        return roofline(workload, hardware, batch=batch, precision=precision, phase=phase,
                        context_tokens=context_tokens)

    def render(r):
        fig = plots.roofline([r.hardware], points=[r], precision=r.precision)
        rows = [("time per pass", fmt(r.time_s, "s")), ("bound", r.bound),
                ("intensity", f"{r.intensity:.3g} FLOP/B"), ("ridge", f"{r.ridge:.3g} FLOP/B"),
                ("achieved", fmt(r.achieved_flops, "FLOP/s")),
                ("memory needed", f"{fmt(r.footprint_B, 'B')} of {fmt(r.capacity_B, 'B')}")]
        return rows, fig

    return Explorer(controls, compute, render, title="Roofline explorer")


def generations_explorer(workload: str = "Llama-3-8B", phase: str = "decode", batch: int = 1,
                         seq_len: int = 2048, devices=("A100-80GB", "H100-SXM", "H200-SXM", "B200-HGX"),
                         precision: str = "bf16") -> Explorer:
    """Compare one pass across accelerator generations: time per pass and speed-up over the first device."""
    controls = {
        "workload": _dropdown("models", workload, "workload"),
        "phase": W.Dropdown(options=["decode", "prefill"], value=phase, description="phase",
                            style={"description_width": "8em"}),
        "batch": _log_slider("batch", batch, 0, 10),
        "seq_len": W.IntSlider(value=seq_len, min=128, max=8192, step=128, description="prompt tokens",
                               style={"description_width": "8em"}),
        "precision": W.Dropdown(options=["bf16", "fp8"], value=precision, description="precision",
                                style={"description_width": "8em"}),
    }

    def compute(workload, phase, batch, seq_len, precision):
        kw = dict(seq_len=seq_len) if phase == "prefill" else {}
        return roofline(workload, list(devices), batch=batch, precision=precision, phase=phase, **kw)

    def render(r):
        t = r.time_s
        labels = list(r.hardware)
        fig = plots.bars(labels, {"time per pass (ms)": t * 1e3}, ylabel="time per pass (ms)",
                         title=f"{r.workload} {r.phase}, batch {r.batch:g}")
        rows = [(h, f"{fmt(ti, 's')}, {r.bound[i]}-bound, {t[0] / ti:.2f}x vs {labels[0]}")
                for i, (h, ti) in enumerate(zip(labels, t))]
        return rows, fig

    return Explorer(controls, compute, render, title="Across GPU generations")


# --- serving (02, 03) ------------------------------------------------------
def _int_dropdown(description: str, value: int, options) -> W.Dropdown:
    return W.Dropdown(options=list(options), value=value, description=description,
                      style={"description_width": "8em"})


def serving_explorer(workload: str = "Llama-3-8B", hardware: str = "H100-SXM", tp: int = 1,
                     prompt_tokens: int = 2048, context_tokens: int = 2048, batch: int = 8,
                     precision: str = "bf16", ttft_sla_s: float = 0.5, itl_sla_s: float = 0.03) -> Explorer:
    """Explore :func:`mlsysim.prefill` and :func:`mlsysim.decode`: TTFT, ITL and throughput of one
    configuration against service-level targets, with ITL across batch sizes."""
    from ..serving import decode, prefill
    controls = {
        "workload": _dropdown("models", workload, "model", options=_transformers()),
        "hardware": _dropdown("hardware", hardware, "device"),
        "tp": _int_dropdown("GPUs (tp)", tp, [1, 2, 4, 8]),
        "precision": W.Dropdown(options=["bf16", "fp8"], value=precision, description="precision",
                                style={"description_width": "8em"}),
        "prompt_tokens": _log_slider("prompt tokens", prompt_tokens, 5, 15),
        "context_tokens": _log_slider("cached tokens", context_tokens, 5, 17),
        "batch": _log_slider("batch", batch, 0, 10),
    }
    batches = 2.0 ** np.arange(0, 11)

    def compute(workload, hardware, tp, precision, prompt_tokens, context_tokens, batch):
        kw = dict(precision=precision, tp=tp)
        first = prefill(workload, hardware, prompt_tokens=prompt_tokens, batch=1, **kw)
        step = decode(workload, hardware, context_tokens=context_tokens, batch=batch, **kw)
        curve = decode(workload, hardware, context_tokens=context_tokens, batch=batches, **kw)
        return {"prefill": first, "decode": step, "batches": batches, "itl_s": curve.time_s}

    def render(r):
        first, step = r["prefill"], r["decode"]
        ok = lambda t, sla: "meets" if t <= sla else "misses"  # noqa: E731
        series = {f"{step.workload} on {step.tp} x {step.hardware}": r["itl_s"] * 1e3,
                  f"ITL target ({fmt(itl_sla_s, 's')})": np.full(len(r["batches"]), itl_sla_s * 1e3)}
        fig = plots.lines(r["batches"], series, xlabel="batch", ylabel="time per output token (ms)",
                          logx=True, markers=False,
                          title="Decode: ITL across batch sizes (the curve ends where memory does)")
        rows = [("TTFT (batch 1)", f"{fmt(first.time_s, 's')}, {first.bound}-bound, "
                                   f"{ok(first.time_s, ttft_sla_s)} {fmt(ttft_sla_s, 's')}"),
                ("ITL", f"{fmt(step.time_s, 's')}, {step.bound}-bound, {ok(step.time_s, itl_sla_s)} "
                        f"{fmt(itl_sla_s, 's')}"),
                ("tokens/s per user", f"{1 / step.time_s:,.1f}"),
                ("tokens/s, whole batch", f"{step.tokens_per_s:,.0f}"),
                ("communication share", f"{step.comm_s / step.time_s:.0%}"),
                ("memory per GPU", f"{fmt(step.footprint_B, 'B')} of {fmt(step.capacity_B, 'B')}")]
        return rows, fig

    return Explorer(controls, compute, render, title="Two phases: TTFT and ITL")


def kv_explorer(workload: str = "Llama-3-8B", hardware: str = "H100-SXM", tp: int = 1,
                weight_precision: str = "bf16", kv_precision: str = "bf16", max_tokens: int = 8192,
                mean_tokens: int = 1024, block_tokens: int = 16) -> Explorer:
    """Explore the KV cache: bytes per token, the out-of-memory boundary in (batch, context), and
    paged against contiguous allocation for a request mix (:func:`mlsysim.paged_kv`)."""
    from ..serving import kv_cache_bytes, length_mix, max_batch, paged_kv
    controls = {
        "workload": _dropdown("models", workload, "model", options=_transformers()),
        "hardware": _dropdown("hardware", hardware, "device"),
        "tp": _int_dropdown("GPUs (tp)", tp, [1, 2, 4, 8]),
        "weight_precision": W.Dropdown(options=["bf16", "fp8"], value=weight_precision,
                                       description="weights", style={"description_width": "8em"}),
        "kv_precision": W.Dropdown(options=["bf16", "fp8"], value=kv_precision, description="KV precision",
                                   style={"description_width": "8em"}),
        "max_tokens": _log_slider("max request", max_tokens, 9, 17),
        "mean_tokens": _log_slider("mean request", mean_tokens, 5, 15),
        "block_tokens": _log_slider("block (tokens)", block_tokens, 0, 10),
    }
    contexts = 2.0 ** np.arange(7, 18)

    def compute(workload, hardware, tp, weight_precision, kv_precision, max_tokens, mean_tokens,
                block_tokens):
        kw = dict(tp=tp, weight_precision=weight_precision, kv_precision=kv_precision)
        lengths, probs = length_mix(mean_tokens, max_tokens)
        return {"kv_per_token_B": kv_cache_bytes(workload, 1, precision=kv_precision, tp=tp),
                "contexts": contexts, "max_batch": max_batch(workload, hardware, context_tokens=contexts, **kw),
                "paged": paged_kv(workload, hardware, lengths, probs, block_tokens=block_tokens,
                                  max_tokens=max_tokens, **kw)}

    def render(r):
        p = r["paged"]
        fig = plots.memory_boundary(r["contexts"], {f"{p.workload} on {p.hardware}": r["max_batch"]},
                                    title="Above the line: out of memory")
        rows = [("KV per token (per GPU)", fmt(r["kv_per_token_B"], "B")),
                ("KV budget per GPU", fmt(p.kv_budget_B, "B")),
                ("mean request", f"{p.mean_tokens:,.0f} tokens"),
                ("waste per request", f"{p.waste_tokens:.3g} tokens ({p.fragmentation:.1%})"),
                ("requests, paged", f"{p.requests_paged:,.0f}"),
                ("requests, contiguous", f"{p.requests_contiguous:,.0f}"),
                ("paged / contiguous", f"{p.gain:.3g}x")]
        return rows, fig

    return Explorer(controls, compute, render, title="KV cache: what fits")


# --- datapipe (04) ---------------------------------------------------------
def datapipe_explorer(workload: str = "ResNet-50", hardware: str = "A100-80GB", batch: int = 256,
                      workers: int = 8, pipeline: str = "imagenet-ffcv", storage: str = "local-nvme",
                      efficiency: float = 1.0, seq_len: int = 1024) -> Explorer:
    """Explore :func:`mlsysim.datapipe`: which stage of the input pipeline bounds training, and how
    many workers would keep the accelerator fed. ``efficiency`` scales both roofs of the step."""
    from ..datapipe import _data, datapipe
    style = {"description_width": "8em"}
    controls = {
        "workload": _dropdown("models", workload, "workload"),
        "hardware": _dropdown("hardware", hardware, "device"),
        "pipeline": W.Dropdown(options=_data()["pipeline"].names(), value=pipeline, description="pipeline",
                               style=style),
        "storage": W.Dropdown(options=_data()["storage"].names(), value=storage, description="storage",
                              style=style),
        "workers": W.IntSlider(value=workers, min=1, max=64, description="workers", style=style),
        "batch": _log_slider("batch", batch, 0, 12),
        "efficiency": W.FloatSlider(value=efficiency, min=0.05, max=1.0, step=0.05,
                                    description="efficiency", style=style),
        "seq_len": W.IntSlider(value=seq_len, min=128, max=8192, step=128, description="tokens/sample",
                               style=style),
    }

    def compute(workload, hardware, pipeline, storage, workers, batch, efficiency, seq_len):
        from ..registry import model
        kw = {} if isinstance(model(workload), CNN) else {"seq_len": seq_len}
        return datapipe(workload, hardware, batch=batch, pipeline=pipeline, storage=storage, workers=workers,
                        efficiency=efficiency, mem_efficiency=efficiency, **kw)

    def render(r):
        unit = "images/s" if r.tokens_per_sample == 1 else "sequences/s"
        rows = [("bound", r.bound), ("delivered", f"{fmt(r.delivered_sps)} {unit}"),
                ("accelerator busy", fmt(r.utilization, "%")),
                ("workers to keep it fed", f"{r.workers_needed:g}"),
                ("storage read rate", fmt(r.input_Bps, "B/s"))]
        return rows, plots.pipeline_stages(r)

    return Explorer(controls, compute, render, title="Input-pipeline explorer")


# --- quantization (05) -----------------------------------------------------
def quantization_explorer(workload: str = "Llama-2-7B", hardware: str = "A100-80GB", scheme: str = "w4a16",
                          phase: str = "decode", batch: int = 1, context_tokens: int = 0,
                          baseline: str = "bf16") -> Explorer:
    """Explore :func:`mlsysim.quantized`: speed-up and memory of a scheme against a 16-bit baseline."""
    from ..quantization import SCHEMES, quantized
    style = {"description_width": "8em"}
    controls = {
        "workload": _dropdown("models", workload, "workload"),
        "hardware": _dropdown("hardware", hardware, "device"),
        "scheme": W.Dropdown(options=list(SCHEMES), value=scheme, description="scheme", style=style),
        "baseline": W.Dropdown(options=["bf16", "fp16"], value=baseline, description="baseline", style=style),
        "phase": W.Dropdown(options=["decode", "prefill"], value=phase, description="phase", style=style),
        "batch": _log_slider("batch", batch, 0, 12),
        "context_tokens": W.IntSlider(value=context_tokens, min=0, max=32768, step=512, description="context",
                                      style=style),
    }

    def compute(workload, hardware, scheme, baseline, phase, batch, context_tokens):
        from ..registry import model
        if isinstance(model(workload), CNN):
            return quantized(workload, hardware, scheme, baseline=baseline, batch=batch)
        kw = dict(seq_len=2048) if phase == "prefill" else dict(context_tokens=context_tokens)
        return quantized(workload, hardware, scheme, baseline=baseline, phase=phase, batch=batch, **kw)

    def render(q):
        times = {"time per pass (ms)": [q.baseline_s * 1e3, q.time_s * 1e3]}
        fig = plots.bars([q.baseline, q.scheme], times, ylabel="time per pass (ms)",
                         title=f"{q.workload} {q.phase} on {q.hardware}, batch {q.batch:g}")
        rows = [("speed-up", f"{q.speedup:.3g}x"), ("bound", f"{q.bound} (baseline: {q.baseline_bound})"),
                ("time per pass", f"{fmt(q.time_s, 's')} vs {fmt(q.baseline_s, 's')}"),
                ("memory needed", f"{fmt(q.footprint_B, 'B')} vs {fmt(q.baseline_footprint_B, 'B')}")]
        return rows, fig

    return Explorer(controls, compute, render, title="Quantization explorer")
