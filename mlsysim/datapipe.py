"""The input pipeline of training: can storage, CPUs and the host link keep an accelerator fed?

A training input pipeline has four stages that run concurrently — reading samples from
storage, preparing them on CPU cores (decode and augment, or tokenize), copying them to
the accelerator, and the training step itself. With prefetching they overlap, so in
steady state each accelerator receives samples at the rate of the slowest stage
(Mohan et al., "Analyzing and Mitigating Data Stalls in DNN Training", VLDB 2021;
Leclerc et al., FFCV, CVPR 2023). Per accelerator, in samples per second:

    R_storage = min(B_s / S, N_io · [one file per sample]) / r    tier shared by r readers
    R_cpu     = min(w, c) · ρ                                     w workers on c cores, ρ samples per core-s
    R_link    = B_h / S_dev                                       host-to-device link, one direction
    R_acc     = b / T_step                                        T_step: roofline training pass
    R = min(R_storage, R_cpu, R_link, R_acc),    utilisation U = R / R_acc
    workers needed w* = ceil(R_acc / ρ)

S is the bytes stored per sample, B_s the tier's read bandwidth (the lower of its rate
and the node's client link; tiers from ``data/storage.yaml``, shared with checkpointing)
and N_io its requests per second (it only limits datasets stored as one file per sample),
S_dev the bytes copied to the device, b the batch per accelerator and T_step the
roofline time of one forward + backward + update pass (:func:`~mlsysim.roofline.roofline`
with ``phase="training"``; backward = 2 × forward FLOP). For a language model a sample is
one sequence of L tokens: S = L·β with β bytes per stored token (2 for vocabularies
under 65,500 ids, else 4), and a tokenizer running at τ bytes of text per core-second
prepares ρ = τ / (4 L) sequences per core-second (about 4 bytes of text per token).

Assumptions: workers scale linearly up to the cores available (no memory-bandwidth or
Python contention — a measured data loader reaches less, see the validation cases);
a worker is one hardware thread; the stages overlap perfectly; ``efficiency`` and
``mem_efficiency`` scale the roofline's two roofs exactly as in ``roofline``. Sourced
constants (ImageNet JPEG size, decode cost per core, tokenizer speed, storage tiers,
host CPUs) live in ``data/datapipe.yaml``.

Worked number (tested): ResNet-50 training on an A100-80GB at batch 256 in bf16 has a
roofline bound of 5,154 images/s; with FFCV's pipeline (326 images/s per hardware
thread) 8 workers deliver 2,606 images/s, so the GPU computes 51 % of the time, and
16 workers would keep it fed.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .errors import MlsysimError, check_count, check_fraction, check_positive
from .registry import _Table, _key, _read, hardware as _hardware, model as _model
from .roofline import COUNTS_REASON, _whole, roofline
from .tables import Record, Table, table
from .units import GB, MB, fmt
from .workloads import CNN, Transformer

STAGES = ("accelerator", "cpu", "storage", "link")   # order breaks ties: a fed accelerator wins
TEXT_B_PER_TOKEN_DEFAULT = 4.0


@dataclass(frozen=True)
class Pipeline:
    """One input-pipeline recipe: what a sample costs to store, prepare and send (per image or per token)."""

    name: str
    kind: str                       # "image" or "tokens"
    description: str
    stored_B: float | None          # per image (None for tokens)
    stored_B_per_token: object      # float, or "vocab" (2 or 4 bytes by vocabulary size)
    one_file_per_sample: bool
    samples_per_core_s: float | None  # images per hardware thread per second
    text_Bps_per_core: float | None   # tokenizer throughput per hardware thread (None: no CPU work)
    text_B_per_token: float
    device_B: float                 # per image, or per token for "tokens"
    source: str
    date: str


@dataclass(frozen=True)
class InputTier:
    """What one storage tier offers a data loader: read bandwidth (per node for node-local tiers,
    aggregate for shared ones), the node's client link, and a request-rate limit."""

    name: str
    kind: str                       # node, shared, object (as in data/storage.yaml)
    read_Bps: float                 # inf where only the client link limits (object stores)
    client_Bps: float               # inf for node-local tiers
    reads_per_s: float              # requests per second; inf where it does not limit
    source: str
    date: str

    @property
    def bandwidth_Bps(self) -> float:
        """Read bandwidth one reader gets alone: the tier's rate or the client link, whichever is lower."""
        return min(self.read_Bps, self.client_Bps)


