"""A full-stack audit of one training run: every wall, composed from the other solvers.

The audit never re-derives physics; it calls, in order,

1. :func:`~mlsysim.parallel.best_parallelism` — the fastest layout that fits in memory
   (its best step is a :func:`~mlsysim.parallel.train_step`: step time, MFU, exposed
   communication, pipeline bubble, memory per GPU), and the same search on a copy of the
   accelerator with unlimited memory, to see whether capacity forces a slower layout;
2. :func:`~mlsysim.datapipe.datapipe` — whether storage, CPUs or the host link can feed the
   accelerators at the rate the step consumes;
3. :func:`~mlsysim.checkpoint.checkpoint` for each strategy (or the one given) and
   :func:`~mlsysim.goodput.goodput` — the checkpoint plan, the cluster MTBF, the stall
   per checkpoint and the share of wall time lost to failures;
4. :func:`~mlsysim.sustainability.footprint` and :func:`~mlsysim.economics.tco` (and
   :func:`~mlsysim.economics.rental_usd` when a rental price is given) over the wall time.

**Token budget.** ``tokens="chinchilla"`` trains on D = 20·N tokens, the compute-optimal
ratio of Hoffmann et al. 2022 ("Training Compute-Optimal Large Language Models", Table 3:
about 20 tokens per parameter; their own 70B model saw 1.4T tokens).

**Wall clock.** The run takes S = ⌈D / (B·s)⌉ steps of B sequences of s tokens. A step that
the input pipeline cannot feed stretches to T_step / U (U: the accelerator's busy share in
:func:`~mlsysim.datapipe.datapipe`). Checkpoints stall δ every τ of training and failures
cost what Daly's model (Daly 2006) says, so with the goodput G (ETTR)

    T_wall = S · T_step / (U · G)

**Where the time goes** (the waterfall, every part in seconds and adding up to T_wall)::

    ideal        = S · F_model / (n · P)                 MFU = 100 % (F_model: the MFU FLOP count)
    efficiency   = S · (compute + optimizer) − ideal     kernels below peak, recomputation,
                                                         memory-bound kernels
    communication, bubble = S · (exposed comm, bubble)  of the step
    input        = S · T_step · (1/U − 1)
    checkpoint   = useful · δ / τ                        useful = S · T_step / U
    failures     = T_wall − useful · (τ + δ) / τ         lost work, restarts, restores

Assumptions: one synchronous job on dedicated nodes; the accelerators draw the training
power (``utilization="training"``) for the whole wall time, restarts included; the cluster
is owned for the run (its share of depreciation, maintenance, electricity), or rented at
``rental`` per GPU-hour. An audit is one configuration's report, so it takes scalars;
sweep by calling it in a loop (a few milliseconds per call) or call the vectorised solvers
it composes.

Worked number (tested): Llama-3-70B on 1.41T tokens (Chinchilla), 64 DGX H100 nodes on NDR
InfiniBand in Virginia, batch 512 × 8,192 tokens: 336,427 steps of 6.49 s (MFU 61.4 %) on
tp 4 × dp 128 with ZeRO-3, async checkpoints, goodput 99.8 %: 25.3 days, 110 tCO2e, and $562k
as the run's share of owning the cluster.
"""
from __future__ import annotations

import dataclasses
import html
import math
from dataclasses import dataclass

from .checkpoint import STRATEGIES, Checkpoint, checkpoint as _checkpoint
from .datapipe import DataPipe, datapipe
from .economics import TCO, rental_usd, tco
from .errors import InfeasibleError, MlsysimError, UnknownNameError, check_fraction, check_integer, \
    check_positive
from .goodput import Goodput, goodput as _goodput
from .parallel import SHAPE_AWARE, ParallelSearch, TrainStep, best_parallelism
from .registry import cluster as _cluster, grid as _grid, model as _model
from .reliability import RESTART_S
from .sustainability import Footprint, fmt_carbon, footprint
from .systems import Cluster
from .units import day, fmt
from .workloads import Transformer

#: Tokens per parameter of a compute-optimal run (Hoffmann et al. 2022, Table 3: ≈ 20).
CHINCHILLA_TOKENS_PER_PARAM = 20.0

#: Tokens per step when no global batch is given: 4M (2²² tokens), Llama 2's batch
#: (Touvron et al. 2023, §2.2); B = 2²² / seq_len sequences.
DEFAULT_BATCH_TOKENS = 2 ** 22

#: Version of the dictionary :meth:`Audit.to_dict` returns (and ``mlsysim audit --json`` prints).
SCHEMA = "mlsysim.audit/1"

#: Goodput a more elaborate checkpoint strategy (async over sync, pipelined over async, in-memory
#: over pipelined) must add before the audit picks it: 0.1 percentage point.
STRATEGY_MARGIN = 1e-3

DOMAINS = ("compute", "memory", "network", "bubble", "input", "storage", "reliability", "power-carbon", "cost")

#: Waterfall parts: (label in tables and figures, key in JSON).
PARTS = (("ideal at peak", "ideal_s"), ("achieved efficiency", "efficiency_s"),
         ("communication", "communication_s"), ("pipeline bubble", "bubble_s"),
         ("input stalls", "input_s"), ("checkpoint stalls", "checkpoint_s"),
         ("failures and restarts", "failures_s"))


