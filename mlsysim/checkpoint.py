"""Training checkpoints: what they hold, how long they take to write and restore, what they cost.

**Contents.** A checkpoint holds the model states that training cannot re-derive
(:func:`~mlsysim.optimizers.training_state` without the gradients): the weights
in the training precision, the fp32 master copy when that precision is 16 bits,
and the optimizer's states (AdamW m and v, SGD-momentum's velocity, Adafactor's
factored moments, none for SGD), plus a few kilobytes per rank of scheduler,
random-generator and data-loader state. Mixed-precision AdamW: 2 + 4 + 8 =
14 B per parameter (the Megatron 1T checkpoint, 1.008e12 x 14 B = 14.1 TB).

**Who writes what.** Tensor (``tp``) and pipeline (``pp``) parallelism split the
states; data parallelism (``dp``) replicates them unless ZeRO/FSDP shards them:
``zero_stage`` ≥ 1 shards master weights and optimizer states over the DP group,
3 also the weights (Rajbhandari et al., SC'20). A replicated tensor is written
once, by data-parallel rank 0 (as Megatron-LM does); a sharded one by its owner.
The busiest rank writes ``rank_B`` = replicated/(tp·pp) + sharded/(tp·pp·dp).

**Write path.** GPU → host over the host link (PCIe, or NVLink-C2C on Grace
parts), then host → a storage tier (``data/storage.yaml``): node-local NVMe
(each node at its drives' rate), a parallel file system (an aggregate rate
shared by all writers, and a per-node client link), or an object store (each
node at its network link). Storage time = max(total / aggregate, node bytes /
client link).

**Strategies.**

* ``"sync"`` — training stalls for the whole write: stall = GPU→host + storage.
* ``"async"`` — training stalls only for the snapshot into pinned host memory
  (CheckFreq, Mohan et al., FAST'21; Megatron/PyTorch async save); the persist
  overlaps training. The node must hold its shards in host memory, and the
  next snapshot cannot start before the persist ends (interval + stall ≥ write).
* ``"pipelined"`` — as async, but the snapshot copy overlaps the next forward and
  backward pass (CheckFreq, Mohan et al., FAST'21): the weights and optimizer states do not
  change until the next optimizer step, so training waits, before that step, only for what is
  not yet copied: stall = max(0, d2h − t_fb), with t_fb (``step_s``) the seconds of forward and
  backward per step. The copy runs on the GPU's copy engine over the host link while the SMs
  compute; the model assumes it slows neither (64 GB/s of PCIe beside 3.35 TB/s of HBM on an
  H100; on a DGX the NICs share the PCIe switches, which the model does not count). The
  persist follows as for async; the checkpoint is durable d2h + storage after the snapshot
  begins, so the next snapshot waits for that (interval + stall ≥ write), and a snapshot comes at
  most once a step, so the interval is at least t_fb. With no stall left, Daly's optimum is 0 and
  the default interval is the shortest the persist and the step allow: the model charges a
  checkpoint nothing else (not the storage bandwidth other jobs lose, not the PCIe it shares), so
  read that interval as a bound.
* ``"in-memory"`` — as async, plus copies to ``replicas − 1`` peer nodes' host
  memory over the scale-out NICs, with a durable persist every few checkpoints
  (Gemini, Wang et al., SOSP'23). Recovery reads from a peer's memory unless
  every holder of the lost node's copy also fails within the recovery window
  (probability (1 − e^{−w/M_node})^{replicas−1}); then it falls back to storage.

**Restore.** Each DP group's rank reads one copy of its shard (total bytes at
the tier's aggregate read rate), copies it to the GPU, then broadcasts the
replicated part inside its DP group (MegaScale, Jiang et al., NSDI'24). A failure
also loses the work since the newest *durable* checkpoint: half a period, plus
the persist lag for async. Goodput is Daly's exact model (see
:mod:`mlsysim.reliability`) with that lag added to the downtime.

Worked number (tested): Llama-3-70B, AdamW, bf16 on 1,024 H100s (TP 8, PP 4,
DP 32, ZeRO-1) writing to Lustre at 682.5 GB/s: 988 GB in all, 5.24 GB from the
busiest rank; a sync save stalls 1.53 s (988 GB / 682.5 GB/s + the 82 ms PCIe
copy), an async one 82 ms, a pipelined one 0 s behind a forward and backward pass of
a second, and 32 ms behind one of 50 ms, shorter than the copy.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .tables import Record
from .collectives import broadcast_time
from .errors import InfeasibleError, MlsysimError, UnknownNameError, check_fraction, check_integer, check_positive, \
    fractional_counts
from .optimizers import training_state
from .registry import cluster as _cluster, model as _model
from .reliability import RESTART_S, cluster_mtbf_h, daly_interval_s, ettr, young_interval_s, _nodes, _num
from .units import GB, Gbps, KB, fmt, hour

STRATEGIES = ("sync", "async", "pipelined", "in-memory")

# Scheduler, random-generator and data-loader state per rank: a PyTorch CPU generator is
# 5,056 B, NumPy's and Python's Mersenne twisters about 2.5 KB each, a CUDA generator a
# seed and an offset; a scheduler and a sampler position a few hundred bytes. 16 KB covers it.
EXTRAS_PER_RANK_B = 16 * KB


# --- storage tiers ------------------------------------------------------------------
@dataclass(frozen=True)
class StorageTier:
    """A storage tier. ``write_Bps``/``read_Bps``: per node for ``kind="node"``, aggregate
    for ``"shared"``, None (unlimited) for ``"object"``; ``client_*``: per-node link."""

    name: str
    kind: str
    write_Bps: float | None
    read_Bps: float | None
    client_write_Bps: float | None
    client_read_Bps: float | None
    durable: bool
    source: str = ""
    date: str = ""
    notes: str = ""

    def _time(self, total_B, node_B, rate, client):
        if self.kind == "node":
            return node_B / rate
        t = node_B / client
        return t if rate is None else _maximum(total_B / rate, t)

    def write_s(self, total_B, node_B, write_Bps=None):
        """Seconds to write ``total_B`` bytes of which the busiest node holds ``node_B``;
        ``write_Bps`` replaces the tier's rate (aggregate, or per node for node-local and object)."""
        if write_Bps is not None and self.kind == "object":
            return node_B / write_Bps
        return self._time(total_B, node_B, write_Bps or self.write_Bps, self.client_write_Bps)

    def read_s(self, total_B, node_B, read_Bps=None):
        """Seconds to read ``total_B`` bytes back (``node_B`` on the busiest node)."""
        if read_Bps is not None and self.kind == "object":
            return node_B / read_Bps
        return self._time(total_B, node_B, read_Bps or self.read_Bps, self.client_read_Bps)


