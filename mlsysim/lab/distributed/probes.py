"""The terms of :mod:`mlsysim.lab.distributed.terms` measured inside a running gloo job (no PyTorch import at
module level): each engine's fixed costs on the lab's FSDP job at its smallest width and DCP's staging of
the job's state at its full size (d, o, b and σ), gloo's rates (g, q, l), the disk's read of the job's own
shards (r_S), the broadcast of its state (g_s) and its new tensors (n_x)."""
from __future__ import annotations

import math
import statistics
import os
import time
from pathlib import Path

import numpy as np

from ...errors import check_integer
from .staging import dcp_stage, local_B  # noqa: F401  (re-exported: timed in the restore job)
from .staging import gathered_commit

OVERHEAD_REPEATS = 40     # pairs of :func:`fixed_overhead_s` per engine (5 in the kept runs up to 2026-12-08): four
                          # steps' CPU time spread by 15 ms on 2 ranks, about twice a save's fixed CPU time


def engine_probe(group, directory, layers: int, repeats: int = 5) -> dict:
    """In a running gloo job (every rank calls it): each engine's fixed cost per save, measured on the
    lab's FSDP job built at the smallest width (d_model 32, ``layers`` layers, one step trained): the
    same tensors, DTensors and optimizer state as the job's, a few hundred kilobytes. ``dcp.async_save``
    of its ``get_state_dict`` through the lab's :class:`~mlsysim.lab.pytorch.engines.DcpEngine` (on
    ``group``, into ``directory``/dcp): ``dcp_stall_s``, until the call returns (the state dict flattened,
    plans made, gathered and scattered, the staging: ``dcp_stage_small_s``, :func:`dcp_stage`), and
    ``dcp_durable_s``, until the save is committed; this package's ``concurrent`` engine on the rank's
    shard (two buffers, one writer, as the job runs it): ``own_stall_s``, until ``save`` returns (the
    layout, the copy, the hand-over to the writer), and ``own_durable_s``, until its ``wait`` returns. The
    median of ``repeats`` each, after one untimed save of each engine (its first sets up its buffers and
    threads). Then each engine's fixed overhead per save (``dcp_overhead_s``, ``own_overhead_s``) and the
    CPU time it takes (``dcp_overhead_cpu_s``, ``own_overhead_cpu_s``): :func:`fixed_overhead_s`, the median
    of :data:`OVERHEAD_REPEATS` pairs, each engine's save inside as many steps as twice its own time to
    durable (4 to 64; both inside twice DCP's, 5 pairs, in the kept runs up to 2026-12-08); DCP's writer
    thread's CPU time in those saves (``dcp_writer_small_cpu_s``, the median, by the thread's clock as the job
    times it); each engine's time to durable for the saves made there, beside the training steps
    (``dcp_durable_beside_s``, ``own_durable_beside_s``: the median): the job's saves run beside its steps,
    whose threads the save's own threads wait for. This package's engine commits as the job's does: every shard durable, the records
    are gathered to rank 0 (on ``group``), which writes the global record durably, where its durable ends."""
    import torch.distributed as dist
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
    committed = {}                   # as the job commits: every rank's record to rank 0, the global record durable
    own = make_engine("concurrent", shards.rank_dir(base / "own", rank), keep=NEVER_PRUNE, buffers=2, writers=1,
                      on_commit=gathered_commit(group, base, committed))
    timed = {"dcp_stall_s": [], "dcp_durable_s": [], "own_stall_s": [], "own_durable_s": []}
    try:
        for step in range(1, repeats + 2):
            dist.barrier(group=group)
            stall = dcp_engine.save(step, job.dcp_state())
            durable = dcp_engine.summary()[-1].durable_s      # waits for the save
            t0 = time.perf_counter()
            own_stall = own.save(step, job.shard_state()[0])
            own.wait()
            if step > 1:
                for k, v in zip(timed, (stall, durable, own_stall, time.perf_counter() - t0)):
                    timed[k].append(v)
        out = {k: statistics.median(v) for k, v in timed.items()}
        out["dcp_stage_small_s"] = (dcp_stage(group, job) or {}).get("dcp_stage_s")   # held in dcp_stall_s
        started = {}

        def own_save(step: int) -> float:
            started[step] = time.perf_counter()
            return own.save(step, job.shard_state()[0])

        saves = {"dcp_overhead_s": lambda s: dcp_engine.save(s, job.dcp_state()), "own_overhead_s": own_save}
        waits = {"dcp_overhead_s": dcp_engine.wait, "own_overhead_s": own.wait}
        step_s = _step_s(job, group)
        mine = {k: math.ceil(2 * out[d] / step_s) for k, d in zip(saves, ("dcp_durable_s", "own_durable_s"))}
        every = [None] * world
        dist.all_gather_object(every, mine, group=group)       # every rank trains the same steps
        first = dict(zip(saves, (5000, 6000)))           # each engine's saves numbered from its own step
        for k in saves:
            steps = min(64, max(4, max(e[k] for e in every)))   # the save done inside them
            out[k], out[k.removesuffix("_s") + "_cpu_s"] = fixed_overhead_s(
                job, group, saves[k], waits[k], steps, OVERHEAD_REPEATS, first_step=first[k])
        writer = [s for step, s in dcp_engine.writer_cpu_s.items() if step >= first["dcp_overhead_s"]]
        out["dcp_writer_small_cpu_s"] = statistics.median(writer) if writer else None
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


