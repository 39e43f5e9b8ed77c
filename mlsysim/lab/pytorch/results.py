"""The PyTorch comparison's results, read without PyTorch.

:mod:`mlsysim.lab.pytorch.compare` runs every engine on one training state and needs the torch
extra; what a reader looks at afterwards does not. This module (no torch import) holds:

* :func:`recorded` — the full-size run stored with the package
  (``lab/pytorch/data/benchmark.json``, written by ``benchmarks/bench_lab_torch.py --record``);
* :func:`targets` — the benchmark's targets checked on a run (a :class:`Comparison` or its
  ``to_dict()``);
* :func:`predicted` — what :func:`mlsysim.checkpoint` predicts for each engine on a machine of
  given rates, in the same schema as a run, so that a figure or an explorer shows a what-if
  machine exactly as it shows a measured run.
* :func:`model_table` — every figure beside the model's prediction, and how sure the measurement is:
  :func:`within_bound`, :func:`standard_error`, :func:`consistent` (the distributed lab's table uses them too).

Engine classes (as :func:`~mlsysim.lab.pytorch.compare.compare` pairs them with the model):
the engines that block until durable (``torch.save+fsync``, ``dcp``, ``sync``) stall for the
copy and the write, d + W; the engines that snapshot and persist in the background
(``dcp-async``, ``concurrent``) stall for the copy d, and are durable after d + W;
``torch.save`` as usually called never makes its file durable (no ``fsync``).
"""
from __future__ import annotations

import json
import math
import statistics
from importlib.resources import files

from ...errors import MlsysimError
from ..floors import Floors
from ..predict import machine_from, predict

# the engines of the comparison (and of its recorded run): PyTorch's four, then this package's two
ENGINES = ("torch.save", "torch.save+fsync", "dcp", "dcp-async", "sync", "concurrent")
ASYNC = ("dcp-async", "concurrent", "pipelined")   # snapshot, then persist in the background
NEVER_DURABLE = ("torch.save",)


def recorded() -> dict:
    """The full-size run stored with the package: date, command, floors and every engine's numbers
    (schema ``mlsysim.lab.torch-compare/1``, see :meth:`mlsysim.lab.pytorch.compare.Comparison.to_dict`)."""
    return json.loads(files(__package__).joinpath("data/benchmark.json").read_text(encoding="utf-8"))


def targets(result) -> list[tuple[str, bool, str]]:
    """The benchmark's targets as (name, met, the numbers), for a run or its ``to_dict()``."""
    d = result.to_dict() if hasattr(result, "to_dict") else result
    e = {r["engine"]: r for r in d["engines"]}
    copy, write = d["copy_floor_s"], d["write_floor_s"]
    conc, dcp_async, sync, tsave = e["concurrent"], e["dcp-async"], e["sync"], e["torch.save+fsync"]
    return [
        ("concurrent stall <= 1/2 of dcp.async_save's", conc["stall_s"] <= 0.5 * dcp_async["stall_s"],
         f"{conc['stall_s']:.3f} s vs {dcp_async['stall_s']:.3f} s"),
        ("concurrent stall <= 2 x the copy floor", conc["stall_s"] <= 2 * copy,
         f"{conc['stall_s']:.3f} s vs {copy:.3f} s"),
        ("sync durable <= torch.save + fsync", sync["durable_s"] <= tsave["durable_s"],
         f"{sync['durable_s']:.3f} s vs {tsave['durable_s']:.3f} s"),
        ("sync durable <= 1.3 x the write + fsync floor", sync["durable_s"] <= 1.3 * write,
         f"{sync['durable_s']:.3f} s vs {write:.3f} s"),
        ("load_latest <= 1.2 x torch.load", sync["load_s"] <= 1.2 * e["torch.save"]["load_s"],
         f"{sync['load_s']:.3f} s vs {e['torch.save']['load_s']:.3f} s"),
    ] + _pipelined_targets(e, copy)


def _pipelined_targets(e: dict, copy: float) -> list:
    """The pipelined engine's, where the run has it (and the overhead runs): in training, its stall at
    most a quarter of the copy floor, and its overhead per checkpoint at most the concurrent engine's."""
    pipe, conc = e.get("pipelined"), e["concurrent"]
    if pipe is None or pipe.get("training_stall_s") is None or conc.get("overhead_s") is None:
        return []
    return [("pipelined stall in training <= 1/4 of the copy floor", pipe["training_stall_s"] <= 0.25 * copy,
             f"{pipe['training_stall_s']:.3f} s vs {copy:.3f} s"),
            ("pipelined overhead <= concurrent's", pipe["overhead_s"] <= conc["overhead_s"],
             f"{pipe['overhead_s']:.3f} s vs {conc['overhead_s']:.3f} s")]