def chinchilla_tokens(model, tokens_per_param: float = CHINCHILLA_TOKENS_PER_PARAM):
    """Compute-optimal training tokens of ``model``: D = 20·N (Hoffmann et al. 2022).

    >>> round(chinchilla_tokens("llama-3-70b") / 1e12, 2)   # Chinchilla itself: 70B on 1.4T
    1.41
    """
    check_positive("tokens_per_param", tokens_per_param)
    return tokens_per_param * _model(model).params


class AuditInfeasible(InfeasibleError):
    """An audit that cannot run: ``reason`` says why, ``fix`` what would make it run."""

    def __init__(self, reason: str, fix: str):
        self.reason, self.fix = reason, fix
        super().__init__(f"{reason} Suggested fix: {fix}")


# --- the report ------------------------------------------------------------------
@dataclass(frozen=True, repr=False)
class Audit:
    """Result of :func:`audit`: the component results and the wall-clock account.

    ``search``/``step`` (layout and step), ``data`` (input pipeline), ``checkpoint`` and
    ``goodput`` (checkpoint plan and failures), ``footprint`` and ``tco`` are the records of
    the solvers the audit called; ``waterfall`` maps each part of the wall time to seconds.
    """

    model: str
    cluster: str
    accelerator: str
    accelerators: int
    grid: str
    tokens: float
    tokens_basis: str
    steps: int
    global_batch: int
    seq_len: int
    search: ParallelSearch
    step: TrainStep
    unlimited_memory_step_s: float     # fastest layout if memory were unlimited
    unlimited_memory_layout: str
    data: DataPipe
    checkpoint: Checkpoint
    strategies: dict                   # strategy -> goodput, or the reason it is infeasible
    goodput: Goodput
    footprint: Footprint
    tco: TCO
    rental_usd: float | None
    wall_s: float
    waterfall: dict                    # label -> seconds, adding up to wall_s
    expect: dict = dataclasses.field(default_factory=dict)
    inputs: dict = dataclasses.field(default_factory=dict, compare=False)   # audit()'s arguments

    def what_if(self, nodes: int | None = None, **changes) -> "Audit":
        """The same audit with some arguments changed, e.g. ``what_if(grid="quebec")``,
        ``what_if(nodes=128)`` (the same node and fabric) or ``what_if(strategy="sync")``."""
        kw = {**self.inputs, **changes}
        if nodes is not None:
            kw["cluster"] = _cluster(kw["cluster"], nodes=nodes)
        return audit(kw.pop("model"), kw.pop("cluster"), **kw)

    # --- headline numbers ---
    @property
    def days(self) -> float:
        return self.wall_s / day

    @property
    def mfu(self) -> float:
        """MFU of the training step (``step.mfu``)."""
        return float(self.step.mfu)

    @property
    def effective_mfu(self) -> float:
        """Model FLOPs over the whole wall clock at peak: ideal time / wall time."""
        return self.waterfall["ideal at peak"] / self.wall_s

    @property
    def gpu_hours(self) -> float:
        return self.accelerators * self.wall_s / 3600.0

    @property
    def cost_usd(self) -> float:
        """Cost of the run: the rental when a price was given, else owning the cluster (TCO)."""
        return self.rental_usd if self.rental_usd is not None else float(self.tco.total_usd)

    @property
    def carbon_kg(self) -> float:
        """Operational plus embodied carbon, kgCO2e."""
        return float(self.footprint.total_kg)

    @property
    def layout(self) -> str:
        return _layout(self.step)

    def losses(self) -> dict:
        """The waterfall without the ideal time: what each wall adds, seconds."""
        return {k: v for k, v in self.waterfall.items() if k != "ideal at peak"}

    @property
    def largest_loss(self) -> str:
        return max(self.losses().items(), key=lambda kv: kv[1])[0]

    def metrics(self) -> dict:
        """Named scalar results (plain SI numbers, units in the names) for tables, JSON and
        the assertions of a scenario's ``expect``."""
        s, d, ck, g, f = self.step, self.data, self.checkpoint, self.goodput, self.footprint
        w = self.wall_s
        return {
            "days": self.days, "wall_s": w, "steps": float(self.steps), "tokens": float(self.tokens),
            "step_s": float(s.step_s), "mfu": self.mfu, "hfu": float(s.hfu), "effective_mfu": self.effective_mfu,
            "tokens_per_s": float(s.tokens_per_s) * float(d.utilization),
            "memory_per_gpu_B": float(s.memory_per_gpu_B), "memory_fraction": float(s.memory_per_gpu_B)
            / float(s.memory.capacity_B),
            "comm_fraction": self.waterfall["communication"] / w, "bubble_fraction": self.waterfall["pipeline bubble"] / w,
            "efficiency_fraction": self.waterfall["achieved efficiency"] / w,
            "input_stall_fraction": self.waterfall["input stalls"] / w,
            "checkpoint_stall_fraction": self.waterfall["checkpoint stalls"] / w,
            "failure_fraction": self.waterfall["failures and restarts"] / w,
            "goodput": float(g.ratio), "mtbf_s": float(g.mtbf_s), "failures": w / float(g.mtbf_s),
            "checkpoint_interval_s": float(g.interval_s), "checkpoint_stall_s": float(ck.stall_s),
            "checkpoint_B": float(ck.size_B), "gpu_hours": self.gpu_hours, "power_W": float(f.it_power_W) * float(f.pue),
            "energy_J": float(f.energy_kWh) * 3.6e6, "carbon_kg": self.carbon_kg,
            "operational_carbon_kg": float(f.operational_kg), "water_L": float(f.water_onsite_L),
            "cost_usd": self.cost_usd, "tco_usd": float(self.tco.total_usd),
            **({"rental_usd": self.rental_usd} if self.rental_usd is not None else {}),
        }

    # --- walls ---
    def walls(self) -> list[dict]:
        """One row per domain: the binding wall, the evidence, and its share of the wall clock."""
        s, d, ck, g, f, t = self.step, self.data, self.checkpoint, self.goodput, self.footprint, self.tco
        w, wf = self.wall_s, self.waterfall
        share = lambda label: fmt(wf[label] / w, "%", 2)  # noqa: E731
        peak = fmt(s.model_flops / s.step_s / s.mfu / s.accelerators, "FLOP/s")
        eta = ("shape-aware" if s.efficiency == SHAPE_AWARE else "given") + f" GEMM η = {float(s.gemm_efficiency):.2f}"
        rows = [("compute", f"kernels at {eta} of peak",
                 f"MFU {s.mfu:.1%} of {peak} per GPU", share("achieved efficiency"))]
        cap = float(s.memory.capacity_B)
        gain = 1.0 - self.unlimited_memory_step_s / float(s.step_s)
        used = f"{fmt(s.memory_per_gpu_B, 'B')} of {fmt(cap, 'B')} per GPU"
        if gain > 0.01:
            mem = (f"HBM capacity ({used})",
                   f"unlimited: {self.unlimited_memory_layout}, {gain:.0%} faster")
        else:
            mem = ("not binding", used)
        rows.append(("memory", *mem, "-"))
        comm = {k: v for k, v in s.parts().items() if k.endswith("comm")}
        top = max(comm, key=comm.get)
        where = "NVLink" if top in ("TP comm",) else self.search.best.cluster.split("(")[-1].rstrip(")")
        rows.append(("network", f"{top} ({where})" if comm[top] > 0 else "none exposed",
                     f"{s.comm_s / s.step_s:.1%} of the step exposed", share("communication")))
        rows.append(("bubble", f"pipeline fill and drain (pp {s.pp})" if s.pp > 1 else "no pipeline",
                     f"(p−1)/(v·m) = {s.bubble_fraction:.3g}, {s.microbatches} micro-batches",
                     share("pipeline bubble")))
        bound = d.bound
        rows.append(("input", "none: the accelerators bind" if bound == "accelerator" else f"{bound} stage",
                     f"{d.pipeline} from {d.storage}: GPUs busy {fmt(d.utilization, '%')}", share("input stalls")))
        persist = "storage write" if ck.strategy == "sync" else "GPU-to-host snapshot"
        rows.append(("storage", f"{persist} ({ck.strategy})",
                     f"{fmt(ck.size_B, 'B')} every {fmt(g.interval_s, 's')}, stall {fmt(ck.stall_s, 's')}",
                     share("checkpoint stalls")))
        rows.append(("reliability", f"cluster MTBF {fmt(g.mtbf_s, 's')}",
                     f"{w / g.mtbf_s:,.0f} failures, goodput {fmt(g.ratio, '%')}", share("failures and restarts")))
        op, emb = float(f.operational_kg), float(f.embodied_kg)
        rows.append(("power-carbon", f"grid at {f.carbon_g_per_kWh:.3g} g/kWh" if op >= emb
                     else "embodied carbon of the hardware",
                     f"{fmt(f.it_power_W * f.pue, 'W')}, {fmt(f.energy_kWh * 1e3, 'Wh')}, {fmt_carbon(self.carbon_kg)}",
                     "-"))
        parts = {"hardware (depreciation, support)": t.depreciation_usd + t.maintenance_usd,
                 "electricity": t.energy_usd, "carbon price": t.carbon_usd}
        big = max(parts, key=lambda k: float(parts[k]))
        cost = (f"owned: ${fmt(t.total_usd, '', 3)}, {float(parts[big]) / float(t.total_usd):.0%} of it"
                if self.rental_usd is None else
                f"rented: ${fmt(self.rental_usd, '', 3)} (owned ${fmt(t.total_usd, '', 3)})")
        rows.append(("cost", "GPU rental price" if self.rental_usd is not None else big, cost, "-"))
        return [dict(zip(("domain", "binding wall", "evidence", "time"), r)) for r in rows]

    # --- scenario assertions ---
    def check(self, expect: dict | None = None) -> list[dict]:
        """Evaluate assertions ``{metric: {min: x, max: y}}`` (default: this audit's ``expect``)."""
        return _check(self.metrics(), self.expect if expect is None else expect)

    @property
    def failed(self) -> list[str]:
        """Messages of the failed assertions of ``expect`` (empty when all hold)."""
        return [c["message"] for c in self.check() if not c["passed"]]

    # --- presentation ---
    def headline(self) -> list[tuple[str, str]]:
        s, g = self.step, self.goodput
        return [("run", f"{self.model}, {fmt(self.tokens)} tokens ({self.tokens_basis})"),
                ("cluster", f"{self.cluster}: {self.accelerators:,} × {self.accelerator}, {self.grid} grid"),
                ("layout", f"{self.layout}; batch {self.global_batch} × {self.seq_len:,} tokens"),
                ("step", f"{fmt(s.step_s, 's')}, MFU {s.mfu:.1%}; {self.steps:,} steps"),
                ("checkpoints", f"{self.checkpoint.strategy} to {self.checkpoint.storage}, every "
                                f"{fmt(g.interval_s, 's')}; goodput {fmt(g.ratio, '%')}"),
                ("wall clock", f"{self.days:.3g} days = {self.wall_s / self.waterfall['ideal at peak']:.2f} × "
                               f"ideal; largest loss: {self.largest_loss}"),
                ("footprint", f"{fmt(self.footprint.energy_kWh * 1e3, 'Wh')}, {fmt_carbon(self.carbon_kg)}, "
                              f"${fmt(self.cost_usd, '', 3)} ({'rented' if self.rental_usd is not None else 'owned'})")]

    def waterfall_rows(self) -> list[dict]:
        rows, total = [], 0.0
        for label, v in self.waterfall.items():
            total += v
            rows.append({"part": label, "adds": fmt(v / day, "", 3) + " d", "share": fmt(v / self.wall_s, "%", 2),
                         "running total": fmt(total / day, "", 3) + " d"})
        rows.append({"part": "wall clock", "adds": "", "share": "100 %",
                     "running total": fmt(self.wall_s / day, "", 3) + " d"})
        return rows

    def _expect_rows(self) -> list[dict]:
        return [{"assertion": c["assertion"], "value": f"{c['value']:.4g}", "result": "ok" if c["passed"] else "FAILED"}
                for c in self.check()]

    def __str__(self) -> str:
        from .tables import table
        w = max(len(k) for k, _ in self.headline())
        out = [f"{k:<{w}}  {v}" for k, v in self.headline()]
        out += ["", str(table(self.walls(), title="Walls by domain (time: share of the wall clock)")), "",
                str(table(self.waterfall_rows(), title="Where the time goes"))]
        if self.expect:
            out += ["", str(table(self._expect_rows(), title="Expectations"))]
        return "\n".join(out)

    def __repr__(self) -> str:
        return (f"Audit({self.model}, {self.accelerators:,} × {self.accelerator}: {self.days:.3g} d, "
                f"${fmt(self.cost_usd, '', 3)}, {fmt_carbon(self.carbon_kg)})")

    def _repr_html_(self) -> str:
        from .tables import table
        head = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                       for k, v in self.headline())
        parts = [f"<table>{head}</table>", table(self.walls(), title="Walls by domain "
                                                 "(time: share of the wall clock)")._repr_html_(),
                 table(self.waterfall_rows(), title="Where the time goes")._repr_html_()]
        if self.expect:
            parts.append(table(self._expect_rows(), title="Expectations")._repr_html_())
        return "".join(parts)

    def to_dict(self) -> dict:
        """The audit as plain JSON types (the stable schema of ``mlsysim audit --json``).

        Keys: ``schema`` ("mlsysim.audit/1"), ``feasible`` (true), ``model``, ``cluster``,
        ``accelerator``, ``accelerators``, ``grid``, ``tokens``, ``tokens_basis``, ``steps``,
        ``global_batch``, ``seq_len``; ``layout`` {tp, pp, dp, cp, ep, micro_batch, microbatches,
        interleave, zero_stage, recompute}; ``checkpoint`` {strategy, storage, size_B,
        interval_s, stall_s, write_s, restore_s}; ``input`` {pipeline, storage, bound,
        utilization}; ``metrics`` (:meth:`metrics`: SI numbers, units in the names);
        ``waterfall_s`` {ideal_s, efficiency_s, communication_s, bubble_s, input_s,
        checkpoint_s, failures_s, wall_s}; ``walls`` {domain: {wall, evidence}};
        ``largest_loss``; ``expect`` [{metric, min, max, value, passed, message}].
        An infeasible configuration gives {schema, feasible: false, reason, fix} instead.
        """
        s, ck, g, d = self.step, self.checkpoint, self.goodput, self.data
        keys = dict(PARTS)
        return {
            "schema": SCHEMA, "feasible": True, "model": self.model, "cluster": self.cluster,
            "accelerator": self.accelerator, "accelerators": self.accelerators, "grid": self.grid,
            "tokens": float(self.tokens), "tokens_basis": self.tokens_basis, "steps": self.steps,
            "global_batch": self.global_batch, "seq_len": self.seq_len,
            "layout": {"tp": int(s.tp), "pp": int(s.pp), "dp": int(s.dp), "cp": int(s.cp), "ep": int(s.ep),
                       "micro_batch": int(s.micro_batch), "microbatches": int(s.microbatches),
                       "interleave": int(s.interleave), "zero_stage": int(s.zero_stage), "recompute": s.recompute},
            "checkpoint": {"strategy": ck.strategy, "storage": ck.storage, "size_B": float(ck.size_B),
                           "interval_s": float(g.interval_s), "stall_s": float(ck.stall_s),
                           "write_s": float(ck.write_s), "restore_s": float(ck.restore_s)},
            "input": {"pipeline": d.pipeline, "storage": d.storage, "bound": d.bound,
                      "utilization": float(d.utilization)},
            "metrics": self.metrics(),
            "waterfall_s": {**{keys[k]: float(v) for k, v in self.waterfall.items()}, "wall_s": self.wall_s},
            "walls": {r["domain"]: {"wall": r["binding wall"], "evidence": r["evidence"]} for r in self.walls()},
            "largest_loss": self.largest_loss,
            "expect": [{k: c[k] for k in ("metric", "min", "max", "value", "passed", "message")}
                       for c in self.check()],
        }


