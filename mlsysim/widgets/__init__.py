"""ipywidgets explorers, each wrapping one package function.

An :class:`Explorer` holds named controls, calls its solver whenever a control
changes, and shows a summary table (``summary``, an HTML widget) and a figure
(``output``). Everything the reader sees is kernel-side state, so tests drive
an explorer by setting ``explorer.controls[name].value`` and reading
``explorer.result`` or ``explorer.summary.value`` — no browser needed.
An infeasible configuration shows its error message instead of numbers.
"""
from __future__ import annotations

import re
from typing import Callable

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

from . import plots
from .errors import MlsysimError
from .registry import zoo
from .roofline import roofline
from .units import fmt
from .workloads import CNN


class Explorer(W.VBox):
    """Controls → ``compute(**values)`` → ``render(result)`` → (summary rows, figure).

    ``result`` is the latest solver result, or the :class:`~mlsysim.errors.MlsysimError`
    it raised; ``error`` is that error's message ("" when it ran).
    """

    def __init__(self, controls: dict[str, W.ValueWidget], compute: Callable, render: Callable,
                 title: str = ""):
        self.controls = controls
        self._compute, self._render = compute, render
        self.summary = W.HTML()
        self.output = W.Output()
        self.result = None
        self.error = ""
        header = [W.HTML(f"<b>{title}</b>")] if title else []
        panel = W.HBox([W.VBox(list(controls.values()), layout=W.Layout(width="45%")), self.summary])
        super().__init__(header + [panel, self.output])
        for c in controls.values():
            c.observe(self._update, names="value")
        self._update()

    def values(self) -> dict:
        return {k: c.value for k, c in self.controls.items()}

    def _update(self, change=None):
        try:
            self.result = self._compute(**self.values())
            self.error = ""
            rows, fig = self._render(self.result)
        except MlsysimError as e:  # infeasible or bad input: say so, show no numbers
            self.result, self.error = e, str(e)
            rows, fig = [("not feasible", str(e))], None
        self.summary.value = _table(rows)
        with self.output:
            self.output.clear_output(wait=True)
            if fig is not None:
                display(fig)
        if fig is not None:
            plt.close(fig)

    def summary_text(self) -> str:
        """The summary as plain text (for printing in a notebook or a test)."""
        return _plain(self.summary.value)


def _table(rows) -> str:
    cells = "".join(f"<tr><th style='text-align:left;padding-right:1em'>{k}</th><td>{v}</td></tr>"
                    for k, v in rows)
    return f"<table>{cells}</table>"


def _plain(html: str) -> str:
    rows = re.findall(r"<tr><th[^>]*>(.*?)</th><td>(.*?)</td></tr>", html)
    return "\n".join(f"{k}: {v}" for k, v in rows)


def _dropdown(kind: str, value: str, description: str, options=None) -> W.Dropdown:
    opts = options or zoo(kind)
    return W.Dropdown(options=opts, value=value, description=description, style={"description_width": "8em"})


def _log_slider(description: str, value: float, lo_exp: int, hi_exp: int) -> W.FloatLogSlider:
    return W.FloatLogSlider(value=value, base=2, min=lo_exp, max=hi_exp, step=1, description=description,
                            readout_format=".0f", style={"description_width": "8em"})


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
        from .workloads import CNN
        from .registry import model
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
def _transformers() -> list[str]:
    from .workloads import Transformer
    return [r.name for r in zoo("models", records=True) if isinstance(r, Transformer)]


def _int_dropdown(description: str, value: int, options) -> W.Dropdown:
    return W.Dropdown(options=list(options), value=value, description=description,
                      style={"description_width": "8em"})


def serving_explorer(workload: str = "Llama-3-8B", hardware: str = "H100-SXM", tp: int = 1,
                     prompt_tokens: int = 2048, context_tokens: int = 2048, batch: int = 8,
                     precision: str = "bf16", ttft_sla_s: float = 0.5, itl_sla_s: float = 0.03) -> Explorer:
    """Explore :func:`mlsysim.prefill` and :func:`mlsysim.decode`: TTFT, ITL and throughput of one
    configuration against service-level targets, with ITL across batch sizes."""
    from .serving import decode, prefill
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
    from .serving import kv_cache_bytes, length_mix, max_batch, paged_kv
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
    from .datapipe import _data, datapipe
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
        from .registry import model
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
    from .quantization import SCHEMES, quantized
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
        from .registry import model
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