@dataclass(frozen=True)
class Host:
    name: str                       # the node it belongs to, as in clusters.yaml
    cores: int
    threads: int
    accelerators: int
    source: str
    date: str

    @property
    def cores_per_accelerator(self) -> float:
        return self.cores / self.accelerators

    @property
    def threads_per_accelerator(self) -> float:
        return self.threads / self.accelerators


def _require(e: dict, kind: str, key: str = "name") -> None:
    for field in (key, "source", "date"):
        if e.get(field) in (None, ""):
            raise MlsysimError(f"datapipe {kind} entry {e.get(key, '?')!r} has no {field}")


@functools.cache
def _data() -> dict:
    raw = _read("datapipe.yaml")
    for block in ("imagenet", "token_ids"):
        _require({**raw[block], "name": block}, "data block")
    images = raw["imagenet"]["images"]
    pipes = []
    for e in raw["pipelines"]:
        _require(e, "pipeline")
        image = e["kind"] == "image"
        text = e.get("text_MBps_per_thread")
        per_token = e.get("stored_B_per_token")
        pipes.append((Pipeline(
            name=e["name"], kind=e["kind"], description=e.get("description", ""),
            stored_B=e["dataset_GB"] * GB / images if image else None,
            stored_B_per_token=per_token, one_file_per_sample=bool(e["one_file_per_sample"]),
            samples_per_core_s=e["measured_samples_per_s"] / e["measured_threads"] if image else None,
            text_Bps_per_core=None if text is None else text * MB,
            text_B_per_token=per_token if isinstance(per_token, (int, float)) else TEXT_B_PER_TOKEN_DEFAULT,
            device_B=float(e["device_B"] if image else e["device_B_per_token"]),
            source=e["source"], date=str(e["date"])), e.get("also", [])))
    from .checkpoint import storage_tiers
    limits = {_key(e["tier"]): e for e in raw["request_rates"]}
    for e in raw["request_rates"]:
        _require(e, "request-rate", "tier")
    pc = raw["page_cache"]
    _require({**pc, "name": "page-cache"}, "page cache")
    tiers = [(InputTier(name="page-cache", kind="node", read_Bps=pc["read_GBps"] * GB, client_Bps=math.inf,
                        reads_per_s=math.inf, source=pc["source"], date=str(pc["date"])), ["ram", "dram"])]
    for t in storage_tiers():
        lim = limits.get(_key(t.name))
        tiers.append((InputTier(
            name=t.name, kind=t.kind, read_Bps=math.inf if t.read_Bps is None else t.read_Bps,
            client_Bps=math.inf if t.client_read_Bps is None else t.client_read_Bps,
            reads_per_s=math.inf if lim is None else float(lim["reads_per_s"]),
            source=t.source + ("" if lim is None else "; requests: " + lim["source"]), date=t.date), []))
    hosts = []
    for e in raw["hosts"]:
        _require(e, "host", "node")
        hosts.append((Host(name=e["node"], cores=e["cores"], threads=e["threads"],
                           accelerators=e["accelerators"], source=e["source"], date=str(e["date"])), []))
    return {"pipeline": _Table("input pipeline", pipes), "storage": _Table("input storage tier", tiers),
            "host": _Table("host", hosts), "uint16_below": raw["token_ids"]["uint16_below"]}


def pipeline(name) -> Pipeline:
    """An input-pipeline recipe by name (:func:`pipelines_table` lists them)."""
    return name if isinstance(name, Pipeline) else _data()["pipeline"].get(name)


def input_tier(name) -> InputTier:
    """A storage tier as a data loader sees it: ``page-cache`` or any tier of ``data/storage.yaml``
    (``local-nvme``, ``lustre``, ``tectonic``, ``s3``)."""
    return name if isinstance(name, InputTier) else _data()["storage"].get(name)


def host(node: str) -> Host:
    """CPU cores and hardware threads of a server (``host("dgx-a100").threads_per_accelerator`` is 32)."""
    return _data()["host"].get(node)


