"""Matplotlib figures used by the notebooks. Plots draw results; they never compute physics.

Every function returns a :class:`matplotlib.figure.Figure` (assign it, e.g.
``fig = ms.plots.roofline(...)``, so that Jupyter shows it once). Figures
use one palette and label every axis with its unit.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import matplotlib

import matplotlib.pyplot as plt
import numpy as np

from .registry import hardware as _hardware
from .units import fmt

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
           "#7f7f7f", "#bcbd22"]
matplotlib.rcParams.update({"figure.dpi": 100, "axes.grid": True, "grid.alpha": 0.3,
                            "axes.spines.top": False, "axes.spines.right": False})


def _figure(ax=None, size=(7.5, 4.5)):
    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    return fig, ax


def roofline(hardware: Iterable, points: Sequence = (), precision: str = "bf16",
             intensity_range=(0.1, 1e4), ax=None, title: str | None = None):
    """Log–log roofline of one or more devices with operating points.

    ``points`` holds :class:`~mlsysim.roofline.Roofline` results (their intensity
    and achieved FLOP/s are plotted, labelled by workload and batch) or
    ``(intensity, flop_per_s, label)`` tuples, e.g. a measured point.
    """
    devices = [hardware] if isinstance(hardware, str) or hasattr(hardware, "peak") else list(hardware)
    fig, ax = _figure(ax)
    x = np.logspace(np.log10(intensity_range[0]), np.log10(intensity_range[1]), 400)
    for i, dev in enumerate(devices):
        h = _hardware(dev)
        peak, bw = h.peak(precision), h.memory_bw_Bps
        ax.loglog(x, np.minimum(peak, bw * x), color=PALETTE[i % len(PALETTE)], lw=2,
                  label=f"{h.name}: {fmt(peak, 'FLOP/s')} {precision}, {fmt(bw, 'B/s')}")
        ax.axvline(peak / bw, color=PALETTE[i % len(PALETTE)], ls=":", lw=1)
    for j, p in enumerate(points):
        if isinstance(p, tuple):
            xi, yi, label = p
        else:
            xi, yi = np.asarray(p.intensity), np.asarray(p.achieved_flops)
            label = f"{p.workload} {p.phase}, {p.hardware}"
        ax.loglog(xi, yi, "o-" if np.ndim(xi) else "o", ms=6, color=PALETTE[(j + len(devices)) % len(PALETTE)],
                  label=label, zorder=3)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("attainable FLOP/s")
    ax.set_title(title or "Roofline (dotted lines: ridge points)")
    ax.legend(fontsize=8, loc="lower right")
    return fig


def lines(x, series: dict, xlabel: str, ylabel: str, logx: bool = False, logy: bool = False,
          title: str = "", ax=None, markers: bool = True, hlines: dict | None = None):
    """Several y(x) curves sharing an axis; ``hlines`` maps a label to a horizontal reference."""
    fig, ax = _figure(ax)
    for i, (label, y) in enumerate(series.items()):
        ax.plot(x, y, "o-" if markers else "-", ms=4, color=PALETTE[i % len(PALETTE)], label=label)
    for i, (label, y) in enumerate((hlines or {}).items()):
        ax.axhline(y, color="#555555", ls="--", lw=1)
        ax.annotate(label, (ax.get_xlim()[0], y), xytext=(4, 4), textcoords="offset points", fontsize=8)
    ax.set_xscale("log" if logx else "linear")
    ax.set_yscale("log" if logy else "linear")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if series:
        ax.legend(fontsize=8)
    return fig


def bars(labels: Sequence[str], series: dict, ylabel: str, title: str = "", ax=None, stacked: bool = False,
         logy: bool = False):
    """Grouped (or stacked) bars: one group per label, one bar (or segment) per series."""
    fig, ax = _figure(ax)
    n, idx = len(series), np.arange(len(labels))
    width = 0.8 if stacked else 0.8 / max(n, 1)
    bottom = np.zeros(len(labels))
    for i, (name, y) in enumerate(series.items()):
        y = np.asarray(y, dtype=float)
        if stacked:
            ax.bar(idx, y, width, bottom=bottom, label=name, color=PALETTE[i % len(PALETTE)])
            bottom += np.nan_to_num(y)
        else:
            ax.bar(idx - 0.4 + width * (i + 0.5), y, width, label=name, color=PALETTE[i % len(PALETTE)])
    ax.set_xticks(idx, labels, rotation=20 if max(map(len, labels)) > 8 else 0, ha="right"
                  if max(map(len, labels)) > 8 else "center")
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    if n > 1 or stacked:
        ax.legend(fontsize=8)
    return fig


# --- serving (02, 03) ------------------------------------------------------


# --- datapipe (04) ---------------------------------------------------------


# --- quantization (05) -----------------------------------------------------


# --- distributed training (06) ---------------------------------------------


# --- reliability and checkpointing (06) ------------------------------------


# --- operations (07, 08) ---------------------------------------------------


# --- analysis (09, 10) -----------------------------------------------------
def tornado(sens, ax=None, title: str | None = None):
    """Tornado diagram of a :class:`~mlsysim.sensitivity.Sensitivity`: the change of the result
    when each input moves down or up by the step, most influential input on top."""
    items = sens.ranked()[::-1]
    fig, ax = _figure(ax, size=(7.5, 0.9 + 0.55 * len(items)))
    y = np.arange(len(items))
    h = f"{sens.rel_step:.0%}"
    low = np.array([it.low for it in items]) * 100
    high = np.array([it.high for it in items]) * 100
    ax.barh(y, low, 0.6, color=PALETTE[0], label=f"input -{h}")
    ax.barh(y, high, 0.6, color=PALETTE[1], label=f"input +{h}")
    for yi, it in zip(y, items):
        if np.isnan(it.low) or np.isnan(it.high):
            ax.annotate("infeasible", (0, yi), xytext=(6, -3), textcoords="offset points", fontsize=8)
    ax.axvline(0, color="#333333", lw=1)
    ax.set_yticks(y, [f"{it.name}  (e = {it.shown()})" for it in items])
    ax.set_xlabel(f"change of {sens.output} (%)")
    ax.grid(axis="y", visible=False)
    ax.set_title(title or f"What moves {sens.output}" + (f" ({sens.bound}-bound)" if sens.bound else ""))
    ax.legend(fontsize=8, loc="lower right")
    return fig


def elasticities(grid: dict, inputs: Sequence[str] = ("peak", "bandwidth"), title: str = ""):
    """Small multiples of elasticities: one panel per input, one group per row key of ``grid``
    (e.g. a regime), one bar per column key (e.g. a device). ``grid[row][col]`` is a
    :class:`~mlsysim.sensitivity.Sensitivity`. A bar shows the central value; at a kink a
    black line spans the two one-sided values."""
    rows = list(grid)
    cols = list(grid[rows[0]])
    fig, axes = plt.subplots(1, len(inputs), figsize=(3.9 * len(inputs), 4.2), sharey=True,
                             layout="constrained", squeeze=False)
    width, idx = 0.8 / len(cols), np.arange(len(rows))
    for ax, name in zip(axes[0], inputs):
        for j, col in enumerate(cols):
            its = [grid[r][col][name] for r in rows]
            x = idx - 0.4 + width * (j + 0.5)
            ax.bar(x, [it.elasticity for it in its], width, color=PALETTE[j % len(PALETTE)], label=col)
            for xi, it in zip(x, its):
                if it.kink:
                    ax.plot([xi, xi], [it.down, it.up], color="black", lw=2)
        ax.axhline(0, color="#333333", lw=1)
        ax.set_xticks(idx, rows, rotation=25, ha="right", fontsize=8)
        ax.set_title(f"elasticity to {name}", fontsize=10)
    axes[0][0].set_ylabel("elasticity of the result")
    axes[0][0].legend(fontsize=8, loc="lower left")
    if title:
        fig.suptitle(title)
    return fig


def weight_streaming(r, ideal=None, ax=None, title: str | None = None):
    """Sweep times of a weight-streaming result over an array of batches (log–log).

    ``r`` is the sweep on the real device (NaN past its SRAM limit); ``ideal``, the same
    sweep on a copy with unlimited SRAM, is drawn dashed so that the unreachable part
    shows. Vertical lines mark the compute-bound batch and the SRAM limit.
    """
    fig, ax = _figure(ax)
    x = np.asarray(r.batch, dtype=float)
    lines = [("forward: compute", "forward_compute_s", PALETTE[0])]
    if r.phase == "training":
        lines.append(("backward: compute", "backward_compute_s", PALETTE[2]))
        same = np.allclose(np.asarray(r.forward_stream_s), np.asarray(r.backward_stream_s), equal_nan=True)
        lines += ([("weight stream, each sweep", "forward_stream_s", PALETTE[1])] if same else
                  [("forward: weight stream", "forward_stream_s", PALETTE[1]),
                   ("backward: weight stream", "backward_stream_s", PALETTE[3])])
    else:
        lines.append(("weight stream", "forward_stream_s", PALETTE[1]))
    for label, field, color in lines:
        ax.loglog(x, np.asarray(getattr(r, field)) * 1e3, "-", color=color, lw=2, label=label)
        if ideal is not None:
            ax.loglog(x, np.asarray(getattr(ideal, field)) * 1e3, "--", color=color, lw=1)
    need = float(np.atleast_1d(r.compute_bound_batch)[0])
    cap = float(np.atleast_1d(r.max_batch)[0])
    ax.axvline(need, color="#333333", ls=":", lw=1.5)
    ax.annotate(f"compute-bound from {need:,.0f}", (need, 0.02), xycoords=("data", "axes fraction"),
                xytext=(4, 0), textcoords="offset points", fontsize=8, rotation=90, va="bottom")
    ax.axvline(cap, color="#555555", ls="-.", lw=1.5)
    ax.annotate(f"SRAM full at {cap:,.0f}", (cap, 0.02), xycoords=("data", "axes fraction"),
                xytext=(-12, 0), textcoords="offset points", fontsize=8, rotation=90, va="bottom")
    ax.set_xlabel(f"batch (sequences of {float(np.atleast_1d(r.tokens_per_sequence)[0]):,.0f} tokens per wafer)")
    ax.set_ylabel("time per sweep (ms)")
    ax.set_title(title or f"{r.workload} {r.phase} on {r.hardware}: weights streamed at "
                          f"{fmt(r.injection_Bps, 'B/s')}")
    ax.legend(fontsize=8, loc="upper left")
    return fig




# --- audit (11) ------------------------------------------------------------