# --- distributed training (06) ---------------------------------------------
def parallel_explorer(model: str = "Llama-3-70B", node: str = "DGX-H100", nodes: int = 128,
                      global_batch: int = 1024, seq_len: int = 4096, tp: int = 8, pp: int = 4,
                      microbatch: int = 1, interleave: int = 1, zero_stage: int = 1,
                      recompute: str = "none", overlap: float = 1.0) -> Explorer:
    """Explore :func:`mlsysim.train_step` over tp, pp, dp (through the node count), the
    micro-batch size (hence the number of micro-batches), interleaving, ZeRO and recomputation."""
    from .parallel import train_step
    from .registry import cluster
    style = {"description_width": "8em"}
    controls = {
        "model": _dropdown("models", model, "model", options=[n for n in zoo("models") if not n.startswith(
            ("ResNet", "MobileNet"))]),
        "nodes": W.Dropdown(options=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048], value=nodes,
                            description="nodes", style=style),
        "tp": W.Dropdown(options=[1, 2, 4, 8], value=tp, description="tensor (tp)", style=style),
        "pp": W.Dropdown(options=[1, 2, 4, 8, 16, 32, 64], value=pp, description="pipeline (pp)", style=style),
        "microbatch": W.Dropdown(options=[1, 2, 4, 8, 16], value=microbatch, description="micro-batch", style=style),
        "interleave": W.Dropdown(options=[1, 2, 4], value=interleave, description="interleave (v)", style=style),
        "zero_stage": W.Dropdown(options=[0, 1, 2, 3], value=zero_stage, description="ZeRO stage", style=style),
        "recompute": W.Dropdown(options=["none", "selective", "full"], value=recompute, description="recompute",
                                style=style),
        "overlap": W.FloatSlider(value=overlap, min=0.0, max=1.0, step=0.1, description="DP overlap", style=style),
    }

    def compute(model, nodes, tp, pp, microbatch, interleave, zero_stage, recompute, overlap):
        return train_step(model, cluster(node, nodes=nodes), global_batch, seq_len, tp=tp, pp=pp,
                          micro_batch=microbatch, interleave=interleave, zero_stage=zero_stage,
                          recompute=recompute, overlap=overlap)

    def render(r):
        fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.6), layout="constrained")
        plots.step_breakdown(["step"], [r], title=f"{r.model}: {fmt(r.step_s, 's')} per step", ax=axes[0])
        plots.memory_breakdown(["per GPU"], [r.memory], r.memory.capacity_B, title="memory", ax=axes[1])
        rows = [("layout", f"tp {r.tp} × pp {r.pp} × dp {r.dp} = {r.accelerators:,} GPUs"),
                ("micro-batches", f"{r.microbatches} of {r.micro_batch} × {r.seq_len} tokens"),
                ("step time", fmt(r.step_s, "s")), ("MFU", f"{r.mfu:.1%}"),
                ("bubble", f"{r.bubble_s / r.step_s:.1%} of the step"),
                ("exposed communication", f"{r.comm_s / r.step_s:.1%} of the step"),
                ("memory per GPU", f"{fmt(r.memory_per_gpu_B, 'B')} of {fmt(r.memory.capacity_B, 'B')}")]
        return rows, fig

    return Explorer(controls, compute, render, title=f"Parallel layout explorer ({global_batch} × {seq_len} "
                                                      f"tokens per step)")