def pipelines_table() -> Table:
    """The input-pipeline recipes: bytes stored per sample, CPU rate per hardware thread, source."""
    rows = []
    for p in _data()["pipeline"].records:
        image = p.kind == "image"
        rows.append({"pipeline": p.name, "sample": "image" if image else "token",
                     "stored per sample": fmt(p.stored_B, "B") if image else (
                         "2 or 4 B" if p.stored_B_per_token == "vocab" else fmt(p.stored_B_per_token, "B")),
                     "CPU rate per thread": f"{p.samples_per_core_s:.0f} images/s" if image else (
                         "none needed" if p.text_Bps_per_core is None else
                         f"{fmt(p.text_Bps_per_core / p.text_B_per_token)} tokens/s"),
                     "to device per sample": fmt(p.device_B, "B")})
    return table(rows, title="Input pipelines (data/datapipe.yaml)")


def storage_table() -> Table:
    """The storage tiers a loader can read from: bandwidth, client link and request-rate limit."""
    show = lambda v, unit: "not limiting" if math.isinf(v) else fmt(v, unit)  # noqa: E731
    return table([{"tier": t.name, "kind": t.kind, "read bandwidth": show(t.read_Bps, "B/s"),
                   "client link": show(t.client_Bps, "B/s"), "requests/s": show(t.reads_per_s, "")}
                  for t in _data()["storage"].records],
                 title="Storage tiers (data/storage.yaml, data/datapipe.yaml)")


def stored_bytes_per_token(model, pipe="tokens") -> float:
    """Bytes per token on storage: 2 for a vocabulary under 65,500 ids, 4 above (fairseq/Megatron
    ``best_fitting_dtype``), or a pipeline's bytes of raw text per token.

    >>> stored_bytes_per_token("gpt-2"), stored_bytes_per_token("llama-3-8b")
    (2.0, 4.0)
    """
    p, m = pipeline(pipe), _model(model)
    if p.kind != "tokens":
        raise MlsysimError(f"pipeline {p.name!r} carries images, not tokens")
    if p.stored_B_per_token == "vocab":
        return 2.0 if m.vocab < _data()["uint16_below"] else 4.0
    return float(p.stored_B_per_token)


# --- the result --------------------------------------------------------------
@dataclass(frozen=True)
class DataPipe(Record):
    """Result of :func:`datapipe`. Rates are samples per second per accelerator (images, or
    sequences of ``tokens_per_sample`` tokens); arrays for array inputs, NaN where infeasible."""

    workload: str
    hardware: str
    pipeline: str
    storage: str
    batch: object
    workers: object
    tokens_per_sample: object     # 1 for images
    sample_B: object              # bytes read from storage per sample
    device_B: object              # bytes copied to the accelerator per sample
    storage_sps: object
    cpu_sps: object
    link_sps: object
    accelerator_sps: object
    delivered_sps: object
    step_s: object                # roofline time of one training step at batch b
    step_flops: object            # FLOP of that step (forward + backward)
    per_worker_sps: object
    workers_needed: object
    feasible: object
    reason: str = ""

    @property
    def utilization(self):
        """Fraction of time the accelerator computes (delivered / what it could consume)."""
        return self.delivered_sps / self.accelerator_sps

    @property
    def stall_fraction(self):
        """Fraction of time the accelerator waits for input."""
        return 1.0 - self.utilization

    @property
    def tokens_per_s(self):
        """Delivered tokens per second (images per second for an image pipeline)."""
        return self.delivered_sps * self.tokens_per_sample

    @property
    def input_Bps(self):
        """Storage read rate at the delivered throughput, bytes per second."""
        return self.delivered_sps * self.sample_B

    @property
    def flop_per_input_byte(self):
        """Training FLOP spent per byte read from storage: how much work each input byte buys."""
        return self.step_flops / (self.batch * self.sample_B)

    @property
    def stages(self) -> dict:
        return {"accelerator": self.accelerator_sps, "cpu": self.cpu_sps, "storage": self.storage_sps,
                "link": self.link_sps}

    @property
    def bound(self):
        """The slowest stage: "accelerator", "cpu", "storage" or "link" ("infeasible" where it does not fit)."""
        rates = np.stack(np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in self.stages.values())))
        b = np.asarray(STAGES)[np.argmin(np.where(np.isnan(rates), np.inf, rates), axis=0)]
        b = np.where(np.isnan(np.asarray(self.delivered_sps, dtype=float)), "infeasible", b)
        return str(b) if b.ndim == 0 else b

    def rows(self) -> list[tuple[str, str]]:
        if np.ndim(self.delivered_sps):
            return [("shape", str(np.shape(self.delivered_sps))), ("reason", self.reason or "-")]
        unit = "samples/s" if self.tokens_per_sample == 1 else "seq/s"
        rate = lambda v: "unlimited" if math.isinf(v) else f"{fmt(v)} {unit}"  # noqa: E731
        return [("workload", self.workload), ("hardware", self.hardware), ("pipeline", self.pipeline),
                ("storage", self.storage), ("batch", f"{self.batch:g}"), ("workers", f"{self.workers:g}"),
                ("storage stage", rate(self.storage_sps)), ("CPU stage", rate(self.cpu_sps)),
                ("host link stage", rate(self.link_sps)), ("accelerator stage", rate(self.accelerator_sps)),
                ("delivered", rate(self.delivered_sps)), ("bound", self.bound),
                ("accelerator busy", fmt(self.utilization, "%")),
                ("workers to keep it fed", f"{self.workers_needed:g}"),
                ("storage read rate", fmt(self.input_Bps, "B/s"))]

    __repr__ = Record.__str__