@functools.cache
def _tiers():
    from .registry import _Table, _read, _require
    entries = []
    for e in _read("storage.yaml"):
        _require(e, "storage tier")
        if e["kind"] not in ("node", "shared", "object"):
            raise MlsysimError(f"storage tier {e['name']!r}: kind must be node, shared or object")
        if e["kind"] == "node":
            w, r = e["drives"] * e["drive_write_GBps"] * GB, e["drives"] * e["drive_read_GBps"] * GB
        else:
            w = e["write_GBps"] * GB if "write_GBps" in e else None
            r = e["read_GBps"] * GB if "read_GBps" in e else None
        client = e["client_Gbps"] * Gbps if "client_Gbps" in e else None
        entries.append((StorageTier(name=e["name"], kind=e["kind"], write_Bps=w, read_Bps=r,
                                    client_write_Bps=client, client_read_Bps=client, durable=e["durable"],
                                    source=e["source"], date=str(e["date"]), notes=e.get("notes", "")),
                        e.get("also", [])))
    return _Table("storage tier", entries)


def storage_tier(name) -> StorageTier:
    """A storage tier by name (``local-nvme``, ``lustre``, ``tectonic``, ``s3``); a record passes through."""
    return name if isinstance(name, StorageTier) else _tiers().get(name)


def storage_tiers() -> list[StorageTier]:
    """Every storage tier in ``data/storage.yaml``."""
    return list(_tiers().records)


# --- helpers --------------------------------------------------------------------------
def _maximum(a, b):
    return max(a, b) if type(a) is float and type(b) is float else np.maximum(a, b)


def _exp(x):
    return math.exp(x) if type(x) is float else np.exp(x)


def _ceil(x):
    return float(math.ceil(x)) if type(x) is float else np.ceil(x)


