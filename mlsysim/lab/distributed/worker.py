"""One rank of the distributed lab's job: ``torchrun --nproc-per-node N -m mlsysim.lab.distributed.worker``.

Needs the optional extra (PyTorch). Every rank builds the lab's transformer
(:class:`~mlsysim.lab.pytorch.train.TinyDecoder`) from the same seed, then either shards it with FSDP2 (``--mode
fsdp``: ``fully_shard`` on each block and on the root, so every rank holds ``ceil(rows / N)`` rows of each
parameter and of AdamW's two moments) or replicates it with DDP (``--mode ddp``). The global batch of ``batch``
windows comes from the lab's :class:`~mlsysim.lab.pytorch.train.ResumableSampler` (seeded, resumable); rank ``r``
trains on its ``batch / N`` windows ``[r b/N, (r + 1) b/N)``, so a run at N = 4 and one at N = 2 see the same data
at every step. Gradients are averaged over the ranks (FSDP2's reduce-scatter, DDP's all-reduce) and the step's loss
is the mean of the ranks' losses (an all-reduce), so the runs differ only in the order of their floating-point
reductions. Dropout is off: its masks would depend on which rank draws them.

Checkpoints every ``--every`` steps with ``--engine``:

* ``sync`` / ``concurrent`` — this package's engines (:mod:`mlsysim.lab.engines`), one per rank, each writing only
  the rank's own shard (the local tensors of the DTensors and its part of the optimizer state) into ``rank-<r>/``
  (:mod:`mlsysim.lab.distributed.shards`). Once a rank's shard is durable, it sends its shard record to rank 0
  (``gather_object`` on a process group of its own, so that a background writer never interleaves with training's
  collectives); rank 0 writes the global commit record, then prunes.
* ``dcp`` / ``dcp-async`` — PyTorch's ``dcp.save`` / ``dcp.async_save`` of ``get_state_dict`` (through
  :class:`~mlsysim.lab.pytorch.engines.DcpEngine`), loaded with DCP's own resharding.

**Tiers** (:mod:`mlsysim.lab.distributed.tiers`; with ``--memory-root`` and this package's engines). At every
checkpoint a second engine of the same kind writes the rank's shard into its node's memory tier,
``<memory-root>/<node>/rank-<r>/`` (the node is ``$MLSYSIM_NODE``, set per agent): ``concurrent`` snapshots it in
the training loop and does the rest in the background. Once the shard is there, the rank exchanges the file with
its counterpart on the next node (``isend`` / ``irecv`` of its bytes on a third process group, the tiers' own),
which writes it into its own node's memory tier as a replica; the ranks all-gather their shard records, each node's
first rank writes the node's global record (the shards it wrote, those it holds as replicas) and prunes the node's
older checkpoints, and a barrier makes the checkpoint complete on every node (``{"memory": s, "memory_s": x}``, x:
seconds from the snapshot until then). Every ``--persist-every``-th checkpoint also goes to durable storage as
above.

**Resume.** On start every rank lists its node's memory tier and the ranks all-gather what each node holds. The
newest memory checkpoint that the live nodes hold completely and that is not older than the newest durable global
commit is loaded from memory: a shard missing on a node (a replacement joins with an empty memory tier) is first
read by a rank of a node that holds it and sent point to point
(:func:`mlsysim.lab.distributed.tiers.plan_recovery`); each rank then reads and verifies (size, CRC-32) what it
needs from its own node's memory. Else the job reads the newest global checkpoint of durable storage that every
rank verifies (dropping the files' cached pages first, as on a machine that never held them), skipping one that a
rank cannot verify with a warning naming the shard; else it starts from scratch. Any world size can load any
checkpoint (FSDP's rows are re-cut, :func:`mlsysim.lab.distributed.shards.read_for_rank`). Bytes are counted per
tier: read from durable storage, read from memory, received from a peer.

Output: JSON lines on stdout. Every rank prints ``{"start": attempt, "rank": r, "pid": p, "node": n}`` (attempt: the
largest restart count of the ranks' agents); rank 0 prints ``{"warning": ...}``, ``{"resumed_from": s or null,
"source": "memory" | "peer-memory" | "storage" | null, "bytes_read": [...], "storage_bytes": [...], "memory_bytes":
[...], "peer_bytes": [...], "recovery_s": x, ...}`` (per rank; ``recovery_s``: the slowest rank's seconds from the
start of loading to training resumed), ``{"step": s, "loss": "<float.hex>", "t": clock}``, ``{"commit": s,
"durable_s": y, "shard_s": z}`` (z: when rank 0's own shard was durable; this package's engines only), ``{"memory":
s, "memory_s": x}``, ``{"checksums": s, "crc32": {key: crc}}`` (with ``--checksums``: CRC-32 of every full, gathered
tensor at each checkpoint and after loading), ``{"done": true, ...}`` and, with ``--probe-terms N``, ``{"job_terms":
{...}}`` (:func:`mlsysim.lab.distributed.in_job.time_terms`, timed N times once the last checkpoint is durable).

``--pause POINT@STEP:RANK[,...]`` — the i-th item applies to the i-th attempt of the job and stops rank RANK (SIGSTOP,
under its engine's lock) at POINT of step STEP, printing ``{"paused": POINT, "step": s, "rank": r, "pid": p, "node":
n}``, so that the driver can SIGKILL it exactly there: ``step`` (after the backward pass, before the update),
``between`` (after the step and its checkpoint call), ``snapshot`` and ``persist`` (inside the engine), ``shard`` (the
rank's shard is durable, the global commit not yet written), ``commit`` (after the global commit, rank 0) and
``memory`` (the memory checkpoint is complete on every node); for a node only, ``stored`` (``memory``, and durable
storage holds the global commit of the newest checkpoint up to this one that goes there). ``-`` skips an attempt.
``--node-pause NODE=POINT@STEP[,...]`` stops the first rank of node NODE there, whatever the attempt.
Under :mod:`mlsysim.lab.distributed.launcher` (torchrun with ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``)
rank 0 hosts a new store for the workers in every round of the rendezvous (:func:`init`); the
agents of two nodes count their restarts apart, so the attempt is the largest count.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from .. import store
from ..checksum import crc32
from . import accounting, peer, shards, tiers
from .checks import KEEP
from ..engines import make_engine
from ..runner import _say, stop_here
from ..pytorch.train import (ResumableSampler, TinyDecoder, TorchConfig, Windows, _Schedule, deterministic,
                             no_fill_of_new_tensors, rng_state, set_rng_state)

POINTS = ("step", "between", "snapshot", "persist", "shard", "commit", "memory", "stored")
MODES = ("fsdp", "ddp")
ENGINES = ("sync", "concurrent", "dcp", "dcp-async")
NEVER_PRUNE = 10 ** 9     # the engines keep every shard: pruning waits for the global commit
PREPARE_SLACK_B = 1 << 16  # room in each snapshot buffer for a header that grows by a few bytes


def lab_config(steps: int, batch: int = 8, seed: int = 0, d_model: int = 32, layers: int = 2) -> TorchConfig:
    """The distributed lab's model: small, dropout off, one thread per rank."""
    heads = max(2, d_model // 16)
    return TorchConfig(layers=layers, d_model=d_model, heads=heads, kv_heads=heads // 2, d_ff=3 * d_model // 2,
                       context=16, batch=batch, steps=steps, warmup=min(2, steps), dropout=0.0, seed=seed,
                       threads=1)


def fast_deterministic(threads: int) -> None:
    """:func:`~mlsysim.lab.pytorch.train.deterministic` without its 2 s import of TorchInductor's
    config (``torch.use_deterministic_algorithms`` sets a flag there; eager mode does not need it):
    deterministic kernels, no NaN fill of new tensors and ``threads`` CPU threads. Falls back to
    it where the flag moved."""
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:
        deterministic(threads)
        return
    setter(True, warn_only=False)
    no_fill_of_new_tensors()
    torch.set_num_threads(threads)


class Job:
    """One rank: model, AdamW, schedule, sampler; :meth:`step` trains on its part of the global batch."""

    def __init__(self, cfg: TorchConfig, mode: str):
        self.cfg, self.mode = cfg, mode
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        fast_deterministic(cfg.threads)
        torch.manual_seed(cfg.seed)
        np.random.seed(cfg.seed)
        self.model = TinyDecoder(cfg)            # the same initial weights on every rank
        if mode == "fsdp":
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard
            self.mesh = init_device_mesh("cpu", (self.world,), mesh_dim_names=("dp",))
            for blk in self.model.blocks:
                fully_shard(blk, mesh=self.mesh)
            fully_shard(self.model, mesh=self.mesh)
            self.net = self.model
        else:
            from torch.nn.parallel import DistributedDataParallel
            self.net = DistributedDataParallel(self.model)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8,
                                           weight_decay=cfg.weight_decay, foreach=False)
        for p in self.model.parameters():          # AdamW's moments exist from the start (full-size state)
            self.optimizer.state[p] = {"step": torch.tensor(0.0), "exp_avg": torch.zeros_like(p),
                                       "exp_avg_sq": torch.zeros_like(p)}
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, _Schedule(cfg))
        self.data = Windows(cfg.context)
        self.sampler = ResumableSampler(len(self.data), cfg.batch, cfg.seed)
        self._batches = None
        self.step_count = 0
        self.hook = None

    def step(self) -> float:
        """Train one global batch; returns the mean of the ranks' losses (before the update)."""
        if self._batches is None:
            self._batches = iter(self.sampler)
        idx = next(self._batches)
        per = self.cfg.batch // self.world
        mine = idx[self.rank * per:(self.rank + 1) * per]
        x = torch.stack([self.data[i][0] for i in mine])
        y = torch.stack([self.data[i][1] for i in mine])
        self.net.train()
        loss = F.cross_entropy(self.net(x).flatten(0, 1), y.flatten())
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.hook is not None:
            self.hook("step", self.step_count + 1)
        self.optimizer.step()
        self.scheduler.step()
        self.step_count += 1
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        return (mean / self.world).item()

    # --- state ---
    def tensors(self) -> dict:
        """{key: live tensor (a DTensor under FSDP2)} for the weights and AdamW's moments and steps."""
        out = {}
        for name, p in self.model.named_parameters():
            st = self.optimizer.state[p]
            out[f"model/{name}"] = p
            out[f"optim/{name}/exp_avg"] = st["exp_avg"]
            out[f"optim/{name}/exp_avg_sq"] = st["exp_avg_sq"]
            out[f"optim/{name}/step"] = st["step"]
        return out

    def shared(self) -> dict:
        """Values every rank holds alike: step, config, schedule counters, sampler, learning rates."""
        return {"step": self.step_count, "config": asdict(self.cfg), "mode": self.mode,
                "scheduler": {k: v for k, v in self.scheduler.state_dict().items() if k != "lr_lambdas"},
                "sampler": self.sampler.state_dict(),
                "param_groups": [{k: v for k, v in g.items() if k != "params"} for g in self.optimizer.param_groups]}

    def shard_state(self) -> tuple[dict, dict]:
        """This rank's shard (state for an engine) and the :class:`ShardSpec` of each tensor in it."""
        from torch.distributed.tensor import DTensor, Shard
        local, specs = {}, {}
        for key, t in self.tensors().items():
            if isinstance(t, DTensor):
                spec = shards.partition(t.shape, self.world)[self.rank]
                piece = t.to_local()
                if tuple(piece.shape) != spec.local_shape or t.placements != (Shard(0),):
                    raise RuntimeError(f"{key}: FSDP2 holds {tuple(piece.shape)} as {t.placements}, "
                                       f"the partition says {spec}")
            else:
                spec = shards.partition(t.shape, self.world, shards.REPLICATE)[self.rank]
                piece = t
                if spec.local_shape != tuple(t.shape):
                    continue                    # replicated: rank 0 stores it
            local[key], specs[key] = piece, spec
        state = {"tensors": local, "shared": self.shared(), "rank_state": {"rng": rng_state()}}
        return state, specs

    def load(self, got: shards.RankLoad) -> None:
        """Copy a rank's pieces into the live (sharded) tensors, then the schedule, sampler, learning rates."""
        from torch.distributed.tensor import DTensor
        cfg = TorchConfig(**got.shared["config"])
        if cfg != self.cfg:
            raise RuntimeError(f"the checkpoint was taken with another config: {asdict(cfg)}")
        with torch.no_grad():
            for key, t in self.tensors().items():
                dst = t.to_local() if isinstance(t, DTensor) else t
                dst.copy_(got.tensors[key].reshape(dst.shape))
        for g, saved in zip(self.optimizer.param_groups, got.shared["param_groups"]):
            g.update(saved)
        self.scheduler.load_state_dict({**self.scheduler.state_dict(), **got.shared["scheduler"]})
        self.sampler.load_state_dict(got.shared["sampler"])
        self._batches = None
        if got.rank_state is not None:
            set_rng_state(got.rank_state["rng"])
        self.step_count = int(got.shared["step"])

    def checksums(self) -> dict:
        """CRC-32 of every full (gathered) tensor's bytes (a collective: every rank calls it)."""
        from torch.distributed.tensor import DTensor
        out = {}
        for key, t in self.tensors().items():
            full = t.full_tensor() if isinstance(t, DTensor) else t
            out[key] = crc32(full.detach().contiguous().numpy().tobytes())
        return out

    def dcp_state(self) -> dict:
        from torch.distributed.checkpoint.state_dict import get_state_dict
        model_sd, optim_sd = get_state_dict(self.model, self.optimizer)
        return {"model": model_sd, "optim": optim_sd,
                "extra": {"step": torch.tensor(self.step_count),
                          "epoch": torch.tensor(self.sampler.epoch), "position": torch.tensor(self.sampler.position),
                          "last_epoch": torch.tensor(self.scheduler.last_epoch)}}

    def load_dcp_state(self, state) -> None:
        from torch.distributed.checkpoint.state_dict import set_state_dict
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        e = state["extra"]
        self.step_count = int(e["step"])
        self.sampler.load_state_dict({"epoch": int(e["epoch"]), "position": int(e["position"])})
        self.scheduler.load_state_dict({**self.scheduler.state_dict(), "last_epoch": int(e["last_epoch"]),
                                        "_step_count": int(e["last_epoch"]) + 1})
        self._batches = None


