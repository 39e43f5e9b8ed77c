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
    ax.set_xscale("log" if logx else "linear")
    ax.set_yscale("log" if logy else "linear")
    for label, y in (hlines or {}).items():
        ax.axhline(y, color="#555555", ls="--", lw=1)
        ax.annotate(label, (0, y), xycoords=("axes fraction", "data"), xytext=(4, 4),
                    textcoords="offset points", fontsize=8)
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
def ttft_itl(prompt_tokens, ttft_s: dict, batches, itl_s: dict, ttft_sla_s: float | None = None,
             itl_sla_s: float | None = None, title: str = ""):
    """Two panels: time to first token against prompt length, and time per output token against
    the decode batch; one curve per label (e.g. device), dashed lines at the service-level targets."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 4.2), layout="constrained")
    for i, (label, y) in enumerate(ttft_s.items()):
        left.loglog(prompt_tokens, np.asarray(y) * 1e3, "o-", ms=3, color=PALETTE[i % len(PALETTE)], label=label)
    for i, (label, y) in enumerate(itl_s.items()):
        right.semilogx(batches, np.asarray(y) * 1e3, "o-", ms=3, color=PALETTE[i % len(PALETTE)], label=label)
    right.set_ylim(bottom=0)
    for ax, sla, name in ((left, ttft_sla_s, "TTFT target"), (right, itl_sla_s, "ITL target")):
        if sla is not None:
            ax.axhline(sla * 1e3, color="#555555", ls="--", lw=1)
            ax.annotate(name, (ax.get_xlim()[0], sla * 1e3), xytext=(4, 4), textcoords="offset points",
                        fontsize=8)
    left.set(xlabel="prompt tokens", ylabel="time to first token (ms)", title="Prefill")
    right.set(xlabel="sequences decoding together (batch)", ylabel="time per output token (ms)",
              title="Decode")
    left.legend(fontsize=8)
    right.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return fig


def accuracy(labels: Sequence[str], predicted, published, tolerance: float | None = None, ax=None,
             title: str = "Predicted over published"):
    """One dot per case at predicted / published (log scale, 1 = exact), with a ±``tolerance`` band;
    cases of different units share one axis."""
    ratio = np.asarray(predicted, dtype=float) / np.asarray(published, dtype=float)
    fig, ax = _figure(ax, size=(7.5, 0.32 * len(labels) + 1.4))
    y = np.arange(len(labels))[::-1]
    if tolerance:
        ax.axvspan(1 - tolerance, 1 + tolerance, color="#999999", alpha=0.2, label=f"±{tolerance:.0%}")
    ax.axvline(1.0, color="#555555", lw=1)
    ax.plot(ratio, y, "o", color=PALETTE[0], ms=6)
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xscale("log")
    lo, hi = min(ratio.min(), 1 - (tolerance or 0)) / 1.15, max(ratio.max(), 1 + (tolerance or 0)) * 1.15
    ax.set_xlim(lo, hi)
    from matplotlib.ticker import FormatStrFormatter
    ax.xaxis.set_major_formatter(FormatStrFormatter("%.2g"))
    ax.xaxis.set_minor_formatter(FormatStrFormatter("%.2g"))
    ax.set_xlabel("predicted / published")
    ax.set_title(title)
    if tolerance:
        ax.legend(fontsize=8, loc="lower right")
    return fig


def memory_boundary(context_tokens, max_batch: dict, ax=None, title: str = "What fits in memory"):
    """Largest batch that fits against context length, one curve per label (log–log); the
    region under a curve fits, the region above runs out of memory."""
    fig, ax = _figure(ax)
    x = np.asarray(context_tokens, dtype=float)
    for i, (label, y) in enumerate(max_batch.items()):
        y = np.asarray(y, dtype=float)
        ok = np.isfinite(y) & (y >= 1)
        color = PALETTE[i % len(PALETTE)]
        ax.loglog(x[ok], y[ok], "-", lw=2, color=color, label=label)
        ax.fill_between(x[ok], 1, y[ok], color=color, alpha=0.08)
    ax.set_xlabel("tokens per sequence (context)")
    ax.set_ylabel("largest batch that fits")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return fig




# --- datapipe (04) ---------------------------------------------------------
def pipeline_stages(result, ax=None, title: str | None = None):
    """Horizontal bars of the four stage rates of a scalar :class:`~mlsysim.datapipe.DataPipe`
    (log scale), the slowest one highlighted and the delivered rate marked."""
    fig, ax = _figure(ax, size=(7.5, 3.2))
    unit = "images/s" if result.tokens_per_sample == 1 else "sequences/s"
    names = list(result.stages)
    rates = [float(result.stages[k]) for k in names]
    finite = [r for r in rates if np.isfinite(r)]
    cap = max(finite) * 10 if finite else 1.0
    shown = [r if np.isfinite(r) else cap for r in rates]
    colors = [PALETTE[1] if k == result.bound else PALETTE[0] for k in names]
    ax.barh(names, shown, color=colors)
    for i, r in enumerate(rates):
        ax.annotate("unlimited" if not np.isfinite(r) else fmt(r), (shown[i], i), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=8)
    ax.axvline(float(result.delivered_sps), color="#555555", ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_xlim(min(shown) / 3, cap * 8)
    ax.invert_yaxis()
    ax.set_xlabel(f"throughput per accelerator ({unit}); dashed: delivered")
    ax.set_title(title or f"{result.workload} on {result.hardware}: {result.bound}-bound")
    return fig


def crossover(workers, results: dict, marks: dict | None = None, ax=None, title: str = ""):
    """Delivered samples/s per accelerator against workers, one curve per labelled
    :class:`~mlsysim.datapipe.DataPipe` sweep; ``marks`` maps a label to a worker count (vertical line)."""
    fig, ax = _figure(ax)
    for i, (label, r) in enumerate(results.items()):
        ax.plot(workers, r.delivered_sps, "-", color=PALETTE[i % len(PALETTE)], label=label)
    for j, (label, x) in enumerate((marks or {}).items()):
        ax.axvline(x, color="#555555", ls=(":", "--", "-.")[j % 3], lw=1, label=label)
    first = next(iter(results.values()))
    ax.set_xlabel("data-loading workers (hardware threads) per accelerator")
    ax.set_ylabel(f"{'images' if first.tokens_per_sample == 1 else 'sequences'}/s per accelerator")
    ax.set_title(title or "Throughput rises with workers until the accelerator binds")
    ax.legend(fontsize=8, loc="lower right")
    return fig


# --- quantization (05) -----------------------------------------------------
def footprints(results: Sequence, ax=None, title: str = ""):
    """Stacked bars of weights, KV cache and other memory of :class:`~mlsysim.quantization.Footprint`
    results, with each device's capacity as a dashed line."""
    fig, ax = _figure(ax)
    labels = [f"{r.scheme}\n{r.hardware}" if len({x.hardware for x in results}) > 1 else r.scheme
              for r in results]
    weights = np.array([float(r.weights_B) for r in results]) / 1e9
    kv = np.array([float(r.kv_B) for r in results]) / 1e9
    other = np.array([float(r.other_B) for r in results]) / 1e9
    idx = np.arange(len(results))
    ax.bar(idx, weights, 0.6, label="weights", color=PALETTE[0])
    ax.bar(idx, kv, 0.6, bottom=weights, label="KV cache", color=PALETTE[2])
    ax.bar(idx, other, 0.6, bottom=weights + kv, label="activations", color=PALETTE[4])
    for cap in sorted({r.capacity_B for r in results}):
        ax.axhline(cap / 1e9, color="#555555", ls="--", lw=1)
        ax.annotate(f"{fmt(cap, 'B')} device", (idx[-1] + 0.35, cap / 1e9), xytext=(0, 3),
                    textcoords="offset points", fontsize=8, ha="right")
    ax.set_xticks(idx, labels)
    ax.set_ylabel("memory (GB)")
    ax.set_title(title or f"{results[0].workload}: memory by scheme")
    ax.legend(fontsize=8, loc="upper right")
    return fig