def checkpoint_bytes(model, optimizer: str = "adamw", precision: str = "bf16", master_weights: bool = True) -> dict:
    """Bytes of one unsharded checkpoint by part: weights, master copy, optimizer states.

    >>> import mlsysim as ms
    >>> parts = checkpoint_bytes(ms.model("megatron-1t"))
    >>> round(sum(parts.values()) / ms.model("megatron-1t").params, 3)   # 2 + 4 + 8 B
    14.0
    """
    st = training_state(_model(model), optimizer, precision)
    return {"weights_B": st.weights_B, "master_B": st.master_B if master_weights else 0.0,
            "optimizer_B": st.optimizer_B}


# --- the result record -------------------------------------------------------------------
@dataclass(frozen=True)
class Checkpoint(Record):
    """Result of :func:`checkpoint`. Bytes, seconds; floats, or arrays for array inputs."""

    model: str
    cluster: str
    optimizer: str
    strategy: str
    storage: str
    precision: str
    tp: int
    pp: int
    dp: object
    zero_stage: int
    weights_B: float
    master_B: float
    optimizer_B: float
    extras_B: object
    size_B: object                # every byte of the checkpoint, written once
    rank_B: object                # bytes written by the busiest rank
    node_B: object                # bytes written by the busiest node
    host_memory_needed_B: object  # pinned host memory per node the strategy needs
    d2h_s: object                 # GPU -> host copy of the busiest rank
    storage_write_s: object       # host -> storage tier
    stall_s: object               # training stall per checkpoint
    write_s: object               # from the start of a checkpoint until it is durable (persist)
    memory_copy_s: object         # in-memory: until the peer copies exist (NaN otherwise)
    persist_every: object         # in-memory: durable persist every k-th checkpoint
    restore_s: object             # expected time to load the state back
    lag_s: object                 # expected extra work lost because the newest copy was not yet safe
    p_memory_loss: object         # in-memory: probability a failure also lost every memory copy
    restart_s: float              # downtime before the restore begins
    interval_s: object            # compute time between checkpoints
    mtbf_s: object
    young_s: object
    daly_s: object
    min_interval_s: object        # shortest feasible interval (persist or peer copy must finish)
    goodput: object               # effective training time ratio at interval_s
    feasible: object
    reason: str = ""
    step_s: object = None         # pipelined: forward and backward seconds per step the copy overlaps

    @property
    def recovery_s(self):
        """Expected restore time plus durability lag per failure."""
        return self.restore_s + self.lag_s

    @property
    def downtime_s(self):
        """Expected time lost per failure besides the half period: restart + restore + lag."""
        return self.restart_s + self.recovery_s

    @property
    def overhead_fraction(self):
        """Share of wall time stalled by checkpoints when nothing fails: δ / (τ + δ)."""
        return self.stall_s / (self.interval_s + self.stall_s)

    @property
    def lost_fraction(self):
        """Share of wall time lost to failures (lost work, restarts, restores): 1 − goodput − stalls."""
        return 1.0 - self.goodput - self.overhead_fraction

    @property
    def best_interval_s(self):
        """Daly's optimum for this strategy's stall, or the shortest feasible interval if longer."""
        return _maximum(self.daly_s, self.min_interval_s)

    @property
    def bytes_per_param(self):
        return (self.weights_B + self.master_B + self.optimizer_B) / self._params

    @property
    def _params(self):
        return _model(self.model).params

    def rows(self) -> list[tuple[str, str]]:
        if np.ndim(self.goodput):
            return [("shape", str(np.shape(self.goodput)))]
        rows = [("model", self.model), ("cluster", self.cluster), ("strategy", self.strategy),
                ("storage", self.storage), ("optimizer", self.optimizer),
                ("parallelism", f"TP {self.tp} x PP {self.pp} x DP {self.dp:g}, ZeRO-{self.zero_stage}"),
                ("checkpoint size", fmt(self.size_B, "B")), ("busiest rank writes", fmt(self.rank_B, "B")),
                ("stall per checkpoint", fmt(self.stall_s, "s")), ("durable after", fmt(self.write_s, "s"))]
        if self.strategy == "pipelined":
            rows[-2:-1] = [("snapshot copy", fmt(self.d2h_s, "s")), ("overlapped by", fmt(self.step_s, "s")),
                           rows[-2]]
        if self.strategy == "in-memory":
            rows.append(("peer copies after", fmt(self.memory_copy_s, "s")))
        return rows + [("restore", fmt(self.restore_s, "s")), ("cluster MTBF", fmt(self.mtbf_s, "s")),
                       ("interval", fmt(self.interval_s, "s")), ("Daly optimum", fmt(self.daly_s, "s")),
                       ("stall overhead", fmt(self.overhead_fraction, "%")), ("goodput", fmt(self.goodput, "%"))]



