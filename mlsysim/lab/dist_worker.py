"""One rank of the distributed lab's job: ``torchrun --nproc-per-node N -m mlsysim.lab.dist_worker``.

Needs the optional extra (PyTorch). Every rank builds the lab's transformer
(:class:`~mlsysim.lab.torch_train.TinyDecoder`) from the same seed, then either shards it with
FSDP2 (``--mode fsdp``: ``fully_shard`` on each block and on the root, so every rank holds
``ceil(rows / N)`` rows of each parameter and of AdamW's two moments) or replicates it with
DDP (``--mode ddp``). The global batch of ``batch`` windows comes from the lab's
:class:`~mlsysim.lab.torch_train.ResumableSampler` (seeded, resumable); rank ``r`` trains on
its ``batch / N`` windows ``[r b/N, (r + 1) b/N)``, so a run at N = 4 and one at N = 2 see
the same data at every step. Gradients are averaged over the ranks (FSDP2's reduce-scatter,
DDP's all-reduce) and the step's loss is the mean of the ranks' losses (an all-reduce), so
the runs differ only in the order of their floating-point reductions. Dropout is off: its
masks would depend on which rank draws them.

Checkpoints every ``--every`` steps with ``--engine``:

* ``sync`` / ``concurrent`` — this package's engines (:mod:`mlsysim.lab.engines`), one per
  rank, each writing only the rank's own shard (the local tensors of the DTensors and its
  part of the optimizer state) into ``rank-<r>/`` (:mod:`mlsysim.lab.dist_store`). Once a
  rank's shard is durable, it sends its shard record to rank 0 (``gather_object`` on a
  process group of its own, so that a background writer never interleaves with training's
  collectives); rank 0 writes the global commit record, then prunes.
* ``dcp`` / ``dcp-async`` — PyTorch's ``dcp.save`` / ``dcp.async_save`` of ``get_state_dict``
  (through :class:`~mlsysim.lab.torch_engines.DcpEngine`), loaded with DCP's own resharding.

On start the job resumes from the newest global checkpoint that every rank verifies; one
that a rank cannot verify is skipped by all, with a warning naming the shard.

Output: JSON lines on stdout. Every rank prints ``{"start": attempt, "rank": r, "pid": p}``;
rank 0 prints ``{"warning": ...}``, ``{"resumed_from": s or null, "bytes_read": [per rank]}``,
``{"step": s, "loss": "<float.hex>"}``, ``{"commit": s, "stall_s": x, "durable_s": y}``,
``{"checksums": s, "crc32": {key: crc}}`` (with ``--checksums``: CRC-32 of every full,
gathered tensor at each checkpoint and after loading) and ``{"done": true, ...}``.

``--pause POINT@STEP:RANK[,...]`` — the i-th item applies to the i-th attempt of the job
(torchrun's restart count) and stops rank RANK (SIGSTOP, under its engine's lock) at POINT of
step STEP, printing ``{"paused": POINT, "step": s, "rank": r, "pid": p}``, so that the driver
can SIGKILL it exactly there: ``step`` (after the backward pass, before the update),
``between`` (after the step and its checkpoint call), ``snapshot`` and ``persist`` (inside the
engine), ``shard`` (the rank's shard is durable, the global commit not yet written) and
``commit`` (after the global commit, rank 0). ``-`` skips an attempt.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import warnings
import zlib
from dataclasses import asdict
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from . import dist_store, store
from .engines import make_engine
from .runner import _say
from .torch_train import (ResumableSampler, TinyDecoder, TorchConfig, Windows, _Schedule, deterministic,
                          rng_state, set_rng_state)

POINTS = ("step", "between", "snapshot", "persist", "shard", "commit")
MODES = ("fsdp", "ddp")
ENGINES = ("sync", "concurrent", "dcp", "dcp-async")
NEVER_PRUNE = 10 ** 9     # the engines keep every shard: pruning waits for the global commit


def lab_config(steps: int, batch: int = 8, seed: int = 0, d_model: int = 32, layers: int = 2) -> TorchConfig:
    """The distributed lab's model: small, dropout off, one thread per rank."""
    heads = max(2, d_model // 16)
    return TorchConfig(layers=layers, d_model=d_model, heads=heads, kv_heads=heads // 2, d_ff=3 * d_model // 2,
                       context=16, batch=batch, steps=steps, warmup=min(2, steps), dropout=0.0, seed=seed,
                       threads=1)


def fast_deterministic(threads: int) -> None:
    """:func:`~mlsysim.lab.torch_train.deterministic` without its 2 s import of TorchInductor's
    config (``torch.use_deterministic_algorithms`` sets a flag there; eager mode does not need it):
    deterministic kernels and ``threads`` CPU threads. Falls back to it where the flag moved."""
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:
        deterministic(threads)
        return
    setter(True, warn_only=False)
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
                spec = dist_store.partition(t.shape, self.world)[self.rank]
                piece = t.to_local()
                if tuple(piece.shape) != spec.local_shape or t.placements != (Shard(0),):
                    raise RuntimeError(f"{key}: FSDP2 holds {tuple(piece.shape)} as {t.placements}, "
                                       f"the partition says {spec}")
            else:
                spec = dist_store.partition(t.shape, self.world, dist_store.REPLICATE)[self.rank]
                piece = t
                if spec.local_shape != tuple(t.shape):
                    continue                    # replicated: rank 0 stores it
            local[key], specs[key] = piece, spec
        state = {"tensors": local, "shared": self.shared(), "rank_state": {"rng": rng_state()}}
        return state, specs

    def load(self, got: dist_store.RankLoad) -> None:
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
            out[key] = zlib.crc32(full.detach().contiguous().numpy().tobytes())
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


def resume(directory, job: Job, group) -> tuple[int | None, list]:
    """Load the newest global checkpoint every rank verifies; returns (its step or None, bytes read per rank)."""
    for step in reversed(dist_store.global_steps(directory)):
        error, got = None, None
        try:
            record = dist_store.read_global(directory, step)
            got = dist_store.read_for_rank(directory, record, job.world, job.rank, _empty)
        except store.CheckpointError as e:
            error = str(e)
        errors = [None] * job.world
        dist.all_gather_object(errors, error, group=group)
        bad = sorted({e for e in errors if e})
        if bad:
            if job.rank == 0:
                msg = f"skipping global checkpoint {step}: " + "; ".join(bad)
                warnings.warn(msg, store.CheckpointWarning, stacklevel=2)
                _say(warning=msg)
            continue
        job.load(got)
        nbytes = [0] * job.world
        dist.all_gather_object(nbytes, got.bytes_read, group=group)
        return step, nbytes
    return None, [0] * job.world


def init(attempt: int, timeout: timedelta):
    """``init_process_group("gloo")`` on the rendezvous store under a prefix of this attempt: torchrun
    keeps its store across restarts, and a restarted group that read the previous attempt's
    addresses of a second process group would connect to dead ranks."""
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    base = dist.TCPStore(host, port, world_size=world, is_master=not agent and rank == 0, timeout=timeout,
                         multi_tenant=True)
    dist.init_process_group("gloo", store=dist.PrefixStore(f"mlsysim-attempt-{attempt}", base), rank=rank,
                            world_size=world, timeout=timeout)
    return base


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="torchrun ... -m mlsysim.lab.dist_worker")
    p.add_argument("--dir", required=True)
    p.add_argument("--mode", choices=MODES, default="fsdp")
    p.add_argument("--engine", choices=ENGINES, default="sync")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--stop-after", type=int, default=None, help="end cleanly after this step (its checkpoint done)")
    p.add_argument("--every", type=int, default=2)
    p.add_argument("--keep", type=int, default=2)
    p.add_argument("--batch", type=int, default=8, help="global batch (windows per step, split over the ranks)")
    p.add_argument("--d-model", type=int, default=32)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checksums", action="store_true")
    p.add_argument("--pause", default="")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a collective may wait")
    a = p.parse_args(argv)
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    plan = a.pause.split(",") if a.pause else []
    point, at, who = "", -1, -1
    if attempt < len(plan) and plan[attempt] != "-":
        spec, _, who = plan[attempt].partition(":")
        point, _, at = spec.partition("@")
        at, who = int(at), int(who or 0)

    _store = init(attempt, timedelta(seconds=a.timeout))   # noqa: F841  (kept alive with the group)
    rank, world = dist.get_rank(), dist.get_world_size()
    _say(start=attempt, rank=rank, pid=os.getpid())
    if a.batch % world:
        if rank == 0:
            sys.stderr.write(f"error: the global batch of {a.batch} windows cannot be split evenly over "
                             f"{world} ranks\n")
        dist.destroy_process_group()
        return 2
    group = dist.new_group(backend="gloo", timeout=timedelta(seconds=a.timeout))   # checkpoint traffic only
    cfg = lab_config(a.steps, a.batch, a.seed, a.d_model, a.layers)
    job = Job(cfg, a.mode)
    own = a.engine in ("sync", "concurrent")
    identity = {"format": "mlsysim" if own else "dcp", "mode": a.mode, "config": asdict(cfg)}
    if rank == 0:
        dist_store.claim(a.dir, identity)
    dist.barrier()
    run_id = json.dumps(identity, sort_keys=True)

    engine = None
    lock_holder = [None]

    def hook(name: str, step: int) -> None:
        if name == point and step == at and rank == who:
            _say(paused=name, step=step, rank=rank, pid=os.getpid())
            os.kill(os.getpid(), signal.SIGSTOP)

    def locked(name: str, step: int) -> None:
        if name == point and step == at and rank == who:   # the lock only where a pause is planned
            with lock_holder[0]:
                hook(name, step)

    pausing = rank == who and point in ("snapshot", "persist")   # else no engine hook: save never waits
                                                                  # for the lock a global commit holds

    started: dict = {}
    stalls: dict = {}
    if own:
        pending: dict = {}

        def on_commit(step: int) -> None:          # under the engine's lock, the shard just made durable
            rec = dist_store.shard_record(a.dir, step, rank, world, a.mode, pending.pop(step))
            hook("shard", step)
            records = [None] * world if rank == 0 else None
            dist.gather_object(rec, records, dst=0, group=group)
            if rank == 0:
                dist_store.write_global_commit(a.dir, step, records, run_id)
                _say(commit=step, durable_s=time.perf_counter() - started[step])
                hook("commit", step)
                dist_store.prune(a.dir, a.keep)

        def engine_hook(name: str, step: int) -> None:
            if name in ("snapshot", "persist"):
                hook(name, step)

        extra = {"buffers": 2, "writers": 1} if a.engine == "concurrent" else {}
        engine = make_engine(a.engine, dist_store.rank_dir(a.dir, rank), keep=NEVER_PRUNE,
                             hook=engine_hook if pausing else None,
                             on_commit=on_commit, **extra)
        resumed_from, nbytes = resume(a.dir, job, group)
    else:
        from .torch_engines import DcpEngine, load_latest

        def on_dcp_commit(step: int) -> None:
            if rank == 0:
                _say(commit=step, durable_s=time.perf_counter() - started[step])
            hook("commit", step)

        for r in range(world):   # one rank at a time: the engine probes the shared directory with a file
            if r == rank:
                engine = DcpEngine(a.dir, keep=a.keep, asynchronous=a.engine == "dcp-async",
                                   hook=(lambda n, s: hook(n, s) if n in ("snapshot", "persist") else None)
                                   if pausing else None, on_commit=on_dcp_commit, process_group=group)
            dist.barrier()
        resumed_from, nbytes = None, [0] * world
        from .torch_engines import newest_path
        if newest_path(a.engine, a.dir) is not None:
            loaded = load_latest(a.engine, a.dir, template=job.dcp_state())
            job.load_dcp_state(loaded.state)
            resumed_from = loaded.step
            nbytes = [loaded.size_B] * world
    lock_holder[0] = engine.lock
    if rank == 0:
        _say(resumed_from=resumed_from, bytes_read=nbytes, world_size=world)
    if a.checksums and resumed_from is not None:
        sums = job.checksums()
        if rank == 0:
            _say(loaded_checksums=resumed_from, crc32=sums)
    job.hook = locked
    last = a.steps if a.stop_after is None else min(a.steps, a.stop_after)
    while job.step_count < last:
        loss = job.step()
        s = job.step_count
        if rank == 0:
            _say(step=s, loss=loss.hex())
        if s % a.every == 0:
            if a.checksums:
                sums = job.checksums()
                if rank == 0:
                    _say(checksums=s, crc32=sums)
            started[s] = time.perf_counter()
            if own:
                state, pending[s] = job.shard_state()
                stalls[s] = engine.save(s, state)
            else:
                stalls[s] = engine.save(s, job.dcp_state())
        locked("between", s)
    engine.close()
    dist.barrier()
    if rank == 0:
        _say(done=True, stall_s=[r.stall_s for r in engine.summary()])
    del stalls
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