# --- distributed training (06) ---------------------------------------------
def step_breakdown(labels: Sequence[str], steps: Sequence, share: bool = False, title: str = "", ax=None,
                   xlabel: str = ""):
    """Stacked bars of where each training step's time goes (``TrainStep.breakdown()``: GEMM,
    non-GEMM memory, exposed communication, bubble, optimizer): seconds, or with ``share`` the
    fraction of the step."""
    parts = [r.breakdown() for r in steps]
    names = [k for k in parts[0] if any(p[k] > 0 for p in parts)]
    series = {k: [p[k] / (r.step_s if share else 1.0) for p, r in zip(parts, steps)] for k in names}
    fig = bars(list(labels), series, ylabel="share of the step" if share else "time per step (s)",
               title=title, ax=ax, stacked=True)
    ax_ = ax or fig.axes[0]
    ax_.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if xlabel:
        ax_.set_xlabel(xlabel)
    return fig


def weak_scaling(labels: Sequence[str], steps: Sequence, predicted, published, ylabel: str,
                 title: str = ""):
    """Two panels along a scaling series: where each step goes (stacked shares of
    ``TrainStep.breakdown()``) and the per-GPU throughput, predicted against published."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), layout="constrained")
    step_breakdown(labels, steps, share=True, ax=left, title="share of the step")
    left.get_legend().remove()
    left.legend(fontsize=7, loc="lower left", ncol=2)
    idx = np.arange(len(labels))
    right.plot(idx, published, "o-", color=PALETTE[0], label="published")
    right.plot(idx, predicted, "s--", color=PALETTE[1], label="predicted")
    right.set_xticks(idx, list(labels), rotation=20, ha="right")
    right.set_ylabel(ylabel)
    right.set_title("per-GPU throughput")
    right.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return fig


def scaling_series(results: Sequence, cols: int = 3):
    """One panel per published scaling series: published and predicted along the series.
    ``results`` holds ``(name, unit, labels, published, predicted)`` tuples."""
    rows_ = -(-len(results) // cols)
    fig, axes = plt.subplots(rows_, cols, figsize=(4.2 * cols, 3.4 * rows_), layout="constrained",
                             squeeze=False)
    for ax, (name, unit, labels, published, predicted) in zip(axes.flat, results):
        idx = np.arange(len(labels))
        ax.plot(idx, published, "o-", color=PALETTE[0], label="published")
        ax.plot(idx, predicted, "s--", color=PALETTE[1], label="predicted")
        ax.set_xticks(idx, [str(x) for x in labels], rotation=30, ha="right", fontsize=7)
        ax.set_ylabel(unit)
        ax.set_title(name, fontsize=8)
    for ax in list(axes.flat)[len(results):]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=8)
    return fig


def memory_breakdown(labels: Sequence[str], memories: Sequence, capacity_B: float | None = None,
                     title: str = "", ax=None, ymax_B: float | None = None):
    """Stacked bars of the per-GPU training memory (``TrainingMemory.parts()``) in GB,
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
def interval_tradeoff(interval_s, series: dict, marks: dict | None = None, ylabel: str = "share of wall time (%)",
                      title: str = "", ax=None, percent: bool = True):
    """Curves over the checkpoint interval (log x axis, in minutes) with labelled vertical marks.

    ``series`` maps a label to y values (fractions, shown in % when ``percent``); ``marks``
    maps a label to an interval in seconds (e.g. the Young and Daly optima).
    """
    fig, ax = _figure(ax)
    x = np.asarray(interval_s, dtype=float) / 60.0
    scale = 100.0 if percent else 1.0
    for i, (label, y) in enumerate(series.items()):
        ax.plot(x, np.asarray(y, dtype=float) * scale, "-", lw=2, color=PALETTE[i % len(PALETTE)], label=label)
    for j, (label, at) in enumerate((marks or {}).items()):
        ax.axvline(at / 60.0, color=PALETTE[(j + len(series)) % len(PALETTE)], ls="--", lw=1.2, label=label)
    ax.set_xscale("log")
    ax.set_xlabel("checkpoint interval (minutes of training between checkpoints)")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    return fig




