"""The training job's own terms, timed in the job itself once its last checkpoint is durable (every rank
calls :func:`time_terms`; needs PyTorch, imported by the worker that calls it).

The refined model (:mod:`mlsysim.lab.distributed.terms`) predicts a checkpoint from rates timed apart from
it: the copies and the disk in the benchmark's own process after the training jobs, DCP's staging in the
restore job. Over the kept runs those predictions moved from run to run more than the figures they predict
(:func:`mlsysim.lab.distributed.results.spread`), while the restores, whose terms are timed between their
own rounds, were followed closely. Timed here, a term meets what the job's checkpoints met seconds before:
the same processes and their memory, the disk as it runs now.

* the copy of a rank's shard into a buffer touched before, as this package's engines snapshot it
  (:func:`mlsysim.lab.store.fill` of the shard's :func:`~mlsysim.lab.store.layout`; their own engines only);
* the write + ``fsync`` of a rank's bytes into a new file, every rank at once, the file before deleted first
  (:func:`mlsysim.lab.floors.write_once`: the engines' 16 MiB writes, writeback started chunk by chunk);
* DCP's staging of the job's state (:func:`~mlsysim.lab.distributed.staging.dcp_stage`, each staging held while
  the job trains ``steps`` steps, as a save's staging is held; then each freed before those steps, as a save's
  staging is freed once durable, long before the next: ``dcp_stage_freed_s``, ``dcp_stage_freed_own_s``; DCP's
  jobs only).

Each is timed ``repeats`` times, every rank at once after a barrier: until the last rank is done (``*_s``, the
median) and until this rank is (``*_own_s``), each time kept (``*_each_s``, ``*_own_each_s``: how far one
probe's median can be trusted), with the bytes summed over the ranks (``*_B``).

And in this package's engines' jobs, their engine's fixed cost to durable where the job's checkpoints meet it
(:func:`_fixed_beside`): a save of a few kilobytes right after a training step, durable (rank commit, records
gathered to rank 0, global record) while the job trains its next step. The probe of the restore job times the
same on the lab's job at its smallest width, whose steps are not the full job's: at 4 ranks and 254 MB the global
record came a median 0.078 s after rank 0's shard was durable, where that probe had put the whole fixed cost at
0.025 s and this one at 0.048 s (``benchmarks/records/lab_dist-2026-12-06f.json``, :func:`.results.durable_split`).

And, in DCP's jobs, the CPU time of DCP's writer thread at each of the job's checkpoints, as that thread's clock
(``time.thread_time``) counts it around ``write_data``: the serialization, ``torch.save``'s CRC-32, the copy into
the page cache and the ``fsync`` call, at the job's own cadence and beside its own steps.

The writers' CPU time beside the job's own steps (:func:`_writer_cpu_beside`, this package's engines' jobs) is
recorded beside the u_c the model takes, not yet in its place.
"""
from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from ...errors import MlsysimError, check_integer


