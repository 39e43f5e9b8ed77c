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
from IPython.display import display

from . import plots
from .errors import MlsysimError
from .registry import zoo
from .roofline import roofline
from .units import fmt


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


# --- datapipe (04) ---------------------------------------------------------


# --- quantization (05) -----------------------------------------------------


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


# --- operations (07, 08) ---------------------------------------------------


# --- analysis (09, 10) -----------------------------------------------------


# --- audit (11) ------------------------------------------------------------