# --- the solver ----------------------------------------------------------------
def _num(x):
    if type(x) in (int, float):
        return float(x)
    return float(x) if np.ndim(x) == 0 else np.asarray(x, dtype=float)


def _min(*xs):
    if all(isinstance(x, float) for x in xs):
        return min(xs)
    return np.minimum.reduce(np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in xs)))


def _sample(m, p: Pipeline, batch, seq_len):
    """Tokens, stored and device bytes per sample, samples per worker-second, and the roofline pass's arguments."""
    if p.kind == "image":
        tokens = 1.0
        sample_B, device_B, per_worker = p.stored_B, p.device_B, p.samples_per_core_s
        pass_kw = dict(batch=batch)
    else:
        tokens = 2048.0 if seq_len is None else _num(seq_len)
        sample_B = tokens * stored_bytes_per_token(m, p)
        device_B = tokens * p.device_B
        per_worker = math.inf if p.text_Bps_per_core is None else p.text_Bps_per_core / (p.text_B_per_token * tokens)
        pass_kw = dict(batch=batch, seq_len=tokens)
    return tokens, sample_B, device_B, per_worker, pass_kw


def _masked(r, whole, delivered, storage_sps, cpu_sps, link_sps):
    """Feasibility and reason of the step and the counts; the rates NaN where infeasible."""
    feasible, reason = r.feasible, r.reason
    if whole is not None:          # a fractional worker, reader, core or token count in a sweep
        feasible = np.broadcast_to(feasible, np.broadcast_shapes(np.shape(feasible), np.shape(whole),
                                                                 np.shape(delivered))) & whole
        delivered = np.where(feasible, delivered, np.nan)
        reason = "; ".join(x for x in (reason.removesuffix(" where feasible is False"), COUNTS_REASON) if x) \
            + " where feasible is False"
    if np.ndim(feasible):
        storage_sps, cpu_sps, link_sps = (np.where(feasible, np.broadcast_to(v, np.shape(feasible)), np.nan)
                                          for v in (storage_sps, cpu_sps, link_sps))
    return feasible, reason, delivered, storage_sps, cpu_sps, link_sps


