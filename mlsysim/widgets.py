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


# --- audit (11) ------------------------------------------------------------
