"""Failures of a training cluster, and how often to checkpoint against them.

**Failure rates.** Each cause of a job interruption (GPU, HBM, NIC, software,
switch, PSU, host) has a mean time to failure per unit, MTTF_c, derived from
published counts (``data/reliability.yaml``: MTTF = units x hours / failures).
Failures are independent and exponential (a Poisson process), and one failure
stops a synchronous job, so the parts form a series system whose rates add:

    λ_node = Σ_c n_c / MTTF_c,    MTBF_cluster = 1 / (nodes · λ_node)

with n_c the units of cause c in a node (8 GPUs, 1 host, ...). A job of T hours
then expects T / MTBF failures and survives with probability exp(−T / MTBF).
The default rates come from the Llama 3 405B run (419 unexpected interruptions
in 54 days on 16,384 H100s, Llama 3 Herd of Models §3.3.4), so a 16K-GPU DGX
H100 cluster has one interruption every 3.09 h. The same per-unit rates are
used for other GPU generations, an assumption: measured fleets differ by 3x
(Kokolis et al. 2025 report 2.34 and 6.50 failures per 1,000 node-days on two
A100 clusters; this default is 3.79).

**Checkpoint interval.** With a checkpoint that stalls training for δ seconds
and a cluster MTBF of M seconds, Young (1974) minimises the wasted fraction
δ/τ + τ/(2M) at τ = √(2δM). Daly (2006, FGCS 22(3)) solves the exact
exponential model, in which the wall time for τ seconds of work is

    E[T] = M · e^{R/M} · (e^{(τ+δ)/M} − 1)        (R: downtime per failure)

and its optimum, τ = √(2δM)·[1 + ⅓√(δ/2M) + (1/9)(δ/2M)] − δ for δ < 2M, else
τ = M, which does not depend on R. The effective training time ratio (ETTR,
Kokolis et al. 2025) is τ / E[T]. Each failure costs on average half a
checkpoint period of lost work plus the downtime.

**Downtime per failure.** :func:`downtime` names what a failure costs besides the stall,
term by term (defaults in ``data/reliability.yaml``, each with its source):

    D = t_detect + t_replace + t_rendezvous + t_restore + t_recompute

*detection*: under NCCL a rank that vanished never answers, so the survivors hang in their next
collective until PyTorch's watchdog aborts it, after the process group's timeout, 10 min by
default; *replacement*: the scheduler swaps the lost node for a spare (a choice, 5 min: Slurm's
default SlurmdTimeout before it declares a silent node DOWN); *rendezvous*: the agents meet at the
c10d store again and every process starts and builds its communicators (a choice, 1 min:
torchelastic's default last call of 30 s plus 30 s to start); *restore*: the read of the
checkpoint (:func:`~mlsysim.checkpoint.checkpoint`'s ``restore_s``); *recomputation*: the work
since the newest durable checkpoint, half a period plus its durability lag. The first three are
what :func:`~mlsysim.checkpoint.checkpoint` and :func:`~mlsysim.goodput.goodput` call
``restart_s``: 16 min with these defaults, inside the 5-20 min Kokolis et al. (2025) observe
(:data:`RESTART_S` stays the round 10 min that the notebooks use). Assumptions: the terms run one
after another (a scheduler that notices the dead node while the job still waits overlaps the
first two), and one failure at a time.

Worked number (tested): 16,384 H100s (2,048 DGX H100 nodes) have an MTBF of
3.09 h; a 30 s checkpoint is then best taken every 13.3 min (Daly; Young: 13.6).
With the default terms and a checkpoint every 30 min, a failure costs 960 s before the
restore and 1,860 s in all.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .errors import MlsysimError, check_count, check_positive
from .tables import Record
from .units import fmt


# --- data ---------------------------------------------------------------------
@dataclass(frozen=True)
class Observation:
    """A published failure count on a named cluster (``data/reliability.yaml``)."""

    name: str
    description: str
    accelerators: int
    accelerators_per_node: int
    days: float | None = None
    interruptions: int | None = None
    unexpected: int | None = None
    planned: int | None = None
    node_failures_per_1000_node_days: float | None = None
    source: str = ""
    date: str = ""

    @property
    def nodes(self) -> float:
        return self.accelerators / self.accelerators_per_node

    @property
    def node_failures_per_day(self) -> float:
        """Failures per node per day: as published, or unexpected / (nodes x days)."""
        if self.node_failures_per_1000_node_days is not None:
            return self.node_failures_per_1000_node_days / 1000.0
        return self.unexpected / (self.nodes * self.days)

    @property
    def mtbf_h(self) -> float:
        """Mean time between failures of the whole observed cluster, hours."""
        return 24.0 / (self.nodes * self.node_failures_per_day)


@dataclass(frozen=True)
class Component:
    """One failure cause: ``per`` "accelerator" or "node", with its MTTF per unit in hours."""

    name: str
    per: str
    mttf_h: float
    failures: int
    observation: str
    causes: str
    source: str
    date: str


@functools.cache
def _data():
    from .registry import _read
    raw = _read("reliability.yaml")
    obs = {}
    for e in raw["observations"]:
        for k in ("name", "source", "date"):
            if not e.get(k):
                raise MlsysimError(f"reliability observation {e.get('name', '?')!r} has no {k}")
        obs[e["name"]] = Observation(**{**e, "date": str(e["date"])})
    comps = []
    for e in raw["components"]:
        o = obs[e["observation"]]
        units = o.accelerators if e["per"] == "accelerator" else o.nodes
        if e["per"] not in ("accelerator", "node"):
            raise MlsysimError(f"component {e['name']!r}: per must be 'accelerator' or 'node'")
        comps.append(Component(name=e["name"], per=e["per"], failures=e["failures"],
                               mttf_h=units * o.days * 24.0 / e["failures"], observation=o.name,
                               causes=e["causes"], source=e["source"], date=str(e["date"])))
    return obs, tuple(comps)


def observations() -> dict[str, Observation]:
    """Published failure statistics by name (``llama3-405b``, ``meta-rsc-1``, ...)."""
    return dict(_data()[0])


def components() -> tuple[Component, ...]:
    """The default failure causes of a GPU node, with their MTTFs."""
    return _data()[1]


_NODE_RATE: dict = {}


def node_failure_rate_per_h(node) -> float:
    """λ_node = Σ n_c / MTTF_c: failures per hour of one node (series system of its parts).

    >>> import mlsysim as ms
    >>> round(ms.node_failure_rate_per_h(ms.node("dgx-h100")) * 24 * 1000, 2)  # per 1,000 node-days
    3.79
    """
    key = (node.name, node.accelerators)
    rate = _NODE_RATE.get(key)
    if rate is None:
        rate = sum((node.accelerators if c.per == "accelerator" else 1) / c.mttf_h for c in components())
        _NODE_RATE[key] = rate
    return rate


def failure_breakdown(cluster, hours: float = 24.0) -> list[dict]:
    """Rows (cause, per, MTTF per unit, expected failures in ``hours``, share) for a table."""
    check_positive("hours", hours)
    node = cluster.node
    total = node_failure_rate_per_h(node)
    rows = []
    for c in components():
        n = node.accelerators if c.per == "accelerator" else 1
        rate = n / c.mttf_h
        rows.append({"cause": c.name, "per": c.per, "MTTF per unit (h)": f"{c.mttf_h:,.0f}",
                     "failures": rate * cluster.nodes * hours, "share": fmt(rate / total, "%")})
    return rows


# --- cluster MTBF -----------------------------------------------------------------
def _num(x):
    if type(x) in (float, int):
        return float(x)
    return float(x) if np.ndim(x) == 0 else np.asarray(x, dtype=float)


def _nodes(cluster, nodes):
    """Node count as a float (NaN at the fractional entries of an array); a bad scalar raises."""
    if nodes is None:
        return float(cluster.nodes)
    whole = check_count("nodes", nodes)
    n = _num(nodes)
    return n if whole is None else np.where(whole, n, np.nan)


def _node_rate_h(cluster, node_failures_per_day):
    if node_failures_per_day is None:
        return node_failure_rate_per_h(cluster.node)
    r = _num(node_failures_per_day)
    check_positive("node_failures_per_day", r)
    return r / 24.0


def cluster_mtbf_h(cluster, nodes=None, node_failures_per_day=None):
    """Mean time between failures of a whole cluster, hours: 1 / (nodes · λ_node).

    ``nodes`` (scalar or array) overrides the cluster's node count; ``node_failures_per_day``
    replaces the component model by a measured per-node rate (e.g. 6.5e-3 on Meta's RSC-1).

    >>> import mlsysim as ms
    >>> round(ms.cluster_mtbf_h(ms.cluster("dgx-h100", nodes=2048)), 2)   # Llama 3: 54 d x 24 / 419
    3.09
    """
    return 1.0 / (_nodes(cluster, nodes) * _node_rate_h(cluster, node_failures_per_day))


def expected_failures(cluster, hours, nodes=None, node_failures_per_day=None):
    """Expected failures in a job of ``hours``: hours / MTBF (Poisson mean)."""
    check_positive("hours", hours)
    return _num(hours) / cluster_mtbf_h(cluster, nodes, node_failures_per_day)


def p_any_failure(cluster, hours, nodes=None, node_failures_per_day=None):
    """Probability of at least one failure in ``hours``: 1 − exp(−hours / MTBF).

    >>> import mlsysim as ms
    >>> round(ms.p_any_failure(ms.cluster("dgx-h100", nodes=128), hours=24), 3)   # 1,024 GPUs, one day
    0.384
    """
    x = expected_failures(cluster, hours, nodes, node_failures_per_day)
    return -math.expm1(-x) if type(x) is float else -np.expm1(-x)


# --- intervals ----------------------------------------------------------------------
def _check_durations(**kw):
    for k, v in kw.items():
        check_positive(k, v)


def young_interval_s(checkpoint_s, mtbf_s):
    """Young (1974) optimal compute time between checkpoints: √(2 δ M), seconds.

    >>> round(young_interval_s(30.0, 3.0 * 3600))
    805
    """
    _check_durations(checkpoint_s=checkpoint_s, mtbf_s=mtbf_s)
    d, m = _num(checkpoint_s), _num(mtbf_s)
    return math.sqrt(2.0 * d * m) if type(d) is float and type(m) is float else np.sqrt(2.0 * d * m)


def daly_interval_s(checkpoint_s, mtbf_s, restart_s=0.0):
    """Daly (2006) higher-order optimal compute time between checkpoints, seconds.

    τ = √(2δM)·[1 + ⅓·√(δ/2M) + (1/9)·(δ/2M)] − δ for δ < 2M, and τ = M otherwise.
    The optimum does not depend on the restart time R (it scales E[T] by e^{R/M}
    only); ``restart_s`` is checked and accepted for symmetry with :func:`ettr`.

    >>> round(daly_interval_s(30.0, 3.0 * 3600))
    785
    """
    _check_durations(checkpoint_s=checkpoint_s, mtbf_s=mtbf_s)
    check_positive("restart_s", restart_s, allow_zero=True)
    d, m = _num(checkpoint_s), _num(mtbf_s)
    x = d / (2.0 * m)
    if type(x) is float:
        return math.sqrt(2.0 * d * m) * (1 + math.sqrt(x) / 3 + x / 9) - d if x < 1 else m
    tau = np.sqrt(2.0 * d * m) * (1 + np.sqrt(x) / 3 + x / 9) - d
    return np.where(x < 1, tau, m + 0.0 * x)


def lost_work_s(interval_s, restart_s, checkpoint_s=0.0, lag_s=0.0):
    """Expected time lost per failure: half a checkpoint period, the lag until the
    last checkpoint became durable, and the downtime to restart.

    ``(interval + checkpoint) / 2 + lag + restart``; for exponential failures and
    τ ≪ M the failure falls uniformly inside a period (Young 1974).

    >>> lost_work_s(1800.0, 600.0)
    1500.0
    """
    _check_durations(interval_s=interval_s)
    for k, v in (("restart_s", restart_s), ("checkpoint_s", checkpoint_s), ("lag_s", lag_s)):
        check_positive(k, v, allow_zero=True)
    return (_num(interval_s) + _num(checkpoint_s)) / 2.0 + _num(lag_s) + _num(restart_s)


def wall_time_per_interval_s(interval_s, checkpoint_s, mtbf_s, restart_s=0.0):
    """Daly (2006) expected wall time to finish τ seconds of work plus a δ-second
    checkpoint under exponential failures with downtime R: M·e^{R/M}·(e^{(τ+δ)/M} − 1)."""
    t, d, m, r = _num(interval_s), _num(checkpoint_s), _num(mtbf_s), _num(restart_s)
    if type(t) is float and type(d) is float and type(m) is float and type(r) is float:
        return m * math.exp(r / m) * math.expm1((t + d) / m)
    return m * np.exp(r / m) * np.expm1((t + d) / m)


def ettr(interval_s, checkpoint_s, mtbf_s, restart_s=0.0):
    """Effective training time ratio τ / E[T] (Daly 2006 exact exponential model).

    Kokolis et al. (2025) quote 0.70 for a 16,000-GPU job at 6.5 failures per 1,000
    node-days with hourly non-blocking checkpoints and 5 min restarts:

    >>> m = 3600 * 24 / (2000 * 6.5e-3)           # 2,000 nodes -> MTBF in seconds
    >>> round(ettr(3600.0, 0.0, m, restart_s=300.0), 2)
    0.72
    """
    _check_durations(interval_s=interval_s, mtbf_s=mtbf_s)
    check_positive("checkpoint_s", checkpoint_s, allow_zero=True)
    check_positive("restart_s", restart_s, allow_zero=True)
    return _num(interval_s) / wall_time_per_interval_s(interval_s, checkpoint_s, mtbf_s, restart_s)


RESTART_S = 600.0  # default downtime per failure before training resumes (Kokolis et al.: 5-20 min)


# --- downtime per failure, term by term ------------------------------------------------
DOWNTIME_TERMS = ("detection", "replacement", "rendezvous", "restore", "recomputation")


@functools.cache
def downtime_defaults() -> dict:
    """The default seconds of the terms before the restore, by term, with what each counts, whether
    it is a choice and its source (``data/reliability.yaml``, section ``downtime``)."""
    from .registry import _read
    out = {}
    for e in _read("reliability.yaml")["downtime"]:
        for k in ("term", "seconds", "what", "source", "date"):
            if e.get(k) in (None, ""):
                raise MlsysimError(f"downtime term {e.get('term', '?')!r} has no {k}")
        out[e["term"]] = {**e, "seconds": float(e["seconds"]), "choice": bool(e.get("choice", False)),
                          "date": str(e["date"])}
    missing = [t for t in DOWNTIME_TERMS[:3] if t not in out]
    if missing:
        raise MlsysimError(f"data/reliability.yaml has no default for the downtime term(s) {missing}")
    return out


@dataclass(frozen=True)
class Downtime(Record):
    """Result of :func:`downtime`: the seconds one failure costs, by term (floats, or arrays)."""

    detection_s: object       # until the survivors give up on the lost rank
    replacement_s: object     # until a spare node stands in for the lost one
    rendezvous_s: object      # until every process has started and met the others again
    restore_s: object         # reading the checkpoint back
    recomputation_s: object   # training again the steps since the newest durable checkpoint

    @property
    def restart_s(self):
        """Detection + replacement + rendezvous: what ``ms.checkpoint`` and ``ms.goodput`` call ``restart_s``."""
        return self.detection_s + self.replacement_s + self.rendezvous_s

    @property
    def total_s(self):
        """Every term: the wall time one failure costs."""
        return self.restart_s + self.restore_s + self.recomputation_s

    def terms(self) -> dict:
        """Seconds by term name, in the order of :data:`DOWNTIME_TERMS`."""
        return {t: getattr(self, f"{t}_s") for t in DOWNTIME_TERMS}

    def rows(self) -> list[tuple[str, str]]:
        if np.ndim(self.total_s):
            return [("shape", str(np.shape(self.total_s)))]
        return [(t, fmt(v, "s")) for t, v in self.terms().items()] + [("per failure", fmt(self.total_s, "s"))]


def downtime(checkpoint=None, *, detection_s=None, replacement_s=None, rendezvous_s=None, restore_s=None,
             interval_s=None) -> Downtime:
    """Seconds one failure of a synchronous job costs, as a sum of named terms (module docstring).

    Parameters
    ----------
    checkpoint : a :class:`~mlsysim.checkpoint.Checkpoint`: its ``restore_s`` is the restore, and
        half its period plus its durability lag, (τ + δ)/2 + lag, the recomputation.
    detection_s, replacement_s, rendezvous_s : replace the defaults of :func:`downtime_defaults`
        (600, 300 and 60 s; the first is PyTorch's NCCL timeout, the others are choices).
    restore_s : seconds to read the checkpoint back (replaces the checkpoint's; default 0 without one).
    interval_s : compute time between checkpoints, for the recomputation τ/2 when no checkpoint is given.

    Scalars or arrays (they broadcast); a negative or non-finite term is an error naming it.

    >>> d = downtime(interval_s=1800.0)
    >>> d.restart_s, d.recomputation_s, d.total_s
    (960.0, 900.0, 1860.0)
    """
    given = {"detection": detection_s, "replacement": replacement_s, "rendezvous": rendezvous_s}
    for k, v in {**{f"{t}_s": x for t, x in given.items()}, "restore_s": restore_s}.items():
        if v is not None:   # a checkpoint's own NaN (an infeasible entry) stays NaN
            check_positive(k, v, allow_zero=True)
    terms = {k: downtime_defaults()[k]["seconds"] if v is None else v for k, v in given.items()}
    if checkpoint is not None:
        if not all(hasattr(checkpoint, a) for a in ("restore_s", "interval_s", "stall_s", "lag_s")):
            raise MlsysimError(f"checkpoint must be the result of ms.checkpoint, got {type(checkpoint).__name__}")
        restore = checkpoint.restore_s if restore_s is None else restore_s
        tau = checkpoint.interval_s if interval_s is None else interval_s
        recompute = lost_work_s(tau, 0.0, checkpoint.stall_s, checkpoint.lag_s)
    elif interval_s is None:
        raise MlsysimError("downtime needs interval_s (compute time between checkpoints: a failure loses half "
                           "of it on average) or checkpoint= (a result of ms.checkpoint)")
    else:
        restore, recompute = 0.0 if restore_s is None else restore_s, lost_work_s(interval_s, 0.0)
    return Downtime(*(_num(v) for v in (*terms.values(), restore, recompute)))
