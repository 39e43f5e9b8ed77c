"""DCP's staging of a running job's state, timed in the job (every rank calls :func:`dcp_stage`; PyTorch is
imported inside it): the restore job times it (:mod:`mlsysim.lab.distributed.restore`), and so does the training
job itself once its last checkpoint is durable (:mod:`mlsysim.lab.distributed.in_job`). With it the steps those
probes share: work timed on every rank at once (:func:`at_once`), a value summed over the ranks (:func:`summed`), a
rank's bytes of a tensor (:func:`local_B`) and a commit made as the lab's job makes it (:func:`gathered_commit`).
"""
from __future__ import annotations

import statistics
import time

from ...errors import MlsysimError, check_integer


def dcp_stage(group, job, repeats: int = 3, steps: int = 0, freed_first: bool = False) -> dict | None:
    """In a running gloo job (every rank calls it): the seconds of DCP's staging of ``job``'s state at its
    full size, every rank at once (``dcp_stage_s``, the median of ``repeats``, until the last rank is done;
    ``dcp_stage_own_s``, until this rank is, as the job times its own stall; each time in ``dcp_stage_each_s``,
    ``dcp_stage_own_each_s``) and the bytes staged, summed over
    the ranks (``dcp_stage_B``): the stager ``dcp.async_save`` takes for the lab's writer (a
    :class:`~torch.distributed.checkpoint.FileSystemWriter`, itself the stager) on the state
    :meth:`~mlsysim.lab.distributed.worker.Job.dcp_state` gives it, as the job's saves call it before their
    stall ends. On a CPU job, PyTorch 2.13's stager deep-copies every DTensor, its data included, before it
    allocates the staging tensor and copies into it: two copies of every byte, which the copy rates alone
    do not show. None where this PyTorch's writer is not a stager.

    ``steps`` = 0: each staging freed before the next, at once. ``steps`` > 0: as the job's saves meet it, each
    staging held while ``job`` trains ``steps`` steps (a save holds its staging until durable while the
    training goes on), then freed and the next made at once, after one such staging untimed
    (``dcp_stage_steps`` says which); with ``freed_first``, each staging freed before those steps, not after
    (``dcp_stage_freed_first``): a save's staging is dropped once its write is durable, a second or so after the
    save, and the next stages a gap later, into memory freed that long before, which the host may have taken back
    (:data:`~mlsysim.lab.distributed.terms.RECLAIM_DELAY_S`). What a staging costs depends on what its memory did
    since the last one:
    at a gigabyte on this machine, back to back 1.42 and 1.62 times the stall of ``dcp.async_save`` in the same
    job (2 and 4 ranks), held through a gap's steps 0.85 and 0.89 times
    (``benchmarks/records/lab_dcp_staging-2026-12-06.json``); in the lab's full benchmark, held 0.77 and 0.81 times
    the job's stall (``lab_dist-2026-12-06c``), back to back 1.16 and 1.21 times in the run before."""
    from torch.distributed.checkpoint import FileSystemWriter
    from torch.distributed.checkpoint.staging import AsyncStager
    check_integer("repeats", repeats)
    if type(steps) is not int or steps < 0:
        raise MlsysimError(f"steps must be an integer >= 0 (the training steps each staging is held through), "
                           f"got {steps!r}")
    writer = FileSystemWriter("unused-dcp-stage-probe")       # staging writes nothing
    if not isinstance(writer, AsyncStager):
        return None

    def stage(state):
        staged = writer.stage(state)
        return staged.result() if hasattr(staged, "result") else staged
    times, own = [], []
    for i in range(repeats + (steps > 0)):
        state = job.dcp_state()
        took, took_all, staged = at_once(group, lambda: stage(state))
        if i >= (steps > 0):                   # the first held one is untimed: nothing was held before it
            own.append(took)
            times.append(took_all)
        if freed_first:
            del staged, state
        for _ in range(steps):
            job.step()
        staged = state = None
    return {"dcp_stage_s": statistics.median(times), "dcp_stage_own_s": statistics.median(own),
            "dcp_stage_each_s": times, "dcp_stage_own_each_s": own,
            "dcp_stage_B": summed(group, sum(local_B(t) for t in job.tensors().values())), "dcp_stage_steps": steps,
            "dcp_stage_freed_first": freed_first}


def gathered_commit(group, directory, committed: dict):
    """An ``on_commit`` for this package's engine that commits as the lab's job does (every rank calls its saves):
    once a rank's save is durable its record is gathered to rank 0 on ``group``, which writes the global record
    durably into ``directory``; ``committed[step]`` is then when that returned (``time.perf_counter()``)."""
    import json
    from pathlib import Path
    import torch.distributed as dist
    from .. import store
    rank, world = dist.get_rank(group), dist.get_world_size(group)

    def commit(step: int) -> None:
        records = [None] * world if rank == 0 else None
        dist.gather_object({"rank": rank, "step": step}, records, dst=0, group=group)
        if rank == 0:
            store.write_durable(Path(directory) / f"global-{step:09d}.json", [json.dumps(records).encode()])
        committed[step] = time.perf_counter()
    return commit


def at_once(group, work) -> tuple:
    """``work()`` on every rank of a running gloo job at once, after a barrier: (this rank's seconds, the seconds
    until the last rank is done, what ``work`` returned); every rank calls it."""
    import torch.distributed as dist
    dist.barrier(group=group)
    t0 = time.perf_counter()
    out = work()
    own = time.perf_counter() - t0
    dist.barrier(group=group)
    return own, time.perf_counter() - t0, out


def summed(group, x: float) -> float:
    """``x`` summed over the ranks of a running gloo job (every rank calls it)."""
    import torch
    import torch.distributed as dist
    total = torch.tensor(float(x))
    dist.all_reduce(total, group=group)
    return float(total)


def local_B(t) -> int:
    """Bytes of a rank's own part of ``t`` (a DTensor's local shard, else the tensor)."""
    local = t.to_local() if hasattr(t, "to_local") else t
    return local.numel() * local.element_size()
