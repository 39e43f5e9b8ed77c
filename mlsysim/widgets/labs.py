"""Explorers of the labs' models (notebooks 06a, 06b, 06c): checkpoint, PyTorch and distributed checkpoint labs."""
from __future__ import annotations

import ipywidgets as W
import numpy as np

from .. import plots
from ..errors import MlsysimError
from ..units import fmt
from ._common import Explorer, _log_slider
from .many_devices import CHECKPOINT_LAYOUTS


def _decade_slider(value, lo, hi, label):
    """A logarithmic slider from 10**lo to 10**hi, in steps of 0.05 decade."""
    return W.FloatLogSlider(value=value, base=10, min=lo, max=hi, step=0.05, description=label,
                            readout_format=".3g", style={"description_width": "9em"})


# --- checkpoint lab (06a) -------------------------------------------------------
def lab_checkpoint_explorer(size_GB: float = 1.0, copy_GBps: float = 10.0, write_GBps: float = 1.0,
                            read_GBps: float = 2.0, interval_s: float = 2.0) -> Explorer:
    """Explore the checkpoint lab's model: state size, memory copy and disk rates, interval →
    sync and concurrent stall per checkpoint and the share of time they cost (no run needed)."""
    from ..lab.predict import machine_from, predict
    controls = {"size_GB": _decade_slider(size_GB, -2, 2, "state (GB)"),
                "copy_GBps": _decade_slider(copy_GBps, 0, 2, "memory copy (GB/s)"),
                "write_GBps": _decade_slider(write_GBps, -1, 1.5, "disk write (GB/s)"),
                "read_GBps": _decade_slider(read_GBps, -1, 1.5, "disk read (GB/s)"),
                "interval_s": _decade_slider(interval_s, -1, 3, "interval (s)")}

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
    from ..lab.pytorch.results import predicted
    controls = {"size_GB": _decade_slider(size_GB, -2, 2.5, "state (GB)"),
                "copy_GBps": _decade_slider(copy_GBps, 0, 2, "memory copy (GB/s)"),
                "write_GBps": _decade_slider(write_GBps, -1, 1.5, "write + fsync (GB/s)"),
                "host_memory_GB": _decade_slider(host_memory_GB, 0, 3.5, "host memory (GB)")}

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
    from ..checkpoint import STRATEGIES, checkpoint, storage_tiers

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
        kw = dict(tp=tp, pp=pp, storage=storage, strategy=strategy,
                  step_s=1.0)   # the pipelined copy's window: it changes neither the bytes nor the restore
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
    from ..registry import node as _node
    return _node(node).accelerators