def predicted(size_B: float, copy_Bps: float, write_Bps: float, read_Bps: float | None = None,
              host_memory_B: float = 16e9) -> dict:
    """The model's stall, durable and load time for each engine on a machine of these rates, and the
    floors, as a dict of the recorded run's schema (``durable_s`` None where never durable).

    Rates in bytes per second; ``read_Bps`` defaults to ``write_Bps``; a snapshot must fit in
    ``host_memory_B`` (else :class:`~mlsysim.errors.InfeasibleError`). A single checkpoint (no
    back-pressure): blocking engines stall d + W, background ones d; durable after d + W; the
    overhead per checkpoint is taken to be the stall (the naive model: nothing beside the save
    slows training).

    >>> d = predicted(1.2e9, copy_Bps=20e9, write_Bps=1.5e9, read_Bps=3e9)
    >>> round(d["copy_floor_s"], 3), round(d["write_floor_s"], 3)
    (0.06, 0.8)
    >>> e = {r["engine"]: r for r in d["engines"]}
    >>> round(e["sync"]["stall_s"], 3), round(e["concurrent"]["stall_s"], 3), round(e["concurrent"]["durable_s"], 3)
    (0.86, 0.06, 0.86)
    >>> e["torch.save"]["durable_s"] is None
    True
    """
    read_Bps = write_Bps if read_Bps is None else read_Bps
    m = machine_from(copy_Bps, write_Bps, read_Bps, host_memory_B=host_memory_B)
    p = predict(size_B, m, interval_s=1e6)
    floors = Floors(size_B=float(size_B), copy_Bps=copy_Bps, write_Bps=write_Bps, read_cold_Bps=read_Bps,
                    read_warm_Bps=read_Bps)
    engines = [{"engine": e, "size_B": p.size_B,
                "stall_s": p.concurrent_stall_s if e in ASYNC else p.sync_stall_s,
                "durable_s": None if e in NEVER_DURABLE else p.copy_s + p.write_s,
                "durable": e not in NEVER_DURABLE, "load_s": p.restore_s,
                "overhead_s": p.concurrent_stall_s if e in ASYNC else p.sync_stall_s} for e in ENGINES]
    return {"schema": "mlsysim.lab.torch-compare/1", "size_B": float(size_B), "floors": floors.to_dict(),
            "copy_floor_s": floors.copy_floor_s, "write_floor_s": floors.write_floor_s, "engines": engines,
            "predicted_by": "mlsysim.checkpoint"}


FIGURES = ("stall_s", "durable_s", "load_s", "training_stall_s", "overhead_s")
SAMPLES = {"stall_s": "stalls_s", "durable_s": "durables_s", "load_s": "loads_s",    # each figure the median of
           "training_stall_s": "training_stalls_s", "overhead_s": "overheads_s"}   # these, one per round


def within_bound(measured: float, predicted: float) -> bool:
    """Whether a prediction holds: within ±25 % of the measurement, or within a factor of 1.5 either
    way where the measurement is under 0.1 s (timer and scheduler noise are a larger share there).

    >>> within_bound(1.2, 1.0), within_bound(0.7, 1.0), within_bound(0.05, 0.07), within_bound(0.02, 0.04)
    (True, False, True, False)
    """
    if measured < 0.1:
        return predicted / 1.5 <= measured <= predicted * 1.5
    return abs(predicted / measured - 1.0) <= 0.25


def standard_error(samples, statistic: str = "mean") -> float | None:
    """The standard error of a figure computed from ``samples``: of their ``"mean"``, s / sqrt(n) (s the
    samples' standard deviation), or of their ``"median"``, sqrt(pi / 2) s / sqrt(n) (the large-sample
    factor for normally spread samples); None for fewer than three samples.

    >>> round(standard_error([1.0, 2.0, 3.0]), 4), round(standard_error([1.0, 2.0, 3.0], "median"), 4)
    (0.5774, 0.7236)
    """
    if statistic not in ("mean", "median"):
        raise MlsysimError(f"statistic must be 'mean' or 'median', got {statistic!r}")
    xs = [float(x) for x in samples or ()]
    if len(xs) < 3:
        return None
    se = statistics.stdev(xs) / math.sqrt(len(xs))
    return se * math.sqrt(math.pi / 2) if statistic == "median" else se


def consistent(measured: float, predicted: float, se: float | None, k: float = 2.0) -> bool:
    """Whether a prediction holds (:func:`~mlsysim.lab.pytorch.results.within_bound`) for some value
    within ``k`` standard errors ``se`` of the measurement: the measurement, as sure as it is, does not
    refute the prediction at the bound. Without ``se`` (one sample), whether it holds for the measurement.

    >>> consistent(1.5, 1.0, None), consistent(1.5, 1.0, 0.1), consistent(1.5, 1.0, 0.05)
    (False, True, False)
    """
    lo, hi = (measured, measured) if se is None else (measured - k * se, measured + k * se)
    edges = (predicted / 1.25, predicted / 0.75, predicted / 1.5, predicted * 1.5, 0.1, math.nextafter(0.1, 0.0))
    return any(within_bound(x, predicted) for x in [measured, lo, hi] + [e for e in edges if lo <= e <= hi] if x > 0)


def model_table(result) -> list[dict]:
    """Every measured figure of a run beside its two predictions: one row per engine and figure
    (:data:`FIGURES`) with ``measured``, ``first`` (:func:`mlsysim.checkpoint`'s, where it has one: it
    predicts no overhead and no stall in training), ``model`` (the refined one) and whether each holds
    (:func:`within_bound`); ``standard error``, the measurement's (:func:`standard_error` of the median over
    its rounds: ``stalls_s``, ``durables_s``, ``loads_s``, ``training_stalls_s``, ``overheads_s``; None for
    fewer than three) and ``consistent``: whether the model holds for some value within two standard errors
    of the measurement (:func:`consistent`). A run recorded before the refined model (no ``model``) gives no
    rows."""
    d = result.to_dict() if hasattr(result, "to_dict") else result
    rows = []
    for r in d["engines"]:
        model, first = r.get("model") or {}, r.get("predicted") or {}
        for fig in FIGURES:
            m, p = r.get(fig), model.get(fig)
            if m is None or p is None:
                continue
            q = first.get(fig)
            se = standard_error(r.get(SAMPLES[fig]), "median")
            rows.append({"engine": r["engine"], "figure": fig, "measured": m, "first": q, "model": p,
                         "model / measured": p / m if m else float("inf"), "holds": within_bound(m, p),
                         "first holds": None if q is None else within_bound(m, q),
                         "standard error": se, "consistent": consistent(m, p, se)})
    return rows