# --- the solver ------------------------------------------------------------------------------
_NAN_FIELDS = ("stall_s", "write_s", "memory_copy_s", "restore_s", "lag_s", "goodput", "d2h_s",
               "storage_write_s", "rank_B", "node_B", "interval_s")


def _check_inputs(strategy, storage, zero_stage, replicas, host_fraction, restart_s, storage_Bps, read_Bps,
                  persist_every, step_s) -> StorageTier:
    """Validate the scalar settings of :func:`checkpoint`; the durable storage tier."""
    if strategy not in STRATEGIES:
        raise UnknownNameError("checkpoint strategy", strategy, STRATEGIES)
    if step_s is not None:
        check_positive("step_s", step_s)
    elif strategy == "pipelined":
        raise MlsysimError("strategy 'pipelined' needs step_s: the seconds of forward and backward pass per "
                           "training step, which the snapshot copy overlaps")
    tier = storage_tier(storage)
    if not tier.durable:
        raise InfeasibleError(f"storage {tier.name!r} is not durable: a checkpoint there is lost with its node; "
                              f"write to a shared tier (lustre, tectonic) or an object store (s3)")
    check_integer("zero_stage", zero_stage, minimum=0)
    if zero_stage not in (0, 1, 2, 3):
        raise MlsysimError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage!r}")
    if type(replicas) is not int or replicas < 2:
        check_integer("replicas", replicas, minimum=2)
    check_fraction("host_fraction", host_fraction)
    check_positive("restart_s", restart_s, allow_zero=True)
    for k, v in (("storage_Bps", storage_Bps), ("read_Bps", read_Bps)):
        if v is not None:
            check_positive(k, v)
    if persist_every is not None:
        check_integer("persist_every", persist_every)
    return tier


def _host_Bps(c) -> float:
    """The GPU -> host link rate of the cluster's accelerator (an error where it is unknown)."""
    host = c.accelerator.host_link_Bps
    if host is None:
        raise InfeasibleError(f"{c.accelerator.name} has no host link in the registry: the GPU -> host "
                              f"copy of a checkpoint cannot be timed")
    return host


def _sizes(m, c, optimizer, precision, master_weights, zero_stage, tp, pp, dp, nodes):
    """Contents and sharding: the parts, counts, total size and the busiest rank's and node's bytes."""
    parts = checkpoint_bytes(m, optimizer, precision, master_weights)
    w, ms_, o = parts["weights_B"], parts["master_B"], parts["optimizer_B"]
    gpn = c.node.accelerators
    n_nodes = _nodes(c, nodes)
    gpus = n_nodes * gpn
    mp = _num(tp * pp)
    if dp is None:
        dp_ = gpus / mp
    else:
        dp_ = _num(dp)
    sharded = (ms_ + o if zero_stage >= 1 else 0.0) + (w if zero_stage == 3 else 0.0)
    replicated = w + ms_ + o - sharded
    extras = EXTRAS_PER_RANK_B * gpus
    size = w + ms_ + o + extras
    own = sharded / (mp * dp_) + EXTRAS_PER_RANK_B
    rank_B = replicated / mp + own
    node_B = (min(gpn, mp) if type(mp) is float else np.minimum(gpn, mp)) * replicated / mp + gpn * own
    return w, ms_, o, n_nodes, gpus, mp, dp_, replicated, extras, size, rank_B, node_B