def _empty(shape, like):
    return torch.empty(shape, dtype=like.dtype)


def _agree(error, group) -> list:
    """Every rank's error (None where it had none): a collective, so every rank decides alike."""
    errors = [None] * dist.get_world_size()
    dist.all_gather_object(errors, error, group=group)
    return sorted({e for e in errors if e})


def _warn(msg: str) -> None:
    if dist.get_rank() == 0:
        warnings.warn(msg, store.CheckpointWarning, stacklevel=3)
        _say(warning=msg)


def read_storage(directory, job: Job, group, cold: bool = False):
    """Read (not yet load) the newest global checkpoint of durable storage that every rank verifies:
    its :class:`~mlsysim.lab.distributed.shards.RankLoad` for this rank, or None. ``cold``: drop the files'
    cached pages before reading them."""
    for step in reversed(shards.global_steps(directory)):
        error, got = None, None
        try:
            record = shards.read_global(directory, step)
            got = shards.read_for_rank(directory, record, job.world, job.rank, _empty, cold=cold)
        except store.CheckpointError as e:
            error = str(e)
        bad = _agree(error, group)
        if bad:
            _warn(f"skipping global checkpoint {step}: " + "; ".join(bad))
            continue
        return got
    return None


def resume(directory, job: Job, group, cold: bool = False) -> tuple[int | None, list]:
    """Load the newest global checkpoint of durable storage that every rank verifies; returns (its
    step or None, bytes read per rank)."""
    got = read_storage(directory, job, group, cold)
    if got is None:
        return None, [0] * job.world
    job.load(got)
    nbytes = [0] * job.world
    dist.all_gather_object(nbytes, got.bytes_read, group=group)
    return got.step, nbytes