def time_terms(group, job, directory, own: bool, repeats: int = 3, steps: int = 0, writer_cpu_s=None) -> dict:
    """In a running gloo job (every rank calls it, after its last checkpoint is durable): ``copy_s``,
    ``copy_own_s`` and ``copy_B`` (``own``: this package's engines' job), ``write_s``, ``write_own_s`` and
    ``write_B`` (the write + ``fsync`` of the rank's bytes in a directory of its own under ``directory``,
    removed afterwards), ``fixed_durable_beside_s`` and ``fixed_stall_beside_s`` (``own``: :func:`_fixed_beside`),
    ``writer_cpu_beside_s`` and ``writer_cpu_beside_B`` (``own``: :func:`_writer_cpu_beside`, ``steps`` a write),
    DCP's staging (not ``own``: the keys of
    :func:`~mlsysim.lab.distributed.staging.dcp_stage`, each staging held through ``steps`` of the job's steps,
    and ``dcp_stage_freed_s``, ``dcp_stage_freed_own_s``: each freed before them), and ``repeats``; with
    ``writer_cpu_s`` ({step: seconds}, DCP's engine's), ``dcp_writer_cpu_per_checkpoint_s``: the CPU time of the
    thread that wrote this rank's files at each checkpoint, in order, by that thread's own clock."""
    check_integer("repeats", repeats)
    out: dict = {"repeats": repeats}
    if writer_cpu_s:
        out["dcp_writer_cpu_per_checkpoint_s"] = [writer_cpu_s[k] for k in sorted(writer_cpu_s)]
    if own:
        from .. import store
        state, _ = job.shard_state()
        lay = store.layout(state, 0)
        data = np.empty(lay.size_B, dtype=np.uint8)
        data.fill(0)                           # touched, as an engine's buffers are before its first save
        out.update(_timed("copy", group, lambda i: store.fill(data, lay), repeats, lay.size_B))
    else:
        from .staging import dcp_stage, local_B
        stage = dcp_stage(group, job, repeats, steps)
        if stage is None:
            raise MlsysimError("this PyTorch's FileSystemWriter is not a stager: DCP's staging cannot be timed")
        freed = dcp_stage(group, job, repeats, steps, freed_first=True)
        out.update(stage, **{k.replace("dcp_stage", "dcp_stage_freed"): v for k, v in freed.items()
                             if k in ("dcp_stage_s", "dcp_stage_own_s", "dcp_stage_each_s", "dcp_stage_own_each_s")})
        data = np.full(sum(local_B(t) for t in job.tensors().values()), 7, dtype=np.uint8)
    out.update(_writes(group, directory, data, repeats))
    if own:
        out.update(_fixed_beside(group, job, directory, repeats))
        out.update(_writer_cpu_beside(group, job, directory, data, repeats, steps))
    return out


def _timed(name: str, group, work, repeats: int, size_B: int, before=None) -> dict:
    """``work(i)`` on every rank at once (:func:`~mlsysim.lab.distributed.staging.at_once`), i = 0 .. ``repeats``
    - 1, each after ``before(i)`` (untimed): {name_s: until the last rank is done, name_own_s: until this one is
    (medians), name_each_s, name_own_each_s: every one of them, name_B: the bytes, summed over the ranks}."""
    from .staging import at_once, summed
    timed = []
    for i in range(repeats):
        if before is not None:
            before(i)
        timed.append(at_once(group, lambda: work(i)))
    return {f"{name}_s": statistics.median(t[1] for t in timed), f"{name}_each_s": [t[1] for t in timed],
            f"{name}_own_s": statistics.median(t[0] for t in timed), f"{name}_own_each_s": [t[0] for t in timed],
            f"{name}_B": summed(group, size_B)}


def _writes(group, directory, data: np.ndarray, repeats: int) -> dict:
    """The write + ``fsync`` of ``data`` into a new file, every rank at once, ``repeats`` times, each after the
    file before is deleted (untimed, as the job deletes its older checkpoint outside the time to durable); the
    rank's directory removed after."""
    from ..floors import write_once
    own_dir = tempfile.mkdtemp(prefix=f"terms-{os.getpid()}-", dir=directory)
    paths = [os.path.join(own_dir, f"w{i}.bin") for i in range(repeats)]

    def delete_before(i: int) -> None:
        if i:
            os.remove(paths[i - 1])
    try:
        return _timed("write", group, lambda i: write_once(paths[i], data), repeats, data.nbytes, delete_before)
    finally:
        shutil.rmtree(own_dir, ignore_errors=True)


