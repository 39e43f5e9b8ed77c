"""Each engine's fixed costs, measured inside a running gloo job on the lab's FSDP job at its smallest
width, and DCP's staging of the job's state at its full size (no PyTorch import at module level): the terms
d, o, b and σ of :mod:`mlsysim.lab.distributed.terms`."""
from __future__ import annotations

import json
import math
import statistics
import time
from pathlib import Path

from ...errors import check_integer


def engine_probe(group, directory, layers: int, repeats: int = 5) -> dict:
    """In a running gloo job (every rank calls it): each engine's fixed cost per save, measured on the
    lab's FSDP job built at the smallest width (d_model 32, ``layers`` layers, one step trained): the
    same tensors, DTensors and optimizer state as the job's, a few hundred kilobytes. ``dcp.async_save``
    of its ``get_state_dict`` through the lab's :class:`~mlsysim.lab.pytorch.engines.DcpEngine` (on
    ``group``, into ``directory``/dcp): ``dcp_stall_s``, until the call returns (the state dict flattened,
    plans made, gathered and scattered, the staging: ``dcp_stage_small_s``, :func:`dcp_stage`), and
    ``dcp_durable_s``, until the save is committed; this package's ``concurrent`` engine on the rank's
    shard (two buffers, one writer, as the job runs it): ``own_stall_s``, until ``save`` returns (the
    layout, the copy, the hand-over to the writer). The median of ``repeats`` each, after one untimed
    save of each engine (its first sets up its buffers and threads). Then each engine's fixed overhead
    per save (``dcp_overhead_s``, ``own_overhead_s``): :func:`fixed_overhead_s`, and each engine's time to
    durable for the saves made there, beside the training steps (``dcp_durable_beside_s``,
    ``own_durable_beside_s``: the median): the job's saves run beside its steps, whose threads the save's
    own threads wait for. This package's engine commits as the job's does: every shard durable, the records
    are gathered to rank 0 (on ``group``), which writes the global record durably, where its durable ends."""
    import torch.distributed as dist
    from .. import store
    from ..engines import make_engine
    from ..pytorch.engines import DcpEngine
    from . import shards
    from .worker import NEVER_PRUNE, Job, lab_config
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    job = Job(lab_config(1000, d_model=32, layers=layers), "fsdp")
    job.step()
    base = Path(directory)
    dcp_engine = None
    for i in range(world):           # one rank at a time: the engine probes the shared directory
        if i == rank:
            dcp_engine = DcpEngine(base / "dcp", keep=2, asynchronous=True, process_group=group)
        dist.barrier(group=group)
    committed = {}

    def global_commit(step: int) -> None:      # as the job commits: every rank's record to rank 0, which writes
        records = [None] * world if rank == 0 else None     # the global record durably
        dist.gather_object({"rank": rank, "step": step}, records, dst=0, group=group)
        if rank == 0:
            store.write_durable(base / f"global-{step:09d}.json", [json.dumps(records).encode()])
        committed[step] = time.perf_counter()

    own = make_engine("concurrent", shards.rank_dir(base / "own", rank), keep=NEVER_PRUNE, buffers=2, writers=1,
                      on_commit=global_commit)
    timed = {"dcp_stall_s": [], "dcp_durable_s": [], "own_stall_s": []}
    try:
        for step in range(1, repeats + 2):
            dist.barrier(group=group)
            stall = dcp_engine.save(step, job.dcp_state())
            durable = dcp_engine.summary()[-1].durable_s      # waits for the save
            state, _ = job.shard_state()
            own_stall = own.save(step, state)
            own.wait()
            if step > 1:
                for k, v in zip(timed, (stall, durable, own_stall)):
                    timed[k].append(v)
        out = {k: statistics.median(v) for k, v in timed.items()}
        out["dcp_stage_small_s"] = (dcp_stage(group, job) or {}).get("dcp_stage_s")   # held in dcp_stall_s
        started = {}

        def own_save(step: int) -> float:
            started[step] = time.perf_counter()
            return own.save(step, job.shard_state()[0])

        saves = {"dcp_overhead_s": lambda s: dcp_engine.save(s, job.dcp_state()), "own_overhead_s": own_save}
        waits = {"dcp_overhead_s": dcp_engine.wait, "own_overhead_s": own.wait}
        mine = math.ceil(2 * out["dcp_durable_s"] / _step_s(job, group))    # the slower save done inside them
        every = [None] * world
        dist.all_gather_object(every, mine, group=group)       # every rank trains the same steps
        steps = max(every)
        first = dict(zip(saves, (5000, 6000)))           # each engine's saves numbered from its own step
        for k in saves:
            out[k] = fixed_overhead_s(job, group, saves[k], waits[k], min(64, max(4, steps)), repeats,
                                      first_step=first[k])
        beside = [r.durable_s for r in dcp_engine.summary() if r.step >= first["dcp_overhead_s"]]
        out["dcp_durable_beside_s"] = statistics.median(beside)
        out["own_durable_beside_s"] = statistics.median(committed[s] - t for s, t in started.items())
    finally:
        own.close()
        dcp_engine.close()
    return out