class MemoryTier:
    """This rank's part of the memory and peer-memory tiers (:mod:`mlsysim.lab.distributed.tiers`): its
    node's directory, the peer that holds its replica, the rank whose replica it holds, and an
    engine of the run's kind (``concurrent``: the snapshot in the training loop, the rest in the
    background) that writes the shard into the node's memory and then, in :meth:`_commit`,
    exchanges it with the peer, gathers the shard records and writes the node's record."""

    def __init__(self, root, node: str, layout: tuple, group, run_id: str, mode: str, kind: str, hook):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.node, self.layout, self.group, self.run_id, self.mode = node, layout, group, run_id, mode
        self.dir = tiers.node_dir(root, node)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.peer = tiers.peer(layout, self.rank)
        self.source = tiers.replica_source(layout, self.rank)
        ranks = tiers.node_ranks(layout)[node]
        self.lead = self.rank == ranks[0]                        # writes the node's record
        self.own = ranks
        self.replicas = tuple(tiers.replica_source(layout, r) for r in ranks) if self.peer is not None else ()
        self.hook = hook
        self.transfer_s = 0.0                                    # of the last recovery
        self.specs: dict = {}
        self.started: dict = {}
        self.seconds: dict = {}                                  # step -> seconds until complete on every node
        extra = {"buffers": 2, "writers": 1} if kind == "concurrent" else {}
        self.engine = make_engine(kind, shards.rank_dir(self.dir, self.rank), keep=NEVER_PRUNE,
                                  on_commit=self._commit, **extra)

    def _write(self, owner: int, step: int, data: np.ndarray) -> None:
        d = shards.rank_dir(self.dir, owner)
        d.mkdir(exist_ok=True)
        size, crc = store.write_durable(d / store.data_name(step), [data])
        store.commit(d, step, size, crc)

    def _exchange(self, data: np.ndarray) -> np.ndarray:
        """Send this rank's file to its peer and receive the one it holds a replica of (sizes first)."""
        n_out, n_in = torch.tensor([data.size], dtype=torch.int64), torch.zeros(1, dtype=torch.int64)
        for w in (dist.isend(n_out, self.peer, group=self.group), dist.irecv(n_in, self.source, group=self.group)):
            w.wait()
        got = torch.empty(int(n_in.item()), dtype=torch.uint8)
        for w in (dist.isend(torch.from_numpy(data), self.peer, group=self.group),
                  dist.irecv(got, self.source, group=self.group)):
            w.wait()
        return got.numpy()

    def save(self, step: int, state: dict, specs: dict) -> float:
        """Checkpoint ``step`` into the memory tiers; returns the training stall in seconds."""
        self.specs[step], self.started[step] = specs, time.perf_counter()
        return self.engine.save(step, state)

    def _commit(self, step: int) -> None:
        """The engine's ``on_commit``: this rank's shard is in its node's memory; replicate it, record it."""
        if self.peer is not None:
            path = shards.rank_dir(self.dir, self.rank) / store.data_name(step)
            self._write(self.source, step, self._exchange(np.fromfile(path, dtype=np.uint8)))
        rec = shards.shard_record(self.dir, step, self.rank, self.world, self.mode, self.specs.pop(step))
        records = [None] * self.world
        dist.all_gather_object(records, rec, group=self.group)   # every rank's files are written
        if self.lead:
            shards.write_global_commit(self.dir, step, records, self.run_id,
                                           extra=tiers.node_record(self.node, self.own, self.replicas))
            shards.prune(self.dir, keep=1)
        dist.barrier(group=self.group)                           # every node's record is written
        self.seconds[step] = time.perf_counter() - self.started.pop(step)
        if self.rank == 0:
            _say(memory=step, memory_s=self.seconds[step])
        self.hook("memory", step)

    def close(self) -> list:
        """Wait for the checkpoints in flight; returns each one's (stall, seconds until complete)."""
        self.engine.close()
        return [(r.stall_s, self.seconds.get(r.step)) for r in self.engine.summary()]

    def _send(self, record: dict, shard: int, dst: int) -> tuple[int, str | None]:
        """Send old rank ``shard``'s file of ``record`` from this node's memory to rank ``dst``
        (:func:`~mlsysim.lab.distributed.peer.send_file`), its CRC-32 checked against the record on the way;
        returns (bytes, the error or None)."""
        entry = record["shards"][shard]
        crc, error = peer.send_file(self.dir / entry["file"], entry["size_B"], dst, self.group)
        if error is None and crc != entry["crc32"]:
            error = f"{self.dir / entry['file']}: checksum mismatch (corrupt)"
        return entry["size_B"], None if error is None else f"shard of rank {shard} of {record['world_size']}: {error}"

    def _receive(self, record: dict, shard: int, src: int, step: int) -> str | None:
        """Receive old rank ``shard``'s file of ``record`` from rank ``src`` into this node's memory
        (:func:`~mlsysim.lab.distributed.peer.receive_file`); committed if its CRC-32 is the record's, else the
        error."""
        size = record["shards"][shard]["size_B"]
        d = shards.rank_dir(self.dir, shard)
        d.mkdir(exist_ok=True)
        got, crc = peer.receive_file(d / store.data_name(step), size, src, self.group)
        if got != size or crc != record["shards"][shard]["crc32"]:
            return f"shard of rank {shard} of {record['world_size']}: received {got} B that fail the record's CRC-32"
        store.commit(d, step, got, crc)
        return None

    def read(self, holdings: list, records: dict, storage_step: int | None):
        """Read (not yet load) the newest memory checkpoint the live nodes hold completely, sending and
        receiving the shards a node lacks; returns (:class:`~mlsysim.lab.distributed.shards.RankLoad`, source,
        memory bytes, peer bytes), or None (then durable storage)."""
        for step in tiers.memory_candidates(holdings, storage_step):
            record = records[step]
            needs = [set(shards.files_for(record, self.world, r)) for r in range(self.world)]
            plan = tiers.plan_recovery(step, needs, self.layout, holdings)
            mem_B = peer_B = 0
            error, got = None, None
            t0 = time.perf_counter()
            for t in plan.transfers:                  # the same order on every rank: no deadlock
                if t.src == self.rank:
                    sent, bad = self._send(record, t.shard, t.dst)
                    error, mem_B = error or bad, mem_B + sent
                elif t.dst == self.rank:
                    error = self._receive(record, t.shard, t.src, step) or error
                    peer_B += record["shards"][t.shard]["size_B"]
            try:
                dist.barrier(group=self.group)        # every received file is written
                self.transfer_s = time.perf_counter() - t0
                if error is None:
                    got = shards.read_for_rank(self.dir, record, self.world, self.rank, _empty, mapped=True)
            except store.CheckpointError as e:
                error = str(e)
            bad = _agree(error, self.group)
            if bad:
                _warn(f"skipping memory checkpoint {step}: " + "; ".join(bad))
                continue
            return got, plan.source, mem_B + got.bytes_read, peer_B
        return None