def fixed_overhead_s(job, group, save, wait, steps: int, repeats: int, first_step: int) -> tuple[float, float]:
    """The training time one save costs ``job`` (every rank calls it): ``steps`` training steps timed
    without a save, then a save (``save(step)``), the same steps and ``wait()`` timed, the difference;
    the median of ``repeats``; and the same of the rank's process CPU time (all its threads), the CPU the
    save takes. On the job at its smallest width the bytes are nothing, so the first is the engine's fixed
    cost per checkpoint to the training: its stall, and what its background work (plans, collectives,
    records, Python holding the interpreter's lock) takes from the steps beside it; its steps are short and
    hold the interpreter's lock for most of their time, which a larger job's steps (its matrix products
    release the lock) do not: the second is what the save's work costs wherever it runs. The steps must
    outlast the save, whose wait would otherwise count idle time."""
    import torch.distributed as dist
    check_integer("steps", steps)
    check_integer("repeats", repeats)

    def timed(fn) -> tuple[float, float]:
        dist.barrier(group=group)
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        return time.perf_counter() - t0, time.process_time() - c0

    def train():
        for _ in range(steps):
            job.step()

    over, cpu = [], []
    for i in range(repeats):
        plain, plain_cpu = timed(train)
        saved, saved_cpu = timed(lambda: (save(first_step + i), train(), wait()))
        over.append(saved - plain)
        cpu.append(saved_cpu - plain_cpu)
    return statistics.median(over), statistics.median(cpu)


