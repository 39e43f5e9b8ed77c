"""Explorers for analysis (notebooks 09, 10) and the full-stack audit (11): sensitivity, the wafer, the audit."""
from __future__ import annotations

import ipywidgets as W

from .. import plots
from ..errors import MlsysimError
from ..registry import zoo
from ..roofline import roofline
from ..units import fmt
from ._common import Explorer, _dropdown, _log_slider, _transformers


# --- analysis (09, 10) -----------------------------------------------------
def sensitivity_explorer(workload: str = "Llama-3-8B", hardware: str = "H100-SXM", phase: str = "decode",
                         batch: int = 1, seq_len: int = 2048, context_tokens: int = 0,
                         target_ms: float = 2.0) -> Explorer:
    """Explore :func:`mlsysim.hardware_sensitivity` and :func:`mlsysim.inverse_roofline` on one pass:
    a tornado of elasticities and the bandwidth or FLOP/s a target time needs."""
    from ..sensitivity import hardware_sensitivity, inverse_roofline
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
    from ..sensitivity import scale_hardware
    from ..wafer import weight_streaming
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
    from ..audit import audit
    from ..economics import _data as _prices
    from ..registry import _key, cluster
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
        from ..audit import chinchilla_tokens
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