def recover(directory, job: Job, memory_tier: MemoryTier | None, group) -> dict:
    """Resume ``job``: from memory (own node, or a peer's replica), else durable storage, else
    nothing. Returns rank 0's event: step, source, bytes per rank and tier, and the slowest rank's
    seconds in all and by phase (``survey``: what the nodes hold; ``transfer``: the shards sent to
    nodes that lacked them, until all are written; ``read``: reads and checks; ``load``: into the
    model, until every rank is done)."""
    world = job.world
    t0 = time.perf_counter()
    holdings, records = [], {}
    if memory_tier is not None:
        mine = tiers.survey(memory_tier.dir) if memory_tier.lead else []
        everyone = [None] * world
        dist.all_gather_object(everyone, mine, group=group)
        for part in everyone:
            for h, rec in part:
                holdings.append(h)
                records.setdefault(h.step, rec)
    durable = shards.global_steps(directory)
    t1 = time.perf_counter()
    found = memory_tier.read(holdings, records, durable[-1] if durable else None) if memory_tier is not None else None
    storage_B = mem_B = peer_B = 0
    if found is not None:
        got, source, mem_B, peer_B = found
    else:
        got = read_storage(directory, job, group, cold=True)
        source = None if got is None else "storage"
        storage_B = 0 if got is None else got.bytes_read
    t2 = time.perf_counter()
    if got is not None:
        job.load(got)
    dist.barrier(group=group)
    t3 = time.perf_counter()
    per = [None] * world
    transfer = memory_tier.transfer_s if found is not None else 0.0
    dist.all_gather_object(per, (storage_B, mem_B, peer_B, t3 - t0, t1 - t0, transfer, t2 - t1 - transfer, t3 - t2),
                           group=group)
    return {"resumed_from": None if got is None else got.step, "source": source,
            "bytes_read": [p[0] + p[1] for p in per], "storage_bytes": [p[0] for p in per],
            "memory_bytes": [p[1] for p in per], "peer_bytes": [p[2] for p in per],
            "recovery_s": max(p[3] for p in per),
            "phases_s": {k: max(p[i] for p in per) for i, k in enumerate(("survey", "transfer", "read", "load"),
                                                                          start=4)}}


