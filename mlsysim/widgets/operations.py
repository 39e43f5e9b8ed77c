"""Explorers for operations (notebooks 07, 08): one cluster in several regions, reasoning depth and its bill."""
from __future__ import annotations

import ipywidgets as W

from .. import plots
from ..registry import zoo
from ..units import fmt
from ._common import Explorer, _dropdown, _log_slider


# --- operations (07, 08) ---------------------------------------------------
GEOGRAPHY_REGIONS = ("Montreal", "Paris", "Ashburn", "Warsaw")


def geography_explorer(node: str = "DGX-H100", nodes: int = 128, days: float = 30.0, utilization: float = 0.84,
                       carbon_price_usd_per_t: float = 0.0, regions=GEOGRAPHY_REGIONS) -> Explorer:
    """Explore :func:`mlsysim.footprint` and :func:`mlsysim.tco` of one cluster in several regions."""
    from ..economics import tco
    from ..sustainability import footprint
    from ..registry import _key
    from ..sustainability import _data as _sdata
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
        from ..registry import cluster
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
    from ..errors import InfeasibleError
    from ..reasoning import reasoning_service
    from ..workloads import Transformer
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