def _layout(s: TrainStep) -> str:
    rc = {"none": "no recompute", "selective": "selective recompute", "full": "full recompute"}[s.recompute]
    parts = [f"tp {s.tp} × pp {s.pp} × dp {s.dp}"] + ([f"cp {s.cp}"] if s.cp > 1 else []) + \
        ([f"ep {s.ep}"] if s.ep > 1 else [])
    v = f", v {s.interleave}" if s.interleave > 1 else ""
    return " × ".join(parts) + f", micro-batch {s.micro_batch}{v}, ZeRO-{s.zero_stage}, {rc}"


# --- assertions ------------------------------------------------------------------
def _check(metrics: dict, expect: dict) -> list[dict]:
    if not isinstance(expect, dict):
        raise MlsysimError(f"expect must map metric names to {{min: x, max: y}}, got {expect!r}")
    out = []
    for name, rule in expect.items():
        if name not in metrics:
            raise UnknownNameError("metric in expect", name, metrics)
        if not isinstance(rule, dict) or not rule or set(rule) - {"min", "max"}:
            raise MlsysimError(f"expect.{name} must be a mapping with min and/or max, got {rule!r}")
        for k, v in rule.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise MlsysimError(f"expect.{name}.{k} must be a finite number, got {v!r}")
        value, lo, hi = metrics[name], rule.get("min"), rule.get("max")
        passed = (lo is None or value >= lo) and (hi is None or value <= hi)
        bounds = " and ".join(([f">= {lo:g}"] if lo is not None else []) + ([f"<= {hi:g}"] if hi is not None else []))
        message = f"{name} = {value:.4g} {'meets' if passed else 'breaks'} {name} {bounds}"
        out.append({"metric": name, "min": lo, "max": hi, "value": value, "passed": passed,
                    "assertion": f"{name} {bounds}", "message": message})
    return out