def init(attempt: int, timeout: timedelta):
    """``init_process_group("gloo")`` on the rendezvous' store. Where the workers share the agent's
    store (torchrun's default on one node) it outlives restarts, so the group's keys go under a
    prefix of the attempt (a restarted group that read the previous attempt's addresses of a
    second process group would connect to dead ranks); where they do not, rank 0 hosts a new
    store at a new port for every round of the rendezvous."""
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    base = dist.TCPStore(host, port, world_size=world, is_master=not agent and rank == 0, timeout=timeout,
                         multi_tenant=True)
    prefix = f"mlsysim-attempt-{attempt}" if agent else "mlsysim"
    dist.init_process_group("gloo", store=dist.PrefixStore(prefix, base), rank=rank, world_size=world,
                            timeout=timeout)
    return base


def _wait_stored(directory, step: int, timeout_s: float) -> None:
    """Wait (at most ``timeout_s``) until durable storage holds a global commit of ``step`` or a
    newer one (none is awaited for step 0); the other ranks' writes go on meanwhile."""
    deadline = time.monotonic() + timeout_s
    while step > 0 and max(shards.global_steps(directory), default=0) < step:
        if time.monotonic() > deadline:
            raise RuntimeError(f"global checkpoint {step} not in {directory} within {timeout_s:.0f} s")
        time.sleep(0.01)