# --- operations (07, 08) ---------------------------------------------------
def side_by_side(x, left: dict, right: dict, xlabel: str, left_ylabel: str, right_ylabel: str,
                 title: str = "", logy_left: bool = False, logy_right: bool = False):
    """Two panels sharing an x axis: ``left`` and ``right`` map labels to y(x) curves."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(9.5, 4.0), layout="constrained")
    lines(x, left, xlabel=xlabel, ylabel=left_ylabel, ax=a, markers=False, logy=logy_left)
    lines(x, right, xlabel=xlabel, ylabel=right_ylabel, ax=b, markers=False, logy=logy_right)
    if title:
        fig.suptitle(title)
    return fig



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
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    return fig




# --- audit (11) ------------------------------------------------------------
def waterfall(parts: dict, total_label: str = "wall clock", scale: float = 86400.0, unit: str = "days",
              title: str = "", ax=None):
    """Horizontal waterfall: the first part is the base bar, each next part floats on the
    running total (a negative part shrinks it), and the last bar is the total.

    ``parts`` maps labels to values in SI units (seconds for ``Audit.waterfall``), shown divided by ``scale`` in ``unit``.
    """
    labels = list(parts) + [total_label]
    values = np.array([float(v) for v in parts.values()]) / scale
    total = values.sum()
    fig, ax = _figure(ax, size=(7.5, 0.42 * len(labels) + 1.3))
    y = np.arange(len(labels))
    start = np.concatenate([[0.0], np.cumsum(values)[:-1]])
    colors = [PALETTE[0]] + [PALETTE[1] if v > 0 else PALETTE[2] for v in values[1:]]
    ax.barh(y[:-1], values, left=start, color=colors, height=0.6)
    ax.barh(y[-1], total, color="#555555", height=0.6)
    for i, (x0, v) in enumerate(zip(start, values)):
        ax.annotate((f"+{v:.3g}" if i else f"{v:.3g}") + f" ({fmt(v / total, '%', 2)})", (max(x0, x0 + v), i),
                    xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
        if i:
            ax.plot([x0, x0], [i - 1.3, i + 0.3], color="#999999", lw=0.8, ls=":")
    ax.annotate(f"{total:.3g} {unit}", (total, y[-1]), xytext=(4, 0), textcoords="offset points",
                va="center", fontsize=8, fontweight="bold")
    ax.set_yticks(y, labels, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlim(0, total * 1.22)
    ax.grid(False, axis="y")
    ax.set_xlabel(unit)
    ax.set_title(title or f"Where the time goes: ideal at peak to {total_label}")
    return fig


def panels(labels: Sequence[str], metrics: dict, title: str = "", highlight: int | None = 0):
    """One bar panel per metric (``metrics`` maps a panel title to one value per label), side by
    side, each bar labelled with its value; bar ``highlight`` (the baseline) is drawn in grey."""
    n = len(metrics)
    fig, axes = plt.subplots(1, n, figsize=(min(3.2 * n, 9.5), 3.6), layout="constrained", squeeze=False)
    idx = np.arange(len(labels))
    for ax, (name, values) in zip(axes[0], metrics.items()):
        v = np.asarray(values, dtype=float)
        colors = [("#999999" if i == highlight else PALETTE[i % len(PALETTE)]) for i in idx]
        ax.bar(idx, v, 0.7, color=colors)
        for i, x in enumerate(v):
            ax.annotate(f"{x:.3g}", (i, x), xytext=(0, 2), textcoords="offset points", ha="center", fontsize=8)
        ax.set_xticks(idx, labels, rotation=35, ha="right", fontsize=8)
        ax.set_title(name, fontsize=9)
        ax.set_ylim(0, np.nanmax(v) * 1.15)
        ax.grid(False, axis="x")
    if title:
        fig.suptitle(title)
    return fig



# --- accuracy (book) -------------------------------------------------------

_KIND_MARKER = {"estimate": "o", "lower": "v", "upper": "^"}
_KIND_LABEL = {"estimate": "estimate", "lower": "lower bound", "upper": "upper bound"}


def _accepted(outcome) -> tuple[float, float]:
    """The interval of predictions a case accepts (see :mod:`mlsysim.validation`)."""
    c = outcome.case
    if c.kind == "estimate":
        return c.published * (1 - c.tolerance), c.published * (1 + c.tolerance)
    if c.direction == "lower":
        return c.published * (1 - c.tolerance), c.published
    return c.published, c.published / (1 - c.tolerance)


def _kind(outcome) -> str:
    return outcome.case.direction if outcome.case.kind == "bound" else "estimate"


def _points(ax, xs, ys, outcomes) -> None:
    """Markers by kind (circle, down or up triangle); failed cases in red."""
    for kind, marker in _KIND_MARKER.items():
        for passed, color in ((True, PALETTE[0]), (False, PALETTE[1])):
            sel = np.array([_kind(o) == kind and o.passed == passed for o in outcomes])
            if sel.any():
                ax.plot(np.asarray(xs)[sel], np.asarray(ys)[sel], marker, ms=6, color=color, zorder=3,
                        label=_KIND_LABEL[kind] + ("" if passed else ", failed"))


def _legend(fig, axes) -> None:
    handles = {h.get_label(): h for ax in axes for h in ax.get_lines() if not h.get_label().startswith("_")}
    fig.legend(handles.values(), handles.keys(), loc="outside upper center", ncol=len(handles), fontsize=8)


def accuracy_parity(outcomes, cols: int = 3):
    """Predicted against published, log–log, one panel per validation area.

    Circles are estimates, triangles bounds (▽ a lower bound must sit on or below the
    diagonal, △ an upper bound on or above it); the grey bar through each point is the
    range of predictions its case accepts. Failed cases are drawn in red.
    """
    areas = list(dict.fromkeys(o.case.area for o in outcomes))
    cols = max(1, min(cols, len(areas)))
    rows = -(-len(areas) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(7.5, 2.6 * rows + 0.7), layout="constrained", squeeze=False)
    for ax, area in zip(axes.flat, areas):
        mine = [o for o in outcomes if o.case.area == area]
        pub = np.array([o.case.published for o in mine])
        pred = np.array([o.predicted for o in mine])
        lo, hi = np.array([_accepted(o) for o in mine]).T
        ax.vlines(pub, lo, hi, color="#bbbbbb", lw=3, zorder=1)
        _points(ax, pub, pred, mine)
        span = np.array([min(pub.min(), pred.min(), lo.min()) / 2, max(pub.max(), pred.max(), hi.max()) * 2])
        ax.plot(span, span, color="#7f7f7f", lw=1, ls="--", zorder=0)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(span)
        ax.set_ylim(span)
        ax.set_title(f"{area} ({len(mine)} cases)", fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in axes.flat[len(areas):]:
        ax.set_visible(False)
    fig.supxlabel("published (unit of each case)", fontsize=9)
    fig.supylabel("predicted", fontsize=9)
    _legend(fig, axes.flat)
    return fig


def accuracy_ratios(outcomes):
    """Predicted / published for every case on one log axis, grouped by area, with accepted ranges."""
    fig, ax = _figure(size=(7.5, 3.8))
    x, centres = 0, {}
    for area in dict.fromkeys(o.case.area for o in outcomes):
        mine = [o for o in outcomes if o.case.area == area]
        xs = x + np.arange(len(mine))
        bars = np.array([_accepted(o) for o in mine]) / np.array([[o.case.published] for o in mine])
        ax.vlines(xs, bars[:, 0], bars[:, 1], color="#bbbbbb", lw=3, zorder=1)
        _points(ax, xs, [o.ratio for o in mine], mine)
        centres[area] = xs.mean()
        if x:
            ax.axvline(x - 1.5, color="#dddddd", lw=1)
        x += len(mine) + 2
    ax.axhline(1.0, color="#7f7f7f", lw=1, ls="--")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xticks(list(centres.values()), list(centres.keys()), fontsize=8, rotation=30, ha="right")
    ax.grid(False, axis="x")
    ax.set_xlim(-2, x - 1)
    ax.set_ylabel("predicted / published")
    _legend(fig, [ax])
    return fig


# --- checkpoint lab (06a) ------------------------------------------------------
def lab_stalls(runs=(), model=None, ax=None, title: str | None = None):
    """Training stall per checkpoint against the compute time between checkpoints, sync vs
    concurrent: measured runs as markers (:class:`~mlsysim.lab.experiment.LabRun` records)
    and the model as lines (``model``: a tuple of arrays ``(interval_s, sync_s, concurrent_s)``)."""
    fig, ax = _figure(ax, size=(7.5, 4.2))
    colours = {"sync": PALETTE[1], "concurrent": PALETTE[0]}
    if model is not None:
        tau, sync, conc = (np.asarray(v, dtype=float) for v in model)
        ax.plot(tau, sync, color=colours["sync"], lw=2, label="sync, model")
        ax.plot(tau, conc, color=colours["concurrent"], lw=2, label="concurrent, model")
    for engine in ("sync", "concurrent"):
        mine = [r for r in runs if r.engine == engine]
        if mine:
            ax.plot([r.every * r.step_s for r in mine], [r.stall_s for r in mine], "o", ms=7,
                    color=colours[engine], markeredgecolor="black", label=f"{engine}, measured")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("compute between checkpoints (s)")
    ax.set_ylabel("training stall per checkpoint (s)")
    ax.set_title(title or "Checkpoint stall: sync vs concurrent engine")
    ax.legend(fontsize=8)
    return fig


ENGINE_LABELS = {"torch.save": "torch.save", "torch.save+fsync": "torch.save\n+ fsync", "dcp": "DCP save",
                 "dcp-async": "DCP\nasync_save", "sync": "sync\n(this package)",
                 "concurrent": "concurrent\n(this package)", "pipelined": "pipelined\n(this package)"}


def lab_engines(result, ax=None, title: str | None = None):
    """Stall and time to durable per checkpoint engine as grouped bars (log scale), with the
    machine's copy floor and write + fsync floor as horizontal lines.

    ``result``: a run of :func:`mlsysim.lab.pytorch.compare.compare`, its ``to_dict()`` (such as
    :func:`mlsysim.lab.pytorch.results.recorded`) or :func:`mlsysim.lab.pytorch.results.predicted`.
    An engine whose checkpoint never becomes durable (``durable_s`` None or NaN: plain
    ``torch.save``) gets a hatched, empty bar marked "never" instead of a durable bar. Where the run
    holds each checkpoint's stall in the training runs (``training_stall_s``), a marker shows it
    on the stall bar: the pipelined copy hides behind a forward and backward pass only there."""
    d = result.to_dict() if hasattr(result, "to_dict") else result
    runs = d["engines"]
    fig, ax = _figure(ax, size=(8.5, 5.2))
    idx = np.arange(len(runs))
    width = 0.38
    stall = np.array([r["stall_s"] for r in runs], dtype=float)
    durable = np.array([np.nan if r["durable_s"] is None else r["durable_s"] for r in runs], dtype=float)
    ax.bar(idx - width / 2, stall, width, color=PALETTE[0], label="training blocked (stall)")
    ax.bar(idx + width / 2, np.where(np.isnan(durable), 0.0, durable), width, color=PALETTE[4],
           label="durable after")
    copy_s, write_s = d["copy_floor_s"], d["write_floor_s"]
    ax.axhline(copy_s, color=PALETTE[2], ls="--", lw=1.5, label=f"copy floor ({fmt(copy_s, 's')})")
    ax.axhline(write_s, color=PALETTE[1], ls="--", lw=1.5, label=f"write + fsync floor ({fmt(write_s, 's')})")
    ax.set_yscale("log")
    training = np.array([np.nan if r.get("training_stall_s") is None else r["training_stall_s"] for r in runs],
                        dtype=float)
    shown = ~np.isnan(training) & (training > 0)
    if shown.any():
        ax.plot(idx[shown] - width / 2, training[shown], "D", color="black", ms=5, label="stall in training")
    values = np.concatenate([stall, durable[~np.isnan(durable)], training[shown], [copy_s, write_s]])
    lo, hi = values.min() / 3, values.max() * 2.5
    ax.set_ylim(lo, hi)
    for i in np.flatnonzero(np.isnan(durable)):
        ax.bar(idx[i] + width / 2, hi - lo, width, bottom=lo, fill=False, hatch="//", edgecolor=PALETTE[1], lw=0)
        ax.text(idx[i] + width / 2, np.sqrt(lo * hi), "never", rotation=90, ha="center", va="center",
                color=PALETTE[1], fontweight="bold", fontsize=10,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
    ax.set_xticks(idx, [ENGINE_LABELS.get(r["engine"], r["engine"]) for r in runs], fontsize=8)
    ax.set_ylabel("seconds per checkpoint (log)")
    ax.set_title(title or f"Checkpointing {fmt(d['size_B'], 'B')} of training state")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    return fig


# --- distributed checkpoint lab (06c) -----------------------------------------
def lab_dist_bytes(world, rank_B: dict, restore_s: dict | None = None, measured: dict | None = None,
                   mark=None, title: str | None = None):
    """Bytes the busiest rank writes per checkpoint against the world size (log-log), one line per
    sharding mode (e.g. FSDP/ZeRO-3 against DDP), and, with ``restore_s``, the restore time in a
    second panel.

    ``world``: world sizes (ranks); ``rank_B`` and ``restore_s`` map a label to values over
    ``world`` (NaN where a layout is infeasible: left out); ``measured`` maps a label to
    ``(world sizes, bytes)`` drawn as markers on the bytes panel (e.g. a run's shard files);
    ``mark``: a world size marked with a dotted line. The restore panel's title describes
    :func:`mlsysim.checkpoint`'s restore (one read per data-parallel group, then a broadcast)."""
    if restore_s:
        fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 4.2), layout="constrained")
    else:
        fig, left = _figure(size=(7.5, 4.2))
        right = None
    x = np.asarray(world, dtype=float)
    for i, (label, y) in enumerate(rank_B.items()):
        left.plot(x, np.asarray(y, dtype=float), "-", lw=2, color=PALETTE[i % len(PALETTE)], label=label)
        if right is not None and label in restore_s:
            right.plot(x, np.asarray(restore_s[label], dtype=float), "-", lw=2, color=PALETTE[i % len(PALETTE)],
                       label=label)
    for j, (label, (xs, ys)) in enumerate((measured or {}).items()):
        left.plot(np.asarray(xs, dtype=float), np.asarray(ys, dtype=float), "o", ms=8,
                  color=PALETTE[(len(rank_B) + j) % len(PALETTE)], markeredgecolor="black", label=label)
    axes = [left] if right is None else [left, right]
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_yscale("log")
        ax.set_xlabel("world size (ranks)")
        if mark is not None:
            ax.axvline(float(mark), color="#7f7f7f", ls=":", lw=1.2)
        ax.legend(fontsize=8)
    for ax, unit in ((left, "B"), (right, "s")):
        if ax is not None:
            ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _, u=unit: fmt(v, u)))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    left.set_ylabel("bytes written by the busiest rank")
    if right is not None:
        right.set_ylabel("restore time (s)")
        right.set_title("restore: one read per group, then broadcast", fontsize=10)
    (fig.suptitle if right is not None else left.set_title)(title or "Busiest rank's checkpoint bytes")
    return fig