# --- the solver -------------------------------------------------------------------
def _candidates(value, name):
    """A layout constraint: None (the search's default), one value, or a sequence."""
    if value is None:
        return None
    vals = [value] if isinstance(value, (int, float, str, bytes)) else list(value)
    if not vals:
        raise MlsysimError(f"{name} must not be empty")
    if name != "recompute":
        check_integer(name, vals, minimum=0 if name == "zero_stage" else 1)
    return vals


def _tokens(m, tokens) -> tuple[float, str]:
    if isinstance(tokens, str):
        if tokens.strip().lower() != "chinchilla":
            raise UnknownNameError("token budget", tokens, ["chinchilla", "a number of tokens"])
        return chinchilla_tokens(m), f"Chinchilla: {CHINCHILLA_TOKENS_PER_PARAM:g} per parameter"
    if isinstance(tokens, bool) or not isinstance(tokens, (int, float)):
        raise MlsysimError(f"tokens must be a number or 'chinchilla' (an audit takes scalars), got {tokens!r}")
    check_positive("tokens", tokens)
    return float(tokens), "given"


def _unlimited(c: Cluster) -> Cluster:
    """The same cluster with accelerators whose memory never runs out (for the memory wall)."""
    hw = dataclasses.replace(c.accelerator, memory_B=1e30)
    return dataclasses.replace(c, node=dataclasses.replace(c.node, accelerator=hw))