def _node_pauses(text: str) -> dict:
    """``NODE=POINT@STEP[,...]`` -> {node: (point, step)}."""
    out = {}
    for item in filter(None, text.split(",")):
        node, _, spec = item.partition("=")
        point, _, at = spec.partition("@")
        out[node] = (point, int(at))
    return out


@dataclass(frozen=True)
class _Rank:
    """What the phases of :func:`main` share: the arguments, this rank's place, groups, job and pauses."""
    a: argparse.Namespace
    rank: int
    world: int
    node: str
    layout: tuple             # each rank's node
    group: object             # durable checkpoints only
    tier_group: object        # memory tiers only
    persist: int              # the checkpoints that also go to durable storage: its multiples
    own: bool                 # this package's engines (sync, concurrent), else DCP's
    job: Job
    run_id: str
    pause: tuple              # (point, step, rank) of this attempt's --pause
    node_pause: tuple         # (point, step) of --node-pause, for the node's first rank
    pausing: bool             # a pause in the engine (else no engine hook: save never waits for a commit's lock)
    started: dict = field(default_factory=dict)    # step -> when its checkpoint began
    pending: dict = field(default_factory=dict)    # step -> the specs of its shard, until durable
    stalls: dict = field(default_factory=dict)     # step -> the durable engine's stall

    def planned(self, name: str, step: int) -> bool:
        """A pause at ``name`` of ``step`` is planned for this rank."""
        return (name, step, self.rank) == self.pause or (name, step) == self.node_pause

    def hook(self, name: str, step: int) -> None:
        """Stop (SIGSTOP) where planned; ``memory`` turns ``stored`` once durable storage holds its step."""
        if name == "memory" and self.node_pause == ("stored", step):
            _wait_stored(self.a.dir, step - step % self.persist, self.a.timeout)
            name = "stored"
        if self.planned(name, step):
            _say(paused=name, step=step, rank=self.rank, pid=os.getpid(), node=self.node)
            stop_here()