TIER_LABELS = {"memory": "own node's\nmemory", "peer-memory": "peer node's\nmemory", "storage": "durable\nstorage"}


def lab_recovery_tiers(runs: dict, predicted: dict | None = None, title: str | None = None):
    """Recovery time per tier (the node's own memory, a peer node's memory, durable storage): one
    panel per run, one bar per tier, each panel on its own scale.

    ``runs`` maps a panel's label (e.g. ``"live, 0.2 MB"``) to ``{tier: seconds}``; ``predicted``
    maps the same labels to ``{tier: seconds}`` drawn as black diamonds (the model's restore for
    this machine). A tier missing from a run is left out of its panel."""
    fig, axes = plt.subplots(1, len(runs), figsize=(2.9 * len(runs) + 0.8, 3.8), layout="constrained",
                             squeeze=False)
    for ax, (label, tiers) in zip(axes[0], runs.items()):
        names = [t for t in TIER_LABELS if t in tiers] + [t for t in tiers if t not in TIER_LABELS]
        idx = np.arange(len(names))
        y = np.array([tiers[t] for t in names], dtype=float)
        ax.bar(idx, y, 0.6, color=[PALETTE[list(TIER_LABELS).index(t) if t in TIER_LABELS else 3] for t in names])
        for i, v in enumerate(y):
            ax.text(i, v, fmt(v, "s"), ha="center", va="bottom", fontsize=8)
        model = (predicted or {}).get(label, {})
        pts = [(i, model[t]) for i, t in enumerate(names) if model.get(t) is not None]
        if pts:
            ax.plot(*zip(*pts), "D", color="black", ms=7, label="model")
            ax.legend(fontsize=8)
        ax.set_xticks(idx, [TIER_LABELS.get(t, t) for t in names], fontsize=8)
        ax.set_ylim(0, max([*y, *(v for _, v in pts)]) * 1.25)
        ax.set_title(label, fontsize=10)
    axes[0][0].set_ylabel("recovery (s), load to resumed")
    fig.suptitle(title or "Recovering a lost rank's or node's state, by where it comes from")
    return fig