def _write_plan(strategy, tier, c, size, node_B, rank_B, host, storage_Bps, replicas, step_s):
    """Write path: GPU -> host copy, storage write, stall, persist, lag, host buffers, peer copy, shortest interval."""
    d2h = rank_B / host
    storage_s = tier.write_s(size, node_B, storage_Bps)
    if strategy == "sync":
        stall, write, lag_ok, buffers = d2h + storage_s, d2h + storage_s, 0.0, 0.0
        copy_s, min_tau = math.nan, 0.0
    else:
        stall, write = d2h, d2h + storage_s
        if strategy == "pipelined":   # the copy overlaps the next forward and backward pass
            stall = _maximum(0.0, d2h - _num(step_s))   # at most one snapshot a step: tau >= t_fb
            lag_ok, buffers, copy_s, min_tau = write - stall, 1.0, math.nan, _maximum(write - stall, _num(step_s))
        elif strategy == "async":
            lag_ok, buffers, copy_s, min_tau = storage_s, 1.0, math.nan, storage_s
        else:
            peer = (replicas - 1) * node_B / (c.scaleout_Bps_per_accelerator * c.node.accelerators)
            lag_ok, buffers, copy_s, min_tau = peer, replicas + 1.0, d2h + peer, peer
    return d2h, storage_s, stall, write, lag_ok, buffers, copy_s, min_tau


def _storage_restore_s(tier, c, size, node_B, rank_B, replicated, mp, dp_, host, read_Bps):
    """Restore path: one read per DP group, host -> GPU, broadcast of the replicated part."""
    read = tier.read_s(size, node_B, read_Bps)
    ranks = max(1.0, float(round(dp_))) if type(dp_) is float else np.maximum(1.0, np.round(dp_))
    bcast = broadcast_time(replicated / mp, ranks, c.scaleout_Bps_per_accelerator, c.fabric.latency_s) \
        if replicated else 0.0
    return read + rank_B / host + bcast


def _intervals(stall, mtbf, min_tau, interval_s):
    """Young's and Daly's optimum for the stall (0 where nothing stalls: checkpoint as often as the
    persist allows), and the interval: the one given, or Daly's unless the persist needs longer."""
    if type(stall) is float and type(mtbf) is float:
        young, daly = (young_interval_s(stall, mtbf), daly_interval_s(stall, mtbf)) if stall > 0 else (0.0, 0.0)
    else:
        stalls = np.asarray(stall, dtype=float)
        some = np.where(stalls > 0, stalls, 1.0)    # a positive stand-in where the stall is 0 (or NaN)
        young = np.where(stalls > 0, young_interval_s(some, mtbf), np.where(stalls == 0, 0.0, np.nan))
        daly = np.where(stalls > 0, daly_interval_s(some, mtbf), np.where(stalls == 0, 0.0, np.nan))
    tau = _maximum(daly, min_tau) if interval_s is None else _num(interval_s)
    check_positive("interval_s", tau)
    return young, daly, tau


def _recovery(strategy, c, mtbf, n_nodes, node_B, rank_B, host, write, period, persist_every, restart_s, replicas,
              restore_storage, lag_ok, storage_s):
    """Persist period k, probability of losing every memory copy, expected restore time and lag."""
    if strategy != "in-memory":
        return math.nan, 0.0, restore_storage, lag_ok
    k = _maximum(1.0, _ceil(write / period)) if persist_every is None else _num(persist_every) + 0.0 * period
    restore_mem = node_B / (c.scaleout_Bps_per_accelerator * c.node.accelerators) + rank_B / host
    node_mtbf_s = mtbf * n_nodes
    window = restart_s + restore_mem
    x = window / node_mtbf_s
    p_loss = (-math.expm1(-x) if type(x) is float else -np.expm1(-x)) ** (replicas - 1)
    restore = (1 - p_loss) * restore_mem + p_loss * restore_storage
    lag = (1 - p_loss) * lag_ok + p_loss * (storage_s + (k - 1) * period / 2)
    return k, p_loss, restore, lag


def _layout_checks(fractional, scalar, tp, pp, dp_, mp, gpus) -> list:
    """(mask, message) pairs: fractional counts, tp·pp·dp ≠ GPUs, a fractional dp."""
    whole = (dp_ == round(dp_)) if scalar else (np.abs(dp_ - np.round(dp_)) <= 1e-9)
    return [(mask, lambda why=why: why) for mask, why in fractional] + [
        (dp_ * mp != gpus if scalar else np.abs(dp_ * mp - gpus) > 1e-6 * gpus,
         lambda: f"tp x pp x dp = {tp} x {pp} x {_show(dp_)} must equal the {_show(gpus)} GPUs of the cluster"),
        (not whole if scalar else ~whole,
         lambda: f"dp = {_show(dp_)} is not a whole number: tp x pp = {tp * pp} does not divide the "
                 f"{_show(gpus)} GPUs"),
    ]