def datapipe(workload, hardware, batch=256, pipeline=None, workers=8, cores=None, storage="local-nvme",
             readers=1, seq_len=None, storage_Bps=None, host_link_Bps=None, precision="bf16",
             efficiency=1.0, mem_efficiency=1.0, optimizer="adamw", accelerator_sps=None) -> DataPipe:
    """Throughput of each input-pipeline stage and what the accelerator receives (module docstring).

    Parameters
    ----------
    workload, hardware : name or record (a CNN with an image pipeline, a Transformer with a token one).
    batch : samples per accelerator per step (images, or sequences of ``seq_len`` tokens).
    pipeline : recipe in ``data/datapipe.yaml``; default ``"imagenet-ffcv"`` for a CNN, ``"tokens"``
        (pre-tokenized) for a Transformer.
    workers : data-loading workers per accelerator, one hardware thread each (whole number >= 1).
    cores : hardware threads available to this accelerator's loader (default: as many as workers).
    storage : tier name: ``"page-cache"`` or a tier of ``data/storage.yaml`` (``"local-nvme"``,
        ``"lustre"``, ``"s3"``, …); ``storage_Bps`` overrides its read bandwidth.
    readers : accelerators sharing that tier's bandwidth, client link and request rate (whole number >= 1).
    seq_len : tokens per sequence for a Transformer (default 2,048).
    host_link_Bps : host-to-device bandwidth per direction (default: the device's ``host_link_Bps``).
    precision, efficiency, mem_efficiency, optimizer : passed to the roofline training pass.
    accelerator_sps : samples per second the accelerator consumes, from a step model other than
        the one-device roofline (e.g. :func:`~mlsysim.parallel.train_step` for a model sharded
        over many GPUs); replaces the roofline pass (``step_s`` = batch / rate, ``step_flops`` NaN).

    Every numeric argument accepts an array and broadcasts. A training step that does not
    fit in device memory raises :class:`~mlsysim.errors.InfeasibleError` (scalar call) or
    comes back as NaN with ``feasible`` False (array call).

    >>> r = datapipe("resnet-50", "a100-80gb", batch=256, workers=8)
    >>> r.bound, round(r.delivered_sps), round(r.utilization, 2), r.workers_needed
    ('cpu', 2606, 0.51, 16)
    """
    m, hw = _model(workload), _hardware(hardware)
    p = _pipeline_for(m, pipeline)
    tier = input_tier(storage)
    whole = _whole(check_count("workers", workers), check_count("readers", readers),
                   None if cores is None else check_count("cores", cores),
                   None if seq_len is None else check_count("seq_len", seq_len))
    workers, readers = _num(workers), _num(readers)
    cores = workers if cores is None else _num(cores)
    check_fraction("efficiency", efficiency)
    check_fraction("mem_efficiency", mem_efficiency)
    read_Bps = tier.bandwidth_Bps if storage_Bps is None else _num(storage_Bps)
    check_positive("storage_Bps", read_Bps)
    link_Bps = hw.host_link_Bps if host_link_Bps is None else _num(host_link_Bps)
    if link_Bps is None:
        raise MlsysimError(f"{hw.name} has no host_link_Bps in the registry; pass host_link_Bps=")
    check_positive("host_link_Bps", link_Bps)

    tokens, sample_B, device_B, per_worker, pass_kw = _sample(m, p, batch, seq_len)
    if accelerator_sps is None:
        r = roofline(m, hw, precision=precision, phase="training", efficiency=efficiency,
                     mem_efficiency=mem_efficiency, optimizer=optimizer, **pass_kw)
    else:
        check_positive("batch", batch)         # an average per accelerator: global batch / GPUs
        check_positive("accelerator_sps", accelerator_sps)
        r = _Given(batch=_num(batch), time_s=_num(batch) / _num(accelerator_sps))
    by_bandwidth = read_Bps / sample_B
    storage_sps = (_min(by_bandwidth, tier.reads_per_s) if p.one_file_per_sample else by_bandwidth) / readers
    cpu_sps = _min(workers, cores) * per_worker
    link_sps = link_Bps / device_B
    acc_sps = r.batch / r.time_s
    delivered = _min(storage_sps, cpu_sps, link_sps, acc_sps)
    ratio = acc_sps / per_worker
    needed = (math.ceil(ratio - 1e-9) if math.isfinite(ratio) else math.nan) if isinstance(ratio, float) \
        else np.ceil(ratio - 1e-9)
    feasible, reason, delivered, storage_sps, cpu_sps, link_sps = _masked(
        r, whole, delivered, storage_sps, cpu_sps, link_sps)
    return DataPipe(workload=m.name, hardware=hw.name, pipeline=p.name, storage=tier.name, batch=r.batch,
                    workers=workers, tokens_per_sample=tokens, sample_B=sample_B, device_B=device_B,
                    storage_sps=storage_sps, cpu_sps=cpu_sps, link_sps=link_sps, accelerator_sps=acc_sps,
                    delivered_sps=delivered, step_s=r.time_s, step_flops=r.flops, per_worker_sps=per_worker,
                    workers_needed=0.0 if math.isinf(per_worker) else needed, feasible=feasible,
                    reason=reason)


@dataclass(frozen=True)
class _Given:
    """A training step whose rate comes from the caller instead of the roofline."""

    batch: object
    time_s: object
    flops: float = math.nan
    feasible: bool = True
    reason: str = ""


def _pipeline_for(m, name) -> Pipeline:
    if name is None:
        name = "imagenet-ffcv" if isinstance(m, CNN) else "tokens"
    p = pipeline(name)
    want = "image" if isinstance(m, CNN) else "token"
    if isinstance(m, Transformer) != (p.kind == "tokens"):
        raise MlsysimError(f"{m.name} needs a pipeline of {want}s; {p.name!r} carries {p.kind}s")
    return p