def _setup(a, restart: int) -> _Rank | None:
    """Every rank's start, the groups, the job, the claimed directory; None where the batch does not split."""
    rank, world = dist.get_rank(), dist.get_world_size()
    node = tiers.node_name()
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    info = [None] * world
    dist.all_gather_object(info, (restart, node))
    attempt, layout = max(i[0] for i in info), tuple(i[1] for i in info)   # agents restart apart
    _say(start=attempt, rank=rank, pid=os.getpid(), node=node)
    plan, pause = a.pause.split(",") if a.pause else [], ("", -1, -1)
    if attempt < len(plan) and plan[attempt] != "-":
        spec, _, who = plan[attempt].partition(":")
        point, _, at = spec.partition("@")
        pause = point, int(at), int(who or 0)
    node_pause = _node_pauses(a.node_pause).get(node, ("", -1)) if local_rank == 0 else ("", -1)
    if a.batch % world:
        if rank == 0:
            sys.stderr.write(f"error: the global batch of {a.batch} windows cannot be split evenly over "
                             f"{world} ranks\n")
        dist.destroy_process_group()
        return None
    group = dist.new_group(backend="gloo", timeout=timedelta(seconds=a.timeout))   # durable checkpoints only
    tier_group = dist.new_group(backend="gloo", timeout=timedelta(seconds=a.timeout))   # memory tiers only
    cfg = lab_config(a.steps, a.batch, a.seed, a.d_model, a.layers)
    job = Job(cfg, a.mode)
    own = a.engine in ("sync", "concurrent")
    identity = {"format": "mlsysim" if own else "dcp", "mode": a.mode, "config": asdict(cfg)}
    if rank == 0:
        shards.claim(a.dir, identity)
    dist.barrier()
    return _Rank(a=a, rank=rank, world=world, node=node, layout=layout, group=group, tier_group=tier_group,
                 persist=a.every * max(1, a.persist_every), own=own, job=job,
                 run_id=json.dumps(identity, sort_keys=True), pause=pause, node_pause=node_pause,
                 pausing=rank == pause[2] and pause[0] in ("snapshot", "persist"))


def _own_engine(r: _Rank) -> tuple:
    """This package's engine and memory tier, then the resume: (engine, memory tier or None, event)."""
    a, rank, world = r.a, r.rank, r.world

    def on_commit(step: int) -> None:          # under the engine's lock, the shard just made durable
        shard_s = time.perf_counter() - r.started[step]
        rec = shards.shard_record(a.dir, step, rank, world, a.mode, r.pending.pop(step))
        r.hook("shard", step)
        records = [None] * world if rank == 0 else None
        dist.gather_object(rec, records, dst=0, group=r.group)
        if rank == 0:
            shards.write_global_commit(a.dir, step, records, r.run_id)
            _say(commit=step, durable_s=time.perf_counter() - r.started[step], shard_s=shard_s)
            r.hook("commit", step)
            shards.prune(a.dir, a.keep)

    def engine_hook(name: str, step: int) -> None:
        if name in ("snapshot", "persist"):
            r.hook(name, step)

    extra = {"buffers": 2, "writers": 1} if a.engine == "concurrent" else {}
    engine = make_engine(a.engine, shards.rank_dir(a.dir, rank), keep=NEVER_PRUNE,
                         hook=engine_hook if r.pausing else None, on_commit=on_commit, **extra)
    memory_tier = (MemoryTier(a.memory_root, r.node, r.layout, r.tier_group, r.run_id, a.mode, a.engine, r.hook)
                   if a.memory_root else None)
    event = recover(a.dir, r.job, memory_tier, r.tier_group)
    if a.engine == "concurrent":     # allocate and touch the snapshot buffers now, as an engine does at start
        t_prep = time.perf_counter()
        state, _ = r.job.shard_state()
        size = store.layout(state, 0).size_B + PREPARE_SLACK_B
        for e in [engine] + ([memory_tier.engine] if memory_tier is not None else []):
            e.prepare(size)
        if rank == 0:
            _say(prepared_s=time.perf_counter() - t_prep, buffer_B=size)
    return engine, memory_tier, event


def _dcp_engine(r: _Rank) -> tuple:
    """DCP's engine (made one rank at a time), then the resume from storage: (engine, None, event)."""
    from ..pytorch.engines import DcpEngine, load_latest, newest_path
    a, rank, world = r.a, r.rank, r.world

    def on_dcp_commit(step: int) -> None:
        if rank == 0:
            _say(commit=step, durable_s=time.perf_counter() - r.started[step])
        r.hook("commit", step)

    engine = None
    for i in range(world):   # one rank at a time: the engine probes the shared directory with a file
        if i == rank:
            engine = DcpEngine(a.dir, keep=a.keep, asynchronous=a.engine == "dcp-async",
                               hook=(lambda n, s: r.hook(n, s) if n in ("snapshot", "persist") else None)
                               if r.pausing else None, on_commit=on_dcp_commit, process_group=r.group)
        dist.barrier()
    t0 = time.perf_counter()
    resumed_from, nbytes = None, [0] * world
    if newest_path(a.engine, a.dir) is not None:
        loaded = load_latest(a.engine, a.dir, template=r.job.dcp_state())
        r.job.load_dcp_state(loaded.state)
        resumed_from = loaded.step
        nbytes = [loaded.size_B] * world
    event = {"resumed_from": resumed_from, "source": None if resumed_from is None else "storage",
             "bytes_read": nbytes, "storage_bytes": nbytes, "memory_bytes": [0] * world,
             "peer_bytes": [0] * world, "recovery_s": time.perf_counter() - t0}
    return engine, None, event