_WAIT = {"async": "persist", "pipelined": "copy and persist (at least one forward and backward pass)",
         "in-memory": "peer copy"}   # what min_tau waits for


def _timing_checks(strategy, c, host_need, host_fraction, tau, min_tau, persist_every, k, period, write) -> list:
    """(mask, message) pairs: host memory for the buffers, the interval, the in-memory persist period."""
    checks = [
        (host_need > host_fraction * c.node.host_memory_B,
         lambda: f"{strategy} checkpointing needs {fmt(_first(host_need), 'B')} of host memory per node but "
                 f"{fmt(host_fraction * c.node.host_memory_B, 'B')} ({host_fraction:.0%} of "
                 f"{fmt(c.node.host_memory_B, 'B')}) is available"),
        (tau < min_tau, lambda: f"interval_s = {_show(tau)} s is shorter than the "
                                f"{_WAIT[strategy]} time "
                                f"{_show(min_tau)} s: the next snapshot would overwrite a buffer still in use"
                                + (" or come within the same step" if strategy == "pipelined" else "")),
    ]
    if strategy == "in-memory" and persist_every is not None:
        checks.append((k * period < write, lambda: f"persist_every = {persist_every} checkpoints leaves "
                                                   f"{_show(k * period)} s for a {_show(write)} s persist"))
    return checks


def _apply_checks(checks, scalar, values):
    """Raise the first failed check (scalars), or mask the failed entries with NaN (arrays)."""
    feasible, reason = True, ""
    for bad, msg in checks:
        if scalar:
            if bad:
                raise InfeasibleError(msg())
        elif np.any(bad):
            feasible = feasible & ~np.asarray(bad)
            reason = reason or msg()
    if not scalar:
        shape = np.broadcast_shapes(np.shape(feasible), *(np.shape(v) for v in values.values()))
        feasible = np.broadcast_to(feasible, shape)
        if not feasible.all():
            values = {k_: np.where(feasible, v, np.nan) for k_, v in values.items()}
    return feasible, reason, values