def _step_s(job, group, steps: int = 4) -> float:
    """Seconds of one training step of ``job`` (the mean of ``steps``, every rank in step)."""
    import torch.distributed as dist
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(steps):
        job.step()
    return (time.perf_counter() - t0) / steps


def fixed_overhead_s(job, group, save, wait, steps: int, repeats: int, first_step: int) -> float:
    """The training time one save costs ``job`` (every rank calls it): ``steps`` training steps timed
    without a save, then a save (``save(step)``), the same steps and ``wait()`` timed, the difference;
    the median of ``repeats``. On the job at its smallest width the bytes are nothing, so this is the
    engine's fixed cost per checkpoint to the training: its stall, and what its background work (plans,
    collectives, records, Python holding the interpreter's lock) takes from the steps beside it. The
    steps must outlast the save, whose wait would otherwise count idle time."""
    import torch.distributed as dist
    check_integer("steps", steps)
    check_integer("repeats", repeats)

    def timed(fn) -> float:
        dist.barrier(group=group)
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    def train():
        for _ in range(steps):
            job.step()

    over = []
    for i in range(repeats):
        plain = timed(train)
        over.append(timed(lambda: (save(first_step + i), train(), wait())) - plain)
    return statistics.median(over)


def dcp_stage(group, job, repeats: int = 3) -> dict | None:
    """In a running gloo job (every rank calls it): the seconds of DCP's staging of ``job``'s state at its
    full size, every rank at once (``dcp_stage_s``, the median of ``repeats``, each freed before the next) and
    the bytes staged, summed over the ranks (``dcp_stage_B``): the stager ``dcp.async_save`` takes for the
    lab's writer (a :class:`~torch.distributed.checkpoint.FileSystemWriter`, itself the stager) on the state
    :meth:`~mlsysim.lab.distributed.worker.Job.dcp_state` gives it, as the job's saves call it before their
    stall ends. On a CPU job, PyTorch 2.13's stager deep-copies every DTensor, its data included, before it
    allocates the staging tensor and copies into it: two copies of every byte, which the copy rates alone
    do not show. None where this PyTorch's writer is not a stager."""
    import torch
    import torch.distributed as dist
    from torch.distributed.checkpoint import FileSystemWriter
    from torch.distributed.checkpoint.staging import AsyncStager
    check_integer("repeats", repeats)
    writer = FileSystemWriter("unused-dcp-stage-probe")       # staging writes nothing
    if not isinstance(writer, AsyncStager):
        return None
    local = torch.tensor(float(sum(local_B(t) for t in job.tensors().values())))
    dist.all_reduce(local, group=group)
    times = []
    for _ in range(repeats):
        state = job.dcp_state()
        dist.barrier(group=group)
        t0 = time.perf_counter()
        staged = writer.stage(state)
        staged = staged.result() if hasattr(staged, "result") else staged
        dist.barrier(group=group)
        times.append(time.perf_counter() - t0)
        del staged, state
    return {"dcp_stage_s": statistics.median(times), "dcp_stage_B": float(local)}


def local_B(t) -> int:
    """Bytes of a rank's own part of ``t`` (a DTensor's local shard, else the tensor)."""
    local = t.to_local() if hasattr(t, "to_local") else t
    return local.numel() * local.element_size()