def _resume(r: _Rank) -> tuple:
    """Make the engine and resume; rank 0 prints the resume event. Returns (engine, memory tier or None)."""
    engine, memory_tier, event = (_own_engine if r.own else _dcp_engine)(r)
    if r.rank == 0:
        params = sum(p.numel() for p in r.job.model.parameters())
        _say(**event, world_size=r.world, nodes=len(set(r.layout)), params=params)
    resumed_from = event["resumed_from"]
    if r.a.checksums and resumed_from is not None:
        sums = r.job.checksums()
        if r.rank == 0:
            _say(loaded_checksums=resumed_from, crc32=sums)
    return engine, memory_tier


def _checkpoint(r: _Rank, s: int, engine, memory_tier: MemoryTier | None) -> None:
    """Checkpoint step ``s``: into the memory tier, and into durable storage where ``s`` is persisted."""
    if r.a.checksums:
        sums = r.job.checksums()
        if r.rank == 0:
            _say(checksums=s, crc32=sums)
    r.started[s] = time.perf_counter()
    if r.own:
        state, specs = r.job.shard_state()
        if memory_tier is not None:
            memory_tier.save(s, state, specs)
        if s % r.persist == 0:
            r.pending[s] = specs
            r.stalls[s] = engine.save(s, state)
    else:
        r.stalls[s] = engine.save(s, r.job.dcp_state())


def _train(r: _Rank, engine, memory_tier: MemoryTier | None) -> None:
    """Train up to ``--steps`` (or ``--stop-after``), rank 0 printing each loss, checkpointing every ``--every``."""
    job, a, lock = r.job, r.a, engine.lock

    def locked(name: str, step: int) -> None:
        if r.planned(name, step):
            with lock:                             # the lock only where a pause is planned
                r.hook(name, step)

    job.hook = locked
    last = a.steps if a.stop_after is None else min(a.steps, a.stop_after)
    while job.step_count < last:
        t_step = time.perf_counter()
        loss = job.step()
        s = job.step_count
        if r.rank == 0:
            _say(step=s, loss=loss.hex(), step_s=time.perf_counter() - t_step, t=time.perf_counter(),
                 cpu=time.process_time(), acct=accounting.snapshot())
        if s % a.every == 0 and s > a.plain_steps:
            _checkpoint(r, s, engine, memory_tier)
        locked("between", s)


def _finish(r: _Rank, engine, memory_tier: MemoryTier | None) -> None:
    """Wait for the checkpoints in flight, rank 0 prints the stalls, destroy the process group."""
    memory = memory_tier.close() if memory_tier is not None else []
    engine.close()
    dist.barrier()
    if r.rank == 0:
        _say(done=True, stall_s=[x.stall_s for x in engine.summary()], memory_stall_s=[m[0] for m in memory],
             memory_s=[m[1] for m in memory])
    if r.a.probe_terms:                            # the job's own terms, its checkpoints all durable
        from .in_job import time_terms
        terms = time_terms(r.group, r.job, r.a.dir, r.own, r.a.probe_terms, r.a.every,
                           getattr(engine, "writer_cpu_s", None))      # DCP's writer: its CPU at each checkpoint
        if memory_tier is not None and memory_tier.peer is not None:     # the recovery's transfer, a node lost
            terms.update(peer.probe_transfer(memory_tier.group, memory_tier.dir, memory_tier.layout, r.a.probe_terms))
        if r.rank == 0:
            _say(job_terms=terms)
    r.stalls.clear()
    dist.destroy_process_group()


def main(argv=None) -> int:
    """One rank's job: parse, join and set up, resume, train and checkpoint, report; the exit status."""
    p = argparse.ArgumentParser(prog="torchrun ... -m mlsysim.lab.distributed.worker")
    p.add_argument("--dir", required=True)
    p.add_argument("--mode", choices=MODES, default="fsdp")
    p.add_argument("--engine", choices=ENGINES, default="sync")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--stop-after", type=int, default=None, help="end cleanly after this step (its checkpoint done)")
    p.add_argument("--every", type=int, default=2)
    p.add_argument("--plain-steps", type=int, default=0, help="train this many steps before the first checkpoint")
    p.add_argument("--persist-every", type=int, default=1, help="every k-th checkpoint also goes to durable storage")
    p.add_argument("--memory-root", default=None, help="the run's memory tiers (one directory per node)")
    p.add_argument("--keep", type=int, default=KEEP)
    p.add_argument("--batch", type=int, default=8, help="global batch (windows per step, split over the ranks)")
    p.add_argument("--d-model", type=int, default=32)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checksums", action="store_true")
    p.add_argument("--pause", default="")
    p.add_argument("--node-pause", default="")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a collective may wait")
    p.add_argument("--probe-terms", type=int, default=0, help="time the job's own terms this many times at its end")
    a = p.parse_args(argv)
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    _store = init(restart, timedelta(seconds=a.timeout))   # noqa: F841  (kept alive with the group)
    r = _setup(a, restart)
    if r is None:
        return 2
    engine, memory_tier = _resume(r)
    _train(r, engine, memory_tier)
    _finish(r, engine, memory_tier)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)   # everything is durable and the group destroyed: skip torch's 1-2 s of interpreter teardown