def scaling_explorer(model: str = "Llama-3-70B", node: str = "DGX-H100", global_batch: int = 1024,
                     seq_len: int = 4096, gpus=(8, 64, 512, 1024, 4096, 16384), overlap: float = 1.0) -> Explorer:
    """The fastest layout found by :func:`mlsysim.best_parallelism` at each cluster size, for a
    fixed global batch: MFU and where the step time goes."""
    from .parallel import best_parallelism
    from .registry import cluster
    style = {"description_width": "8em"}
    controls = {
        "model": _dropdown("models", model, "model", options=["Llama-3-8B", "Llama-3-70B", "Llama-3.1-405B",
                                                               "Mixtral-8x7B"]),
        "global_batch": W.Dropdown(options=[256, 512, 1024, 2048, 4096], value=global_batch,
                                   description="sequences/step", style=style),
        "overlap": W.FloatSlider(value=overlap, min=0.0, max=1.0, step=0.1, description="DP overlap", style=style),
    }

    def compute(model, global_batch, overlap):
        out = {}
        for n in gpus:
            try:
                out[n] = best_parallelism(model, cluster(node, nodes=max(n // 8, 1)), global_batch, seq_len,
                                          overlap=overlap).best
            except MlsysimError as e:
                out[n] = str(e)
        if all(isinstance(r, str) for r in out.values()):
            raise MlsysimError(f"{model} has no feasible layout at any size: {next(iter(out.values()))}")
        return out

    def render(results):
        ok = {n: r for n, r in results.items() if not isinstance(r, str)}
        first = next(iter(ok.values()))
        fig = plots.step_breakdown([f"{n:,}" for n in ok], list(ok.values()), share=True, xlabel="GPUs",
                                   title=f"{first.model}, {global_batch} × {seq_len} tokens per step")
        rows = [(f"{n:,} GPUs", "no layout fits in memory" if isinstance(r, str) else
                 f"tp {r.tp} pp {r.pp} dp {r.dp}, ZeRO-{r.zero_stage}, {fmt(r.step_s, 's')}, MFU {r.mfu:.1%}")
                for n, r in results.items()]
        return rows, fig

    return Explorer(controls, compute, render, title="Scaling: the best layout at each size")



# --- reliability and checkpointing (06) ------------------------------------
# (tp, pp) per model, as in notebook 06: tensor parallel inside a node, pipeline across nodes
CHECKPOINT_LAYOUTS = {"Llama-3-8B": (1, 1), "Llama-3-70B": (8, 4), "Llama-3.1-405B": (8, 16)}


def checkpoint_explorer(model: str = "Llama-3-70B", strategy: str = "async", interval_min: float = 30.0,
                        storage_GBps: float = 682.5, nodes: int = 128, node: str = "DGX-H100",
                        storage: str = "lustre") -> Explorer:
    """Explore :func:`mlsysim.checkpoint`: interval, strategy, storage bandwidth (read and
    write, aggregate for a file system) and cluster size (nodes of ``node``).

    The figure shows goodput against the interval for the chosen strategy, with the current
    interval and Daly's optimum marked; an infeasible choice (an interval shorter than the
    persist) shows the reason instead of numbers.
    """
    from .checkpoint import STRATEGIES, checkpoint

    style = {"description_width": "8em"}
    controls = {
        "model": W.Dropdown(options=list(CHECKPOINT_LAYOUTS), value=model, description="model", style=style),
        "strategy": W.Dropdown(options=list(STRATEGIES), value=strategy, description="strategy", style=style),
        "interval_min": W.FloatLogSlider(value=interval_min, base=10, min=-1, max=2.5, step=0.05,
                                         description="interval (min)", readout_format=".3g", style=style),
        "storage_GBps": W.FloatLogSlider(value=storage_GBps, base=10, min=0, max=4, step=0.05,
                                         description="storage GB/s", readout_format=".4g", style=style),
        "nodes": _log_slider("nodes", nodes, 2, 12),
    }

    last = {}

    def compute(model, strategy, interval_min, storage_GBps, nodes):
        tp, pp = CHECKPOINT_LAYOUTS[model]
        last.update(model=model, cluster=node, strategy=strategy, tp=tp, pp=pp, nodes=int(nodes),
                    storage=storage, storage_Bps=storage_GBps * 1e9, read_Bps=storage_GBps * 1e9)
        return checkpoint(**last, interval_s=interval_min * 60.0)

    def render(r):
        grid = np.logspace(0.5, 5, 120)
        sweep = checkpoint(**last, interval_s=grid)
        fig = plots.interval_tradeoff(grid, {f"{r.strategy} goodput": sweep.goodput},
                                      marks={"this interval": r.interval_s, "Daly optimum": r.best_interval_s},
                                      ylabel="goodput (%)", title=f"{r.model} on {r.cluster}")
        rows = [("checkpoint size", fmt(r.size_B, "B")), ("stall per checkpoint", fmt(r.stall_s, "s")),
                ("durable after", fmt(r.write_s, "s")), ("restore", fmt(r.restore_s, "s")),
                ("cluster MTBF", fmt(r.mtbf_s, "s")), ("Daly optimum", fmt(r.best_interval_s, "s")),
                ("stall overhead", fmt(r.overhead_fraction, "%")), ("goodput", fmt(r.goodput, "%"))]
        return rows, fig

    return Explorer(controls, compute, render, title="Checkpoint explorer")


# --- operations (07, 08) ---------------------------------------------------
GEOGRAPHY_REGIONS = ("Montreal", "Paris", "Ashburn", "Warsaw")


def geography_explorer(node: str = "DGX-H100", nodes: int = 128, days: float = 30.0, utilization: float = 0.84,
                       carbon_price_usd_per_t: float = 0.0, regions=GEOGRAPHY_REGIONS) -> Explorer:
    """Explore :func:`mlsysim.footprint` and :func:`mlsysim.tco` of one cluster in several regions."""
    from .economics import tco
    from .sustainability import footprint
    from .registry import _key
    from .sustainability import _data as _sdata
    options = [n for n in zoo("nodes") if _key(n) in _sdata()["embodied"]]
    style = {"description_width": "8em"}
    controls = {
        "node": _dropdown("nodes", node, "node", options=options),
        "nodes": _log_slider("nodes", nodes, 0, 12),
        "days": W.FloatSlider(value=days, min=1, max=365, step=1, description="days", style=style),
        "utilization": W.FloatSlider(value=utilization, min=0.0, max=1.0, step=0.01, description="utilisation",
                                     style=style),
        "carbon_price": W.FloatSlider(value=carbon_price_usd_per_t, min=0, max=300, step=5,
                                      description="carbon $/t", style=style),
    }
    names = list(regions)

    def compute(node, nodes, days, utilization, carbon_price):
        from .registry import cluster
        c = cluster(node, nodes=int(nodes))
        return (footprint(c, hours=days * 24.0, grid=names, utilization=utilization),
                tco(c, days=days, grid=names, utilization=utilization, carbon_price_usd_per_t=carbon_price))

    def render(result):
        f, t = result
        fig = plots.bars(names, {"operational": f.operational_kg / 1e3, "embodied": f.embodied_kg / 1e3},
                         ylabel="tCO2e", title=f"{f.cluster}, {fmt(float(f.hours) * 3600, 's')}", logy=True)
        rows = [(n, f"{fmt(e * 1e3, 'Wh')}, {k / 1e3:.3g} tCO2e, {fmt(w, 'L')} water, ${fmt(c, '', 3)}")
                for n, e, k, w, c in zip(names, f.energy_kWh, f.total_kg, f.water_onsite_L, t.total_usd)]
        return rows, fig

    return Explorer(controls, compute, render, title="Same cluster, four regions")



REASONING_DEVICES = ("A100-80GB", "H100-SXM", "H200-SXM", "B200-HGX", "MI300X")


def reasoning_explorer(model: str = "Llama-3-70B", hardware: str = "H100-SXM", steps: int = 8,
                       tokens_per_step: int = 512, qps: float = 10.0, usd_per_gpu_hour: float = 2.99,
                       latency_slo_s: float = 0.0) -> Explorer:
    """Explore :func:`mlsysim.reasoning_service`: yearly cost against reasoning depth (0 s = no target)."""
    import numpy as np
    from .errors import InfeasibleError
    from .reasoning import reasoning_service
    from .workloads import Transformer
    style = {"description_width": "8em"}
    models = [m.name for m in zoo("models", records=True) if isinstance(m, Transformer) and m.max_context >= 16384]
    controls = {
        "model": _dropdown("models", model, "model", options=models),
        "hardware": _dropdown("hardware", hardware, "device", options=list(REASONING_DEVICES)),
        "steps": W.IntSlider(value=steps, min=0, max=32, step=1, description="reasoning steps", style=style),
        "tokens_per_step": _log_slider("tokens per step", tokens_per_step, 6, 11),
        "qps": W.FloatLogSlider(value=qps, base=10, min=-1, max=3, step=0.25, description="requests/s",
                                style=style),
        "price": W.FloatSlider(value=usd_per_gpu_hour, min=0.5, max=15, step=0.01, description="$/GPU-hour",
                               style=style),
        "slo": W.FloatSlider(value=latency_slo_s, min=0, max=600, step=10, description="latency target s",
                             style=style),
    }

    def compute(model, hardware, steps, tokens_per_step, qps, price, slo):
        ks = np.arange(0, 33, dtype=float)
        sweep = reasoning_service(model, hardware, qps=qps, price=price, steps=ks,
                                  tokens_per_step=int(tokens_per_step), latency_slo_s=slo or None)
        if not sweep.feasible[steps]:
            raise InfeasibleError(f"{steps} steps of {tokens_per_step:g} tokens: no tensor-parallel group and "
                                  f"batch of {model} on {hardware} fit" + (f" within {slo:g} s" if slo else ""))
        return steps, sweep

    def render(result):
        k, s = result
        ks = np.asarray(s.steps)
        fig = plots.lines(ks, {"cost per year (million USD)": s.usd_per_year / 1e6}, xlabel="reasoning steps K",
                          ylabel="million USD per year", logy=True,
                          title=f"{s.workload} on {s.hardware}, {s.qps:g} requests/s")
        fig.axes[0].axvline(k, color="#555555", ls="--", lw=1)
        rows = [("tokens per request", f"{s.output_tokens[k]:,.0f} generated"),
                ("replica", f"{s.tp[k]:g} GPUs, batch {s.batch[k]:g}"),
                ("latency", f"{fmt(s.e2e_s[k], 's')} end to end"), ("GPUs", f"{s.gpus[k]:g}"),
                ("cost per year", "$" + fmt(s.usd_per_year[k], "", 3)),
                ("cost per million tokens", f"${s.usd_per_million_tokens[k]:.3g}")]
        return rows, fig

    return Explorer(controls, compute, render, title="Reasoning depth and the yearly bill")


# --- analysis (09, 10) -----------------------------------------------------
def sensitivity_explorer(workload: str = "Llama-3-8B", hardware: str = "H100-SXM", phase: str = "decode",
                         batch: int = 1, seq_len: int = 2048, context_tokens: int = 0,
                         target_ms: float = 2.0) -> Explorer:
    """Explore :func:`mlsysim.hardware_sensitivity` and :func:`mlsysim.inverse_roofline` on one pass:
    a tornado of elasticities and the bandwidth or FLOP/s a target time needs."""
    from .sensitivity import hardware_sensitivity, inverse_roofline
    controls = {
        "workload": _dropdown("models", workload, "workload"),
        "hardware": _dropdown("hardware", hardware, "device"),
        "phase": W.Dropdown(options=["decode", "prefill", "training"], value=phase, description="phase",
                            style={"description_width": "8em"}),
        "batch": _log_slider("batch", batch, 0, 12),
        "seq_len": W.IntSlider(value=seq_len, min=128, max=8192, step=128, description="prompt tokens",
                               style={"description_width": "8em"}),
        "context_tokens": W.IntSlider(value=context_tokens, min=0, max=32768, step=512, description="context",
                                      style={"description_width": "8em"}),
        "target_ms": W.FloatLogSlider(value=target_ms, base=10, min=-2, max=4, step=0.1,
                                      description="target (ms)", readout_format=".3g",
                                      style={"description_width": "8em"}),
    }

    def compute(workload, hardware, phase, batch, seq_len, context_tokens, target_ms):
        kw = dict(phase=phase, context_tokens=context_tokens) if phase == "decode" else \
            dict(phase=phase, seq_len=seq_len)
        sens = hardware_sensitivity(roofline, workload, hardware, inputs={"batch": batch}, **kw)
        need = "bandwidth" if sens.bound == "memory" else "peak"
        try:
            req = inverse_roofline(workload, hardware, target_s=target_ms * 1e-3, solve_for=need,
                                   batch=batch, **kw)
            verdict = (f"{fmt(req.bandwidth_Bps, 'B/s')} ({req.bandwidth_factor:.3g}x)" if need == "bandwidth"
                       else f"{fmt(req.peak_flops, 'FLOP/s')} ({req.peak_factor:.3g}x)")
        except MlsysimError as e:
            verdict = f"none: {e}"
        return sens, need, target_ms, verdict

    def render(result):
        sens, need, target_ms, verdict = result
        fig = plots.tornado(sens)
        rows = [("time per pass", f"{fmt(sens.value, 's')} ({sens.bound}-bound)")]
        rows += [(f"elasticity to {it.name}", it.shown()) for it in sens.ranked()]
        rows.append((f"{need} for {target_ms:.3g} ms", verdict))
        return rows, fig

    return Explorer(controls, compute, render, title="Where to invest: elasticities and the inverse roofline")


def wafer_explorer(workload: str = "Llama-3-8B", hardware: str = "Cerebras-WSE-3", seq_len: int = 2048,
                   recompute: str = "full", batch: int = 8) -> Explorer:
    """Explore :func:`mlsysim.wafer.weight_streaming`: sweep times against the batch on the wafer, the
    batch at which streaming turns compute-bound and the batch the SRAM holds."""
    import numpy as np
    from .sensitivity import scale_hardware
    from .wafer import weight_streaming
    controls = {
        "workload": _dropdown("models", workload, "workload",
                              options=[n for n in zoo("models") if n not in ("ResNet-50", "ResNet-18", "MobileNetV2")]),
        "hardware": W.Dropdown(options=["Cerebras-WSE-2", "Cerebras-WSE-3", "H100-SXM", "B200-HGX"], value=hardware,
                               description="device", style={"description_width": "8em"}),
        "seq_len": W.IntSlider(value=seq_len, min=256, max=8192, step=256, description="tokens/sequence",
                               style={"description_width": "8em"}),
        "recompute": W.Dropdown(options=["none", "full"], value=recompute, description="recompute",
                                style={"description_width": "8em"}),
        "batch": _log_slider("batch", batch, 0, 10),
    }

    def compute(workload, hardware, seq_len, recompute, batch):
        at = weight_streaming(workload, hardware, batch=batch, seq_len=seq_len, recompute=recompute)
        sweep = np.unique(np.round(np.geomspace(1, max(4 * float(at.compute_bound_batch), 4 * float(batch), 8), 48)))
        real = weight_streaming(workload, hardware, batch=sweep, seq_len=seq_len, recompute=recompute)
        ideal = weight_streaming(workload, scale_hardware(hardware, capacity=1e6), batch=sweep,
                                 seq_len=seq_len, recompute=recompute)
        return at, real, ideal

    def render(result):
        at, real, ideal = result
        fig = plots.weight_streaming(real, ideal)
        rows = [("step time", f"{fmt(at.time_s, 's')} ({at.bound}-bound)"),
                ("utilization", fmt(at.utilization, "%")),
                ("streaming ridge", f"{at.ridge:.3g} FLOP/B, intensity {at.intensity:.3g}"),
                ("SRAM", f"{fmt(at.sram_needed_B, 'B')} of {fmt(at.sram_B, 'B')}"),
                ("verdict", at.verdict())]
        return rows, fig

    return Explorer(controls, compute, render, title="Weight streaming: injection, compute and SRAM")




# --- audit (11) ------------------------------------------------------------
def audit_explorer(model: str = "Llama-3-70B", node: str = "DGX-H100", nodes: int = 64,
                   grid: str = "Virginia", tokens_per_param: float = 20.0, strategy: str = "best",
                   efficiency: float | None = None, global_batch: int = 512, seq_len: int = 8192) -> Explorer:
    """Explore :func:`mlsysim.audit`: model, cluster, region, token budget, checkpoint strategy
    and kernel efficiency; the summary names the binding walls and the figure is the waterfall."""
    from .audit import audit
    from .economics import _data as _prices
    from .registry import _key, cluster
    style = {"description_width": "8em"}
    priced = _prices()["node_price"]
    nodes_ = [n for n in zoo("nodes") if _key(n) in priced]
    grids = [g.name for g in zoo("grids", records=True) if g.price_usd_per_kWh is not None]
    controls = {
        "model": _dropdown("models", model, "model", options=_transformers()),
        "node": _dropdown("nodes", node, "node", options=nodes_),
        "nodes": _log_slider("nodes", nodes, 0, 11),
        "grid": _dropdown("grids", grid, "region", options=grids),
        "tokens_per_param": W.FloatLogSlider(value=tokens_per_param, base=10, min=0, max=3, step=0.05,
                                             description="tokens/param", readout_format=".3g", style=style),
        "strategy": W.Dropdown(options=["best", "sync", "async", "in-memory"], value=strategy,
                               description="checkpoints", style=style),
        # 0 stands for the default: every GEMM's efficiency from its shape (mlsysim.kernels)
        "efficiency": W.FloatSlider(value=0.0 if efficiency is None else efficiency, min=0.0, max=1.0, step=0.05,
                                    description="kernel η (0: by shape)", style=style),
    }

    def compute(model, node, nodes, grid, tokens_per_param, strategy, efficiency):
        from .audit import chinchilla_tokens
        return audit(model, cluster(node, nodes=int(nodes)), chinchilla_tokens(model, tokens_per_param), grid,
                     global_batch=global_batch, seq_len=seq_len, efficiency=efficiency or None,
                     strategy=None if strategy == "best" else strategy)

    def render(a):
        fig = plots.waterfall(a.waterfall, title=f"{a.model} on {a.accelerators:,} × {a.accelerator}, {a.grid}")
        rows = [("wall clock", f"{a.days:.3g} days ({a.wall_s / a.waterfall['ideal at peak']:.2f} × ideal)"),
                ("layout", a.layout), ("MFU", f"{a.mfu:.1%} (over the wall clock {a.effective_mfu:.1%})"),
                ("checkpoints", f"{a.checkpoint.strategy}, goodput {fmt(a.goodput.ratio, '%')}"),
                ("largest loss", a.largest_loss),
                ("energy, carbon", f"{fmt(a.footprint.energy_kWh * 1e3, 'Wh')}, {a.carbon_kg / 1e3:.3g} tCO2e"),
                ("cost (owned)", "$" + fmt(a.cost_usd, "", 3))]
        rows += [(r["domain"], r["binding wall"]) for r in a.walls()]
        return rows, fig

    return Explorer(controls, compute, render, title="Full-stack audit of a training run")


# --- checkpoint lab (06a) -------------------------------------------------------
def lab_checkpoint_explorer(size_GB: float = 1.0, copy_GBps: float = 10.0, write_GBps: float = 1.0,
                            read_GBps: float = 2.0, interval_s: float = 2.0) -> Explorer:
    """Explore the checkpoint lab's model: state size, memory copy and disk rates, interval →
    sync and concurrent stall per checkpoint and the share of time they cost (no run needed)."""
    from .lab.predict import machine_from, predict
    style = {"description_width": "9em"}

    def slider(value, lo, hi, label):
        return W.FloatLogSlider(value=value, base=10, min=lo, max=hi, step=0.05, description=label,
                                readout_format=".3g", style=style)

    controls = {"size_GB": slider(size_GB, -2, 2, "state (GB)"),
                "copy_GBps": slider(copy_GBps, 0, 2, "memory copy (GB/s)"),
                "write_GBps": slider(write_GBps, -1, 1.5, "disk write (GB/s)"),
                "read_GBps": slider(read_GBps, -1, 1.5, "disk read (GB/s)"),
                "interval_s": slider(interval_s, -1, 3, "interval (s)")}

    def compute(size_GB, copy_GBps, write_GBps, read_GBps, interval_s):
        m = machine_from(copy_GBps * 1e9, write_GBps * 1e9, read_GBps * 1e9)
        tau = np.geomspace(0.1, 1000.0, 60)
        curves = [predict(size_GB * 1e9, m, t) for t in tau]
        return predict(size_GB * 1e9, m, interval_s), (tau, [p.sync_stall_s for p in curves],
                                                       [p.concurrent_stall_s for p in curves])

    def render(result):
        p, curves = result
        fig = plots.lab_stalls(model=curves, title=f"{fmt(p.size_B, 'B')} state")
        fig.axes[0].axvline(p.interval_s, color="#7f7f7f", ls=":", lw=1)
        share = lambda s: fmt(s / (p.interval_s + s), "%")  # noqa: E731
        rows = [("snapshot copy", fmt(p.copy_s, "s")), ("disk write", fmt(p.write_s, "s")),
                ("sync stall", f"{fmt(p.sync_stall_s, 's')} ({share(p.sync_stall_s)} of the time)"),
                ("concurrent stall", f"{fmt(p.concurrent_stall_s, 's')} ({share(p.concurrent_stall_s)} of the time)"),
                ("load back", fmt(p.restore_s, "s"))]
        return rows, fig

    return Explorer(controls, compute, render, title="Checkpoint lab: what the model predicts")


def lab_engines_explorer(size_GB: float = 1.0, copy_GBps: float = 10.0, write_GBps: float = 1.0,
                         host_memory_GB: float = 64.0) -> Explorer:
    """Explore the PyTorch lab's model: state size, memory copy and write + fsync rates, host memory →
    each engine's predicted stall and time to durable for one checkpoint, and the two floors
    (:func:`mlsysim.lab.pytorch.results.predicted`; no run, no torch needed)."""
    from .lab.pytorch.results import predicted
    style = {"description_width": "9em"}

    def slider(value, lo, hi, label):
        return W.FloatLogSlider(value=value, base=10, min=lo, max=hi, step=0.05, description=label,
                                readout_format=".3g", style=style)

    controls = {"size_GB": slider(size_GB, -2, 2.5, "state (GB)"),
                "copy_GBps": slider(copy_GBps, 0, 2, "memory copy (GB/s)"),
                "write_GBps": slider(write_GBps, -1, 1.5, "write + fsync (GB/s)"),
                "host_memory_GB": slider(host_memory_GB, 0, 3.5, "host memory (GB)")}

    def compute(size_GB, copy_GBps, write_GBps, host_memory_GB):
        return predicted(size_GB * 1e9, copy_GBps * 1e9, write_GBps * 1e9, host_memory_B=host_memory_GB * 1e9)

    def render(d):
        e = {r["engine"]: r for r in d["engines"]}
        rows = [("copy floor", fmt(d["copy_floor_s"], "s")), ("write + fsync floor", fmt(d["write_floor_s"], "s")),
                ("blocking engines (sync, torch.save + fsync, DCP save)",
                 f"stall {fmt(e['sync']['stall_s'], 's')}, durable after {fmt(e['sync']['durable_s'], 's')}"),
                ("background engines (concurrent, DCP async_save)",
                 f"stall {fmt(e['concurrent']['stall_s'], 's')}, durable after "
                 f"{fmt(e['concurrent']['durable_s'], 's')}"),
                ("torch.save as usually called", "durable: never (no fsync)")]
        return rows, plots.lab_engines(d, title=f"Model: {fmt(d['size_B'], 'B')} of state")

    return Explorer(controls, compute, render, title="PyTorch lab: what the model predicts per engine")


# --- distributed checkpoint lab (06c) -------------------------------------------
DIST_MODES = {"FSDP (ZeRO-3)": 3, "ZeRO-1": 1, "DDP (ZeRO-0)": 0}   # label -> zero_stage


def lab_dist_explorer(model: str = "Llama-3-8B", nodes: int = 32, storage: str = "lustre",
                      strategy: str = "async", node: str = "DGX-H100") -> Explorer:
    """Explore who writes and who reads a distributed checkpoint (:func:`mlsysim.checkpoint`): for a
    model (with its TP x PP layout from :data:`CHECKPOINT_LAYOUTS`), a number of ``node`` nodes, a
    durable storage tier and a strategy, the bytes the busiest rank writes and the restore time
    under FSDP (ZeRO-3), ZeRO-1 and DDP (ZeRO-0), at the chosen size and over 1 to 2,048 nodes.

    ``result``: ``{"gpus": world sizes of the sweep, "sweep": {mode: Checkpoint over the sweep},
    "current": {mode: Checkpoint at the chosen size, or the message of why it is infeasible}}``.
    Bytes and times only: whether the training state fits in GPU memory is not checked here."""
    from .checkpoint import STRATEGIES, checkpoint, storage_tiers

    style = {"description_width": "8em"}
    durable = [t.name for t in storage_tiers() if t.durable]
    controls = {
        "model": W.Dropdown(options=list(CHECKPOINT_LAYOUTS), value=model, description="model", style=style),
        "nodes": _log_slider("nodes", nodes, 0, 11),
        "storage": W.Dropdown(options=durable, value=storage, description="storage", style=style),
        "strategy": W.Dropdown(options=list(STRATEGIES), value=strategy, description="strategy", style=style),
    }
    grid = 2.0 ** np.arange(0, 12)

    def compute(model, nodes, storage, strategy):
        tp, pp = CHECKPOINT_LAYOUTS[model]
        kw = dict(tp=tp, pp=pp, storage=storage, strategy=strategy)
        sweep = {label: checkpoint(model, node, zero_stage=z, nodes=grid, **kw) for label, z in DIST_MODES.items()}
        current = {}
        for label, z in DIST_MODES.items():
            try:
                current[label] = checkpoint(model, node, zero_stage=z, nodes=int(nodes), **kw)
            except MlsysimError as e:
                current[label] = str(e)
        gpus = grid * _gpus_per_node(node)
        return {"model": model, "nodes": int(nodes), "gpus": gpus, "sweep": sweep, "current": current,
                "tp": tp, "pp": pp, "storage": storage, "strategy": strategy}

    def render(d):
        per_node = _gpus_per_node(node)
        ok = [r for r in d["current"].values() if not isinstance(r, str)]
        rows = [("job", f"{d['model']}, TP {d['tp']} x PP {d['pp']}, {d['nodes'] * per_node:,} GPUs "
                        f"({d['nodes']} x {node})")]
        if ok:
            rows.append(("checkpoint size", fmt(ok[0].size_B, "B")))
        for label, r in d["current"].items():
            if isinstance(r, str):
                rows.append((label, f"not feasible: {r}"))
            else:
                rows.append((label, f"busiest rank writes {fmt(r.rank_B, 'B')}; restore {fmt(r.restore_s, 's')}"))
        fig = plots.lab_dist_bytes(d["gpus"], {k: r.rank_B for k, r in d["sweep"].items()},
                                   {k: r.restore_s for k, r in d["sweep"].items()},
                                   mark=d["nodes"] * per_node,
                                   title=f"{d['model']} (TP {d['tp']} x PP {d['pp']}), {d['strategy']} to "
                                         f"{d['storage']}")
        return rows, fig

    return Explorer(controls, compute, render, title="Distributed checkpoint: who writes, who reads")


def _gpus_per_node(node: str) -> int:
    from .registry import node as _node
    return _node(node).accelerators
