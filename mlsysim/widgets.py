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


# --- reliability and checkpointing (06) ------------------------------------


# --- operations (07, 08) ---------------------------------------------------


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
    """Explore :func:`mlsysim.weight_streaming`: sweep times against the batch on the wafer, the
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
        sweep = np.geomspace(1, max(4 * float(at.compute_bound_batch), 4 * float(batch), 8), 48)
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