def lab_restore_bytes(schemes: dict, predicted: dict | None = None, file_B: float | None = None,
                      title: str | None = None):
    """Bytes read per rank by restore scheme (every rank reads the replicated file, each owner reads
    its shard, one rank reads and broadcasts): grouped bars, one group per scheme, one bar per rank.

    ``schemes`` maps a scheme to its bytes read per rank; ``predicted`` maps a scheme to the
    model's bytes per rank, drawn as black diamonds; ``file_B``: the checkpoint's size, a dashed
    line (the bytes one reader of the whole checkpoint reads)."""
    fig, ax = _figure(size=(7.5, 4.3))
    names = list(schemes)
    ranks = max(len(v) for v in schemes.values())
    width = 0.8 / ranks
    idx = np.arange(len(names))
    for r in range(ranks):
        x = idx - 0.4 + width * (r + 0.5)
        y = np.array([schemes[s][r] if r < len(schemes[s]) else np.nan for s in names], dtype=float)
        ax.bar(x, y, width, color=PALETTE[r % len(PALETTE)], label=f"rank {r}")
        if predicted:
            p = np.array([predicted[s][r] if s in predicted and r < len(predicted[s]) else np.nan for s in names],
                         dtype=float)
            ax.plot(x, p, "D", color="black", ms=6, label="model" if r == 0 else None)
    if file_B is not None:
        ax.axhline(file_B, color="#7f7f7f", ls="--", lw=1.2, label=f"checkpoint ({fmt(file_B, 'B')})")
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: fmt(v, "B") if v else "0"))
    ax.set_xticks(idx, names)
    ax.set_ylabel("bytes read from storage")
    ax.set_title(title or "Who reads the checkpoint: bytes read per rank")
    ax.legend(fontsize=8)
    return fig