def checkpoint(model, cluster, optimizer: str = "adamw", interval_s=None, strategy: str = "sync",
               tp: int = 1, pp: int = 1, dp=None, zero_stage: int = 1, precision: str = "bf16",
               master_weights: bool = True, storage="lustre", storage_Bps=None, read_Bps=None,
               restart_s: float = RESTART_S, replicas: int = 2, persist_every=None,
               host_fraction: float = 0.8, nodes=None, node_failures_per_day=None, step_s=None) -> Checkpoint:
    """Size, write and restore time, stall and goodput of checkpointing ``model`` on ``cluster``.

    Parameters
    ----------
    optimizer : "adamw" (alias "adam"), "sgd", "sgd-momentum", "adafactor", "lion", "adam-8bit"
        or an :class:`~mlsysim.workloads.Optimizer`; an unknown name is an error.
    interval_s : compute time between checkpoints (scalar or array); default: Daly's optimum
        for this strategy's stall, or the shortest feasible interval if that is longer.
    strategy : "sync", "async", "pipelined" or "in-memory" (see the module docstring).
    step_s : seconds of forward and backward pass per training step (scalar or array): the
        window the pipelined snapshot copy overlaps; required by "pipelined", ignored by the others.
    tp, pp, dp : tensor, pipeline and data parallel degrees (scalars or arrays); dp defaults to
        GPUs / (tp·pp).
    zero_stage : 0 replicates everything over DP; 1 and 2 shard master weights and optimizer
        states; 3 also the weights.
    master_weights : False for recipes without an fp32 master copy (e.g. fairseq's
        memory-efficient fp16, used for OPT-175B).
    storage : a durable tier ("lustre", "tectonic", "s3"); ``storage_Bps``/``read_Bps``
        replace its write/read rate (aggregate, or per node for an object store).
    restart_s : downtime per failure before the restore starts.
    replicas : in-memory copies of each node's state (own + peers), ≥ 2.
    persist_every : in-memory: persist to storage every k-th checkpoint (default: as often
        as the storage keeps up).
    host_fraction : share of host memory the checkpoint buffers may use.
    nodes : node count (scalar or array), replacing the cluster's. A fractional entry of an
        array ``tp``, ``pp``, ``dp`` or ``nodes`` is NaN with ``feasible`` False.
    node_failures_per_day : a measured per-node failure rate replacing the component model.

    An interval shorter than the persist (async) or the peer copy (in-memory), host memory
    too small for the buffers, or tp·pp·dp ≠ GPUs raise :class:`~mlsysim.errors.InfeasibleError`
    for scalar inputs and give NaN with ``feasible`` False for arrays.

    >>> import mlsysim as ms
    >>> c = ms.checkpoint("llama-3-70b", ms.cluster("dgx-h100", nodes=128), tp=8, pp=4)
    >>> round(c.size_B / 1e9), c.dp
    (988, 32.0)
    """
    m, c = _model(model), _cluster(cluster)
    tier = _check_inputs(strategy, storage, zero_stage, replicas, host_fraction, restart_s, storage_Bps, read_Bps,
                         persist_every, step_s)
    fractional = fractional_counts(tp=tp, pp=pp, dp=dp, nodes=nodes)   # an array: NaN at its fractional entries
    if fractional:   # keep the arithmetic of those entries valid; they are masked below
        tp, pp, dp, nodes = (None if x is None else np.ceil(_num(x)) for x in (tp, pp, dp, nodes))
    host = _host_Bps(c)
    w, ms_, o, n_nodes, gpus, mp, dp_, replicated, extras, size, rank_B, node_B = _sizes(
        m, c, optimizer, precision, master_weights, zero_stage, tp, pp, dp, nodes)
    d2h, storage_s, stall, write, lag_ok, buffers, copy_s, min_tau = _write_plan(
        strategy, tier, c, size, node_B, rank_B, host, storage_Bps, replicas, step_s)
    restore_storage = _storage_restore_s(tier, c, size, node_B, rank_B, replicated, mp, dp_, host, read_Bps)
    mtbf = cluster_mtbf_h(c, nodes, node_failures_per_day) * hour    # failures and the interval
    young, daly, tau = _intervals(stall, mtbf, min_tau, interval_s)
    period = tau + stall
    k, p_loss, restore, lag = _recovery(strategy, c, mtbf, n_nodes, node_B, rank_B, host, write, period,
                                        persist_every, restart_s, replicas, restore_storage, lag_ok, storage_s)
    ratio = ettr(tau, stall, mtbf, restart_s + restore + lag)
    # feasibility
    host_need = buffers * node_B
    values = dict(stall_s=stall, write_s=write, memory_copy_s=copy_s, restore_s=restore, lag_s=lag,
                  goodput=ratio, d2h_s=d2h, storage_write_s=storage_s, rank_B=rank_B, node_B=node_B,
                  interval_s=tau)
    scalar = all(type(x) is float for x in (tau, n_nodes, dp_, mtbf))
    checks = _layout_checks(fractional, scalar, tp, pp, dp_, mp, gpus) + _timing_checks(
        strategy, c, host_need, host_fraction, tau, min_tau, persist_every, k, period, write)
    feasible, reason, values = _apply_checks(checks, scalar, values)
    label = c.name if nodes is None else f"{_show(n_nodes)} x {c.node.name} ({c.fabric.name})"
    return Checkpoint(model=m.name, cluster=label, optimizer=str(getattr(optimizer, "name", optimizer)),
                      strategy=strategy, storage=tier.name, precision=precision, tp=tp, pp=pp, dp=dp_,
                      zero_stage=zero_stage, weights_B=w, master_B=ms_, optimizer_B=o, extras_B=extras,
                      size_B=size, host_memory_needed_B=host_need, persist_every=k, p_memory_loss=p_loss,
                      restart_s=float(restart_s), mtbf_s=mtbf, young_s=young, daly_s=daly,
                      min_interval_s=min_tau, feasible=feasible, reason=reason,
                      step_s=None if step_s is None else _num(step_s), **values)


def _first(x):
    a = np.asarray(x, dtype=float)
    return float(a.max()) if a.size else math.nan


def _show(x) -> str:
    a = np.asarray(x, dtype=float)
    return f"{float(a):.4g}" if a.ndim == 0 else f"[{', '.join(f'{v:.4g}' for v in a.ravel()[:3])}{', …' if a.size > 3 else ''}]"
