"""Does a writer beside the training slow the training's own computing? The distributed lab's job at a gigabyte.

    python benchmarks/bench_lab_contention.py --json out.json     # 2 and 4 ranks, about four minutes
    python benchmarks/bench_lab_contention.py --writer dcp --json out.json   # DCP's way of writing beside

A candidate term for the overhead per checkpoint that the refined model
(:mod:`mlsysim.lab.distributed.terms`) leaves out: while a checkpoint's writer streams bytes through memory
(CRC-32, the copy into the page cache), the training's own compute on the other core may run slower,
its caches and memory bus shared. The kernel's count of the training thread's CPU time
(``time.thread_time``) isolates it: the time the writer takes from the cores is the writer's, not the
training thread's. Each rank of the job (FSDP2 on gloo, 2 layers, the width whose state comes closest
to 1 GB; two steps trained first) trains ``STEPS`` steps alone, then ``STEPS`` beside a thread of its own
that writes a buffer of its shard's size durably, over and over (:func:`mlsysim.lab.store.write_durable`,
this package's writer; with ``--writer dcp`` DCP's way: each write a new file left whole in the page cache,
``fsync`` at its end, the file written :data:`~mlsysim.lab.distributed.beside.DCP_KEEP` writes before deleted),
twice in turn. Recorded per world size: rank 0's training-thread CPU seconds and wall seconds of each step, the
bytes its writer moved while the steps ran beside it, and their quotient, the training thread's extra CPU time per
byte written (s/B); and the same of all the rank's threads but the writer (the training thread and gloo's, which
move the collectives' bytes through the kernel: the process's CPU time less the writer thread's), with the
writer's own CPU time per byte. A measurement, not a test: it needs the torch extra.
"""
from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from pathlib import Path

from lab_report import finish, record_head, run_worker_job

SIZE_B, LAYERS, STEPS, REPEATS = 1000e6, 2, 4, 2
WORLDS = (2, 4)
TIMEOUT_S = 600


def _writer(directory: str, rank: int, data, kind: str):
    """One durable write of ``data`` a call, in the calling thread: this package's (``own``) or DCP's way (``dcp``:
    a new file left whole in the page cache, ``fsync`` at its end, then the file written ``DCP_KEEP`` calls before
    deleted: :func:`mlsysim.lab.distributed.beside.kept_series`)."""
    from mlsysim.lab.distributed.beside import kept_series
    from mlsysim.lab.store import write_durable
    if kind == "own":
        path = Path(directory) / f"writer-{rank}.bin"
        return lambda: write_durable(path, [data])
    return kept_series(directory, data, str(rank))


def _worker(directory: str, out: str, kind: str = "own") -> None:
    """One rank (under torchrun): the steps alone and beside its writer, rank 0 writing the result."""
    import numpy as np
    import torch.distributed as dist
    from mlsysim.lab.distributed.probes import local_B
    from mlsysim.lab.distributed.restore import config_for
    from mlsysim.lab.distributed.worker import Job
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    cfg = config_for(SIZE_B, 32, LAYERS, 2 + 2 * REPEATS * STEPS)
    job = Job(cfg, "fsdp")
    job.step()
    job.step()
    shard_B = sum(local_B(t) for t in job.tensors().values())
    data = np.full(shard_B, 7, dtype=np.uint8)
    write_one = _writer(directory, rank, data, kind)

    def steps() -> list:
        out = []
        for _ in range(STEPS):
            c, t = time.thread_time(), time.perf_counter()
            job.step()
            out.append((time.thread_time() - c, time.perf_counter() - t))
        return out

    alone, beside, moved, threads, writer_cpu = [], [], 0, {"alone": 0.0, "beside": 0.0}, 0.0
    for _ in range(REPEATS):
        dist.barrier()
        c0 = time.process_time()
        alone += steps()
        threads["alone"] += time.process_time() - c0
        stop, count, cpu = threading.Event(), [0], [0.0]

        def write() -> None:
            t0 = time.thread_time()
            while not stop.is_set():
                write_one()
                count[0] += 1
            cpu[0] = time.thread_time() - t0
        writer = threading.Thread(target=write, name="contention-writer")
        dist.barrier()
        c0 = time.process_time()
        writer.start()
        beside += steps()
        stop.set()
        writer.join()
        threads["beside"] += time.process_time() - c0 - cpu[0]     # the writer's last write ran past the steps
        moved += count[0] * shard_B
        writer_cpu += cpu[0]
    if rank == 0:
        extra = (statistics.mean(c for c, _ in beside) - statistics.mean(c for c, _ in alone)) * len(beside)
        Path(out).write_text(json.dumps({
            "world_size": world, "state_B": cfg.state_B, "d_model": cfg.d_model, "shard_B": shard_B,
            "alone_cpu_s": [c for c, _ in alone], "alone_wall_s": [w for _, w in alone],
            "beside_cpu_s": [c for c, _ in beside], "beside_wall_s": [w for _, w in beside],
            "moved_B": moved, "extra_cpu_s": extra, "extra_cpu_s_per_B": extra / moved,
            "per_checkpoint_s": extra / moved * shard_B, "writer": kind,
            "threads_alone_cpu_s": threads["alone"], "threads_beside_cpu_s": threads["beside"],
            "threads_extra_cpu_s_per_B": (threads["beside"] - threads["alone"]) / moved,
            "writer_cpu_s_per_B": writer_cpu / moved}, indent=1))
    dist.destroy_process_group()


def _run(world: int, kind: str) -> dict:
    """One torchrun job of ``world`` ranks (:func:`lab_report.run_worker_job`)."""
    return run_worker_job(__file__, world, (kind,), timeout_s=TIMEOUT_S, prefix="mlsysim-contention-")


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--json", help="write the result to this file")
    p.add_argument("--writer", choices=("own", "dcp"), default="own",
                   help="this package's durable writer (default) or DCP's way: each file cached whole, fsync at its end")
    p.add_argument("--worker", nargs=3, metavar=("DIR", "OUT", "WRITER"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        _worker(*a.worker)
        return 0
    t0 = time.time()
    runs = []
    for world in WORLDS:
        r = _run(world, a.writer)
        runs.append(r)
        print(f"{world} ranks: training thread {statistics.mean(r['alone_cpu_s']):.3f} s of CPU per step alone, "
              f"{statistics.mean(r['beside_cpu_s']):.3f} s beside its writer ({r['moved_B'] / 1e9:.1f} GB written); "
              f"{r['extra_cpu_s_per_B'] * 1e9:.3f} ns per byte, {r['per_checkpoint_s']:.3f} s per checkpoint "
              f"of its {r['shard_B'] / 1e6:.0f} MB shard; all its threads but the writer "
              f"{r['threads_extra_cpu_s_per_B'] * 1e9:.3f} ns per byte, the writer {r['writer_cpu_s_per_B'] * 1e9:.3f}",
              flush=True)
    d = {**record_head("mlsysim.lab.dist-contention/1", "bench_lab_contention.py", argv, t0), "writer": a.writer,
         "steps": STEPS,
         "repeats": REPEATS, "runs": runs, "wall_s": time.time() - t0}
    return finish([], d, [a.json] if a.json else [])


if __name__ == "__main__":
    raise SystemExit(main())