def _run_size(m, tokens, seq_len, global_batch, efficiency, strategy) -> tuple[float, str, int]:
    """Check the run's scalar settings; its token budget, how it was set, and the global batch."""
    if not isinstance(m, Transformer):
        raise MlsysimError(f"audit models Transformer training; {m.name} is a {type(m).__name__}")
    D, basis = _tokens(m, tokens)
    check_integer("seq_len", seq_len)
    if global_batch is None:
        global_batch = max(1, DEFAULT_BATCH_TOKENS // seq_len)
    check_integer("global_batch", global_batch)
    if efficiency is not None:
        check_fraction("efficiency", efficiency)
    if strategy is not None and strategy not in STRATEGIES:
        raise UnknownNameError("checkpoint strategy", strategy, STRATEGIES)
    return D, basis, global_batch


def _layout_search(m, c: Cluster, global_batch, seq_len, search_kw, layout):
    """The layout search, its best step, and the best step if memory were unlimited."""
    try:
        search = best_parallelism(m, c, global_batch, seq_len, **search_kw)
    except InfeasibleError as e:
        raise AuditInfeasible(_reason(m, c, str(e)), _fix(m, c, global_batch, seq_len, search_kw, layout)) from None
    step = search.best
    free = best_parallelism(m, _unlimited(c), global_batch, seq_len, **search_kw).best
    return search, step, free


def _input_pipeline(m, c: Cluster, step, global_batch, seq_len, precision, pipeline, workers, storage):
    """The input pipeline of every GPU's loader, and the step time it allows."""
    n = c.accelerators
    data = datapipe(m, c.accelerator, batch=global_batch / n, pipeline=pipeline, workers=workers, storage=storage,
                    readers=n, seq_len=seq_len, precision=precision, accelerator_sps=global_batch / (step.step_s * n))
    return data, float(step.step_s) / float(data.utilization)


def _checkpoint_plan(m, c: Cluster, step, step_wall, strategy, optimizer, interval_s, precision, storage, restart_s,
                     node_failures_per_day):
    """The chosen checkpoint plan and its goodput, and each strategy's goodput or why it cannot run."""
    ck_kw = dict(optimizer=optimizer, interval_s=interval_s, tp=int(step.tp), pp=int(step.pp),
                 zero_stage=int(step.zero_stage), precision=precision, storage=storage, restart_s=restart_s,
                 node_failures_per_day=node_failures_per_day,
                 step_s=step_wall - float(step.optimizer_s))   # what a pipelined snapshot copy overlaps
    plans, strategies = {}, {}
    for name in ([strategy] if strategy else STRATEGIES):
        try:
            ck = _checkpoint(m, c, strategy=name, **ck_kw)
        except InfeasibleError as e:
            strategies[name] = str(e)
            continue
        plans[name] = (ck, _goodput(c, step_s=step_wall, checkpoint=ck, node_failures_per_day=node_failures_per_day))
        strategies[name] = float(plans[name][1].ratio)
    if not plans:
        why = "; ".join(f"{k}: {v}" for k, v in strategies.items())
        raise AuditInfeasible(f"no checkpoint strategy can run ({why}).",
                              "use more nodes (more host memory per shard), a longer interval_s, or "
                              "strategy 'sync'" if strategy != "sync" else "use more nodes or a faster storage tier")
    best = max(float(gp.ratio) for _, gp in plans.values())
    chosen = next(k for k in plans if plans[k][1].ratio >= best - STRATEGY_MARGIN)  # simplest near-best
    ck, gp = plans[chosen]
    return ck, gp, strategies


def _wall_clock(c: Cluster, D, global_batch, seq_len, precision, step, step_wall, gp):
    """Steps, wall time and the waterfall of where it goes (seconds, adding up to the wall time)."""
    steps = math.ceil(D / (global_batch * seq_len) - 1e-9)
    peak = c.accelerator.peak(precision)
    ideal = steps * float(step.model_flops) / (c.accelerators * peak)
    useful = steps * step_wall
    tau, delta = float(gp.interval_s), float(gp.stall_s)
    wall = useful / float(gp.ratio)
    waterfall = dict(zip((p[0] for p in PARTS), (
        ideal, steps * float(step.compute_s + step.optimizer_s) - ideal, steps * float(step.comm_s),
        steps * float(step.bubble_s), useful - steps * float(step.step_s), useful * delta / tau,
        wall - useful * (tau + delta) / tau)))
    return steps, wall, waterfall


def _footprint_and_cost(c: Cluster, g, wall, utilization, embodied_kg_per_node, carbon_price_usd_per_t,
                        node_price_usd, price_usd_per_kWh, rental):
    """Energy and carbon footprint, cost of owning the cluster, and the rental (or None) over the wall time."""
    hours = wall / 3600.0
    fp = footprint(c, hours=hours, grid=g, utilization=utilization, embodied_kg_per_node=embodied_kg_per_node)
    cost = tco(c, days=wall / day, grid=g, utilization=utilization, carbon_price_usd_per_t=carbon_price_usd_per_t,
               node_price_usd=node_price_usd, price_usd_per_kWh=price_usd_per_kWh)
    rent = None if rental is None else float(rental_usd(c.accelerators * hours, rental))
    return fp, cost, rent


def audit(model, cluster, tokens="chinchilla", grid="virginia", *, global_batch=None, seq_len=8192,
          precision: str = "bf16", efficiency=None, optimizer: str = "adam", tp=None, pp=None,
          zero_stage=None, recompute=None, interleave=None, micro_batch=None, strategy=None,
          storage="lustre", interval_s=None, restart_s=RESTART_S, pipeline="tokens", data_storage=None,
          workers=8, node_failures_per_day=None, utilization="training", carbon_price_usd_per_t=0.0,
          rental=None, node_price_usd=None, price_usd_per_kWh=None, embodied_kg_per_node=None,
          expect=None) -> Audit:
    """Audit a training run end to end (see the module docstring for what it composes).

    Parameters
    ----------
    model, cluster : names or records (a Transformer; a cluster preset or ``ms.cluster(...)``).
    tokens : training tokens, or "chinchilla" for 20 per parameter.
    grid : where the cluster runs (carbon intensity, PUE, electricity price).
    global_batch, seq_len : sequences per step and tokens per sequence; the default batch is
        4M tokens (:data:`DEFAULT_BATCH_TOKENS`).
    precision, efficiency, optimizer : as in :func:`~mlsysim.parallel.train_step`.
    tp, pp, zero_stage, recompute, interleave, micro_batch : constrain the layout search (one
        value or a sequence of candidates; None lets the search choose).
    strategy : checkpoint strategy ("sync", "async", "pipelined", "in-memory"; a pipelined snapshot
        overlaps the step's forward and backward time, its wall time less the optimizer's); None picks the simplest
        feasible one within :data:`STRATEGY_MARGIN` of the highest goodput. storage, interval_s, restart_s : as in
        :func:`~mlsysim.checkpoint.checkpoint` (default interval: Daly's optimum).
    pipeline, data_storage, workers : the input pipeline (:func:`~mlsysim.datapipe.datapipe`),
        read from ``data_storage`` (default: ``storage``) by every GPU's loader.
    node_failures_per_day : a measured failure rate replacing the component model.
    utilization, carbon_price_usd_per_t, embodied_kg_per_node : passed to
        :func:`~mlsysim.sustainability.footprint` and :func:`~mlsysim.economics.tco`.
    node_price_usd, price_usd_per_kWh : passed to :func:`~mlsysim.economics.tco`.
    rental : a cloud offer name or a price per GPU-hour: the run is rented instead of owned.
    expect : assertions ``{metric: {min: x, max: y}}`` on :meth:`Audit.metrics`.

    A configuration that cannot run (no layout fits in memory, no layout divides the batch,
    no checkpoint strategy fits in host memory) raises :class:`AuditInfeasible`, an
    :class:`~mlsysim.errors.InfeasibleError` whose message gives the reason and a fix.

    >>> import mlsysim as ms
    >>> a = ms.audit("llama-3-70b", ms.cluster("dgx-h100", nodes=64), grid="virginia", global_batch=512)
    >>> round(a.days, 1), round(a.mfu, 3), round(a.goodput.ratio, 3), a.checkpoint.strategy
    (25.3, 0.614, 0.998, 'async')
    >>> round(a.carbon_kg / 1e3), round(a.cost_usd / 1e3)      # tCO2e, k$ to own
    (110, 562)
    """
    inputs = {k: v for k, v in locals().items()}
    m, c, g = _model(model), _cluster(cluster), _grid(grid)
    D, basis, global_batch = _run_size(m, tokens, seq_len, global_batch, efficiency, strategy)
    layout = {k: _candidates(v, k) for k, v in dict(tp=tp, pp=pp, zero_stage=zero_stage, recompute=recompute,
                                                    interleave=interleave, micro_batch=micro_batch).items()}
    search_kw = dict(precision=precision, efficiency=efficiency, optimizer=optimizer,
                     **{k: v for k, v in layout.items() if v is not None})
    # 1. layout, step and the memory wall
    search, step, free = _layout_search(m, c, global_batch, seq_len, search_kw, layout)
    # 2. input pipeline: every GPU's loader must deliver its share of the step's sequences
    n = c.accelerators
    data, step_wall = _input_pipeline(m, c, step, global_batch, seq_len, precision, pipeline, workers,
                                      storage if data_storage is None else data_storage)
    # 3. checkpoint plan and failures
    ck, gp, strategies = _checkpoint_plan(m, c, step, step_wall, strategy, optimizer, interval_s, precision,
                                          storage, restart_s, node_failures_per_day)
    # 4. the wall-clock account
    steps, wall, waterfall = _wall_clock(c, D, global_batch, seq_len, precision, step, step_wall, gp)
    # 5. energy, carbon and cost over the wall clock
    fp, cost, rent = _footprint_and_cost(c, g, wall, utilization, embodied_kg_per_node, carbon_price_usd_per_t,
                                         node_price_usd, price_usd_per_kWh, rental)
    result = Audit(model=m.name, cluster=c.name, accelerator=c.accelerator.name, accelerators=n, grid=g.name,
                   tokens=D, tokens_basis=basis, steps=steps, global_batch=int(global_batch), seq_len=int(seq_len),
                   search=search, step=step, unlimited_memory_step_s=float(free.step_s),
                   unlimited_memory_layout=_layout(free).split(",")[0], data=data, checkpoint=ck,
                   strategies=strategies, goodput=gp, footprint=fp, tco=cost, rental_usd=rent, wall_s=wall,
                   waterfall=waterfall, expect=dict(expect or {}), inputs=inputs)
    result.check()  # bad assertions are errors now, not when printed
    return result


# --- infeasible: why, and what would fix it ---------------------------------------------
def _reason(m, c: Cluster, message: str) -> str:
    """One sentence from the search's InfeasibleError: what excluded every candidate layout."""
    import ast
    try:
        excluded = dict(ast.literal_eval(message.split(": ", 1)[1]))
    except (IndexError, ValueError, SyntaxError, TypeError):
        excluded = {}
    memory = sum(v for k, v in excluded.items() if k.startswith("does not fit"))
    others = sum(excluded.values()) - memory
    if "fits in the memory" in message:
        return (f"No layout of {m.name} fits in the {fmt(c.accelerator.memory_B, 'B')} of each of the "
                f"{c.accelerators:,} {c.accelerator.name}s: {memory:,} layouts need more memory per GPU "
                f"({others:,} more break the layout rules).")
    rules = "; ".join(f"{k} ({v:,})" for k, v in excluded.items()) or message
    return f"No layout of {m.name} on {c.accelerators:,} GPUs splits the batch of this run: {rules}."


def _fits(m, c, global_batch, seq_len, kw) -> object:
    try:
        return best_parallelism(m, c, global_batch, seq_len, top=1, **kw).best
    except InfeasibleError:
        return None


def _fix(m, c: Cluster, global_batch, seq_len, kw, layout) -> str:
    """The smallest change found that makes a layout fit: relax the caller's layout
    constraints, grow the cluster (2× to 64× the nodes, constraints kept, then relaxed),
    or round the batch up to a multiple of the GPU count."""
    given = [k for k, v in layout.items() if v is not None]
    free_kw = {k: v for k, v in kw.items() if k not in given}
    relax = f"let the search choose {', '.join(given)}" if given else ""
    for k in (1, 2, 4, 8, 16, 32, 64):
        bigger = c if k == 1 else _cluster(c, nodes=c.nodes * k)
        grow = "" if k == 1 else f"use {k}× the nodes ({bigger.nodes:,} nodes, {bigger.accelerators:,} GPUs)"
        for change, args in (([grow], kw), ([grow, relax], free_kw)):
            change = [x for x in change if x]
            if not change or (args is free_kw and not given):
                continue
            best = _fits(m, bigger, global_batch, seq_len, args)
            if best is not None:
                return (f"{' and '.join(change)}: {_layout(best)} fits "
                        f"({fmt(best.memory_per_gpu_B, 'B')} per GPU).")
    n = c.accelerators
    batch = -(-global_batch // n) * n
    for change, args in (([], kw), ([relax], free_kw)):
        if args is free_kw and not given:
            continue
        best = _fits(m, c, batch, seq_len, args)
        if best is not None:
            return " and ".join([f"a global batch of {batch} sequences (a multiple of the {n:,} GPUs)", *change]) \
                + f": {_layout(best)} fits."
    return f"an accelerator with more memory than {c.accelerator.name}, or a shorter seq_len."


# --- scenarios ----------------------------------------------------------------------------
_SCENARIO_TEXT = ("name", "description")


def audit_scenario(scenario) -> Audit:
    """Audit a scenario: a YAML file (path) or a dict holding :func:`audit`'s arguments.

    ``model`` and ``cluster`` are required; ``cluster`` is a preset name or a mapping
    ``{node: dgx-h100, nodes: 64, fabric: ib-ndr}``. ``expect`` holds assertions on
    :meth:`Audit.metrics`, e.g. ``{mfu: {min: 0.35}, days: {max: 90}}``; ``name`` and
    ``description`` are free text. An unknown key is an error.
    """
    spec = _read_scenario(scenario) if not isinstance(scenario, dict) else dict(scenario)
    for k in _SCENARIO_TEXT:
        spec.pop(k, None)
    known = _audit_keywords()
    unknown = [k for k in spec if k not in known]
    if unknown:
        raise UnknownNameError("scenario key", unknown[0], [*known, *_SCENARIO_TEXT])
    for k in ("model", "cluster"):
        if k not in spec:
            raise MlsysimError(f"the scenario needs a {k!r} entry")
    c = spec.pop("cluster")
    if isinstance(c, dict):
        extra = set(c) - {"node", "name", "nodes", "fabric"}
        if extra or not ({"node", "name"} & set(c)):
            raise MlsysimError(f"cluster must be a name or {{node: NAME, nodes: N, fabric: NAME}}, got {c!r}")
        c = _cluster(c.get("node", c.get("name")), nodes=c.get("nodes"), fabric=c.get("fabric"))
    return audit(spec.pop("model"), c, **spec)


def _audit_keywords() -> list[str]:
    import inspect
    return list(inspect.signature(audit).parameters)


def _read_scenario(path) -> dict:
    import yaml
    from pathlib import Path
    p = Path(path)
    if not p.is_file():
        raise MlsysimError(f"scenario file {str(p)!r} does not exist")
    try:
        spec = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise MlsysimError(f"scenario file {str(p)!r} is not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(spec, dict):
        raise MlsysimError(f"scenario file {str(p)!r} must hold a mapping of audit arguments")
    from .registry import _floats
    return _floats(spec)