def _fixed_beside(group, job, directory, repeats: int) -> dict:
    """This package's ``concurrent`` engine (two buffers, one writer, as the job runs it) saving a few kilobytes
    right after a training step of ``job``, durable as the job's checkpoints are (the rank's commit record, the
    records gathered to rank 0 on ``group``, its global record: :func:`~.staging.gathered_commit`) while ``job``
    trains its next step; ``repeats`` times after one untimed save (its buffers and threads set up), each rank in
    a directory of its own under ``directory``, removed after. Rank 0's medians: ``fixed_stall_beside_s``, until
    ``save`` returned, and ``fixed_durable_beside_s``, until the global record was durable (each of those in
    ``fixed_stall_beside_each_s``, ``fixed_durable_beside_each_s``)."""
    import torch.distributed as dist
    from ..engines import make_engine
    from .shards import rank_dir
    from .staging import gathered_commit
    base = tempfile.mkdtemp(prefix=f"fixed-{os.getpid()}-", dir=directory)
    committed, started, stalls = {}, {}, []
    engine = make_engine("concurrent", rank_dir(base, dist.get_rank(group)), keep=10 ** 9, buffers=2, writers=1,
                         on_commit=gathered_commit(group, base, committed))   # keeps all, as worker.NEVER_PRUNE
    few = {"w": np.zeros(1024, dtype=np.float32)}
    try:
        for step in range(repeats + 1):
            job.step()
            started[step] = time.perf_counter()
            stalls.append(engine.save(step, few))
            job.step()
            engine.wait()
    finally:
        engine.close()
        shutil.rmtree(base, ignore_errors=True)
    durable = [committed[s] - started[s] for s in range(1, repeats + 1)]
    return {"fixed_stall_beside_s": statistics.median(stalls[1:]), "fixed_durable_beside_s": statistics.median(durable),
            "fixed_stall_beside_each_s": stalls[1:], "fixed_durable_beside_each_s": durable}


def _writer_cpu_beside(group, job, directory, data: np.ndarray, repeats: int, steps: int) -> dict:
    """Every rank writes ``data`` durably (:func:`mlsysim.lab.store.write_durable`: CRC-32, 16 MiB writes, writeback,
    ``fsync``) in a thread of its own while ``job`` trains ``steps`` steps (at least one), as the engine's writer
    writes a snapshot while the job trains up to its next checkpoint; ``repeats`` times, each thread deleting the
    file before its own once its own is durable, as the job prunes its older checkpoint (the memory the next write
    takes freed as long before as in the job), the rank's directory removed after. The writers' CPU time, user and
    kernel, each thread's own (``time.thread_time``), summed over the ranks: ``writer_cpu_beside_s`` (the median),
    ``writer_cpu_beside_each_s``, with the bytes written, summed over the ranks (``writer_cpu_beside_B``): u_c timed
    where the job's writes run.
    Kept beside the u_c the model takes (timed apart, beside churning processes), not in its place: at 4 ranks it
    came to 0.53 ns per byte at 254 MB and 0.37 at a gigabyte (``benchmarks/records/lab_dist_one_point-2026-12-06f``
    and ``-06g``, each file deleted right before the next write), where rank 0's writer in trials of the same jobs
    (not kept) took 0.54 and 0.68 ns per byte of its thread's CPU time per checkpoint cycle
    (:func:`~mlsysim.lab.distributed.accounting.cycles`), the first checkpoints the costliest."""
    import threading
    from ..store import write_durable
    from .staging import summed
    own_dir = tempfile.mkdtemp(prefix=f"cpu-{os.getpid()}-", dir=directory)
    took = []
    try:
        for i in range(repeats):
            path, cpu = Path(own_dir) / f"c{i}.bin", []

            def write():
                c0 = time.thread_time()
                try:
                    write_durable(path, [data])
                finally:
                    cpu.append(time.thread_time() - c0)
                if i:                          # pruned once this one is durable, while the job trains on
                    os.remove(Path(own_dir) / f"c{i - 1}.bin")
            writer = threading.Thread(target=write, name="mlsysim-cpu-probe")
            writer.start()
            for _ in range(max(steps, 1)):
                job.step()
            writer.join()
            if not path.exists():
                raise MlsysimError(f"the writer beside the job's steps wrote no {path}")
            took.append(summed(group, cpu[0]))
    finally:
        shutil.rmtree(own_dir, ignore_errors=True)
    return {"writer_cpu_beside_s": statistics.median(took), "writer_cpu_beside_each_s": took,
            "writer_cpu_beside_B": summed(group, data.nbytes)}