def gloo_probe(group, size_B: float, repeats: int = 5) -> dict:
    """In a running gloo job (every rank calls it): the best of ``repeats`` timings of rank 0's
    broadcast of ``size_B`` bytes to all, and of N/2 pairs (rank r to rank r + N/2) each sending
    ``size_B`` at once (the best of two in the runs up to ``lab_dist-2026-12-07c``; the pairs on 2 ranks came to
    2.9 GB/s in ``-07b`` and 1.4 in ``-07c``), and the best of 5 ``all_gather_object`` of a small object. Returns
    ``bcast_Bps`` (bytes / seconds, the N − 1 copies inside), ``pair_Bps`` (one pair's bytes / seconds) and
    ``latency_s`` (one small object collective)."""
    import torch
    import torch.distributed as dist
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    buf = torch.ones(max(int(size_B) // 4, 1), dtype=torch.float32)
    half = world // 2

    def timed(fn, times=repeats, closing=True):
        best = math.inf
        for _ in range(times):
            dist.barrier(group=group)
            t0 = time.perf_counter()
            fn()
            if closing:                       # until every rank holds the bytes
                dist.barrier(group=group)
            best = min(best, time.perf_counter() - t0)
        return best

    def pairs():
        if half and rank < half:
            dist.send(buf, dst=rank + half, group=group)
        elif half and rank < 2 * half:
            dist.recv(buf, src=rank - half, group=group)

    b = buf.numel() * 4
    out = {"probe_B": b, "bcast_Bps": b / timed(lambda: dist.broadcast(buf, src=0, group=group)),
           "pair_Bps": b / timed(pairs) if half else None}
    small = [None] * world
    out["latency_s"] = timed(lambda: dist.all_gather_object(small, {"rank": rank, "step": 1}, group=group), 5, False)
    return out


def shard_read_s(group, path) -> float:
    """In a running job (every rank calls it, each with its own file): seconds until every rank has read
    ``path`` cold (its pages dropped first, :func:`mlsysim.measure.drop_page_cache`) into a buffer it touched
    before, all at once: the disk's read of N files by N readers (r_N) where and when the restores run, the
    checks, faults and loads aside."""
    import torch.distributed as dist
    from ...measure import drop_page_cache
    buf = np.ones(os.path.getsize(path), dtype=np.uint8)
    drop_page_cache(path)
    dist.barrier(group=group)
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:     # as :func:`shared_disk` reads for r_N
        f.readinto(memoryview(buf))
    dist.barrier(group=group)
    return time.perf_counter() - t0


def state_bcast_s(group, tensors: dict) -> float:
    """In a running gloo job (every rank calls it, with the same keys): seconds of rank 0's broadcast of
    ``tensors`` (its live ones, one asynchronous broadcast each, as the broadcast restore sends them)
    into tensors each other rank allocates just before (``torch.empty_like``, freed afterwards, as a
    restore frees its buffers once loaded), until every rank holds them: gloo's broadcast with the
    receivers' page faults, at the state's size and in its tensors, the restore's read aside."""
    import torch
    import torch.distributed as dist
    rank = dist.get_rank(group)
    keys = sorted(tensors)
    dist.barrier(group=group)
    t0 = time.perf_counter()
    bufs = [tensors[k] if rank == 0 else torch.empty_like(tensors[k]) for k in keys]
    for w in [dist.broadcast(b, src=0, group=group, async_op=True) for b in bufs]:
        w.wait()
    dist.barrier(group=group)
    return time.perf_counter() - t0


def new_tensors_s(group, tensors: dict) -> dict:
    """In a running job (every rank calls it, with its own tensors): seconds until every rank has copied its
    own part of ``tensors`` (a DTensor's local shard, else the tensor) into tensors PyTorch's allocator makes
    just before (``torch.empty_like``, all held until the last is copied, then freed, as a restore reads its
    tensors into new ones and loads them), ``new_s``, and the same copies into tensors made and touched
    beforehand, ``touched_s``: all ranks at once, barrier to barrier. Their difference is what the restore's
    new tensors cost beyond the copy, timed in the restore job's own memory state and with its N processes
    on the machine's cores (``bytes``: this rank's; ``largest_B``: its largest tensor's, the piece a
    checkpoint copies at a time)."""
    import torch
    import torch.distributed as dist
    local = [t.to_local() if hasattr(t, "to_local") else t for _, t in sorted(tensors.items())]
    ready = [torch.empty_like(t).fill_(1) for t in local]

    def timed(fn) -> float:
        dist.barrier(group=group)
        t0 = time.perf_counter()
        fn()
        dist.barrier(group=group)
        return time.perf_counter() - t0

    touched = timed(lambda: [r.copy_(t) for t, r in zip(local, ready)])
    del ready                                    # its pages, just freed, go to the next allocation first
    held: list = []
    new = timed(lambda: held.extend(torch.empty_like(t).copy_(t) for t in local))
    del held
    sizes = [t.numel() * t.element_size() for t in local]
    return {"new_s": new, "touched_s": touched, "bytes": sum(sizes), "largest_B": max(sizes, default=0)}
