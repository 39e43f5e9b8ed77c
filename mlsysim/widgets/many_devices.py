"""Explorers for many devices (notebook 06): parallel layouts, scaling, reliability and checkpointing."""
from __future__ import annotations

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np

from .. import plots
from ..errors import MlsysimError
from ..registry import zoo
from ..units import fmt
from ._common import Explorer, _dropdown, _log_slider


# --- distributed training (06) ---------------------------------------------
def parallel_explorer(model: str = "Llama-3-70B", node: str = "DGX-H100", nodes: int = 128,
                      global_batch: int = 1024, seq_len: int = 4096, tp: int = 8, pp: int = 4,
                      microbatch: int = 1, interleave: int = 1, zero_stage: int = 1,
                      recompute: str = "none", overlap: float = 1.0) -> Explorer:
    """Explore :func:`mlsysim.train_step` over tp, pp, dp (through the node count), the
    micro-batch size (hence the number of micro-batches), interleaving, ZeRO and recomputation."""
    from ..parallel import train_step
    from ..registry import cluster
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
    from ..parallel import best_parallelism
    from ..registry import cluster
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
                        storage: str = "lustre", step_s: float = 1.0) -> Explorer:
    """Explore :func:`mlsysim.checkpoint`: interval, strategy, storage bandwidth (read and
    write, aggregate for a file system), cluster size (nodes of ``node``) and the forward and
    backward seconds per step that the pipelined strategy's snapshot copy overlaps.

    The figure shows goodput against the interval for the chosen strategy, with the current
    interval and Daly's optimum marked; an infeasible choice (an interval shorter than the
    persist) shows the reason instead of numbers.
    """
    from ..checkpoint import STRATEGIES, checkpoint

    style = {"description_width": "8em"}
    controls = {
        "model": W.Dropdown(options=list(CHECKPOINT_LAYOUTS), value=model, description="model", style=style),
        "strategy": W.Dropdown(options=list(STRATEGIES), value=strategy, description="strategy", style=style),
        "interval_min": W.FloatLogSlider(value=interval_min, base=10, min=-1, max=2.5, step=0.05,
                                         description="interval (min)", readout_format=".3g", style=style),
        "storage_GBps": W.FloatLogSlider(value=storage_GBps, base=10, min=0, max=4, step=0.05,
                                         description="storage GB/s", readout_format=".4g", style=style),
        "nodes": _log_slider("nodes", nodes, 2, 12),
        "step_s": W.FloatLogSlider(value=step_s, base=10, min=-2, max=1, step=0.05,
                                   description="fwd+bwd (s)", readout_format=".3g", style=style),
    }

    last = {}

    def compute(model, strategy, interval_min, storage_GBps, nodes, step_s):
        tp, pp = CHECKPOINT_LAYOUTS[model]
        last.update(model=model, cluster=node, strategy=strategy, tp=tp, pp=pp, nodes=int(nodes),
                    storage=storage, storage_Bps=storage_GBps * 1e9, read_Bps=storage_GBps * 1e9, step_s=step_s)
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
