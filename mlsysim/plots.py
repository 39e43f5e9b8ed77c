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
def step_breakdown(labels: Sequence[str], steps: Sequence, share: bool = False, title: str = "", ax=None,
                   xlabel: str = ""):
    """Stacked bars of where each training step's time goes (:meth:`TrainStep.parts`):
    seconds, or with ``share`` the fraction of the step."""
    parts = [r.parts() for r in steps]
    names = [k for k in parts[0] if any(p[k] > 0 for p in parts)]
    series = {k: [p[k] / (r.step_s if share else 1.0) for p, r in zip(parts, steps)] for k in names}
    fig = bars(list(labels), series, ylabel="share of the step" if share else "time per step (s)",
               title=title, ax=ax, stacked=True)
    ax_ = ax or fig.axes[0]
    ax_.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if xlabel:
        ax_.set_xlabel(xlabel)
    return fig


def memory_breakdown(labels: Sequence[str], memories: Sequence, capacity_B: float | None = None,
                     title: str = "", ax=None, ymax_B: float | None = None):
    """Stacked bars of the per-GPU training memory (:meth:`TrainingMemory.parts`) in GB,
    each labelled with its total, with the device capacity as a dashed line. ``ymax_B``
    cuts the axis (taller bars run off the top; their label still gives the total)."""
    parts = [r.parts() for r in memories]
    names = [k for k in parts[0] if any(p[k] > 0 for p in parts)]
    series = {k: [p[k] / 1e9 for p in parts] for k in names}
    fig = bars(list(labels), series, ylabel="memory per GPU (GB)", title=title, ax=ax, stacked=True)
    ax_ = ax or fig.axes[0]
    top = ymax_B / 1e9 if ymax_B else None
    if top:
        ax_.set_ylim(0, top)
    for i, r in enumerate(memories):
        y = r.total_B / 1e9
        clipped = top is not None and y > top
        ax_.annotate(fmt(r.total_B, "B") + (" ↑" if clipped else ""), (i, top if clipped else y), ha="center",
                     va="top" if clipped else "bottom", xytext=(0, -3 if clipped else 2),
                     textcoords="offset points", fontsize=8, color="white" if clipped else "black")
    if capacity_B is not None:
        ax_.axhline(capacity_B / 1e9, color="#555555", ls="--", lw=1)
        ax_.annotate(f"capacity {fmt(capacity_B, 'B')}", (-0.4, capacity_B / 1e9), xytext=(0, 4),
                     textcoords="offset points", fontsize=8)
    ax_.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig



# --- reliability and checkpointing (06) ------------------------------------


# --- operations (07, 08) ---------------------------------------------------


# --- analysis (09, 10) -----------------------------------------------------


# --- audit (11) ------------------------------------------------------------
