"""How long DCP's staging of the distributed lab's job takes, by what its memory did since the last staging.

    python benchmarks/bench_lab_dcp_staging.py --json out.json     # 2 and 4 ranks at a gigabyte, about 10 minutes

``dcp.async_save``'s stall is mostly its staging: on a CPU job PyTorch 2.13's stager deep-copies each
DTensor and copies it again into tensors it allocates (:func:`mlsysim.lab.distributed.probes.dcp_stage`), so
every save faults in new memory. What that costs depends on where the memory comes from: memory freed a
moment before is still the guest's, memory freed seconds before may be the host's again (this machine is a
virtual machine that takes back what the guest frees, ``benchmarks/records/lab_reporting-2026-12-05.json``),
and the training's own steps allocate and free in between. The refined model takes rank 0's staging from
the probe, timed back to back in the restore job; the job's saves come a checkpoint's gap apart, each
staging held until the save is durable. In one job (FSDP2 on gloo, 2 layers, the width whose state comes
closest to 1 GB; two steps trained first) every rank times its staging, ``REPEATS`` times each:

* ``probe``: :func:`~mlsysim.lab.distributed.probes.dcp_stage` itself, as the restore job times it (its median);
* ``back_to_back``: each staging freed, the next at once;
* ``after_pause``: each freed, then ``PAUSE_S`` seconds idle, as a gap without training;
* ``after_steps``: each freed, then ``EVERY`` training steps (the benchmark's gap), then the next;
* ``held``: each held while ``EVERY`` steps train, then freed, the next at once;
* ``engine``: this package's ``DcpEngine`` with ``dcp.async_save``, a save every ``EVERY`` steps, its stall
  as the lab's job times it (rank 0, until ``save`` returns).

Recorded per world size: rank 0's seconds of each. Target: the probe within ±25 % of the engine's median
stall in the same job, the term the model takes against the figure it predicts. A measurement, not a test:
it needs the torch extra.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from lab_report import finish, record_head, run_worker_job

SIZE_B, LAYERS, EVERY, REPEATS, PAUSE_S = 1000e6, 2, 4, 5, 6.0
WORLDS = (2, 4)
TIMEOUT_S = 900


def _worker(directory: str, out: str, size_B: float, repeats: int) -> None:
    """One rank (under torchrun): every way of timing the staging in turn, rank 0 writing the result."""
    import torch.distributed as dist
    from torch.distributed.checkpoint import FileSystemWriter
    from mlsysim.lab.distributed.staging import at_once, dcp_stage
    from mlsysim.lab.distributed.restore import config_for
    from mlsysim.lab.distributed.worker import Job
    from mlsysim.lab.pytorch.engines import DcpEngine
    dist.init_process_group("gloo")
    group = dist.new_group(backend="gloo")
    cfg = config_for(size_B, 32, LAYERS, 2 + EVERY * repeats * 4)
    job = Job(cfg, "fsdp")
    job.step()
    job.step()
    writer = FileSystemWriter(str(Path(directory) / "unused"))

    def stage():
        state = job.dcp_state()

        def staged():
            out = writer.stage(state)
            return out.result() if hasattr(out, "result") else out
        took, _, out = at_once(group, staged)   # every rank at once, as the probe and the job's saves stage
        return took, out

    def train() -> None:
        for _ in range(EVERY):
            job.step()

    times = {"probe": [dcp_stage(group, job, repeats)["dcp_stage_own_s"]]}
    for way in ("back_to_back", "after_pause", "after_steps", "held"):
        times[way] = []
        for _ in range(repeats):
            took, staged = stage()
            if way == "held":
                train()
            del staged
            if way == "after_pause":
                time.sleep(PAUSE_S)
            elif way == "after_steps":
                train()
            times[way].append(took)
    engine = None
    for i in range(dist.get_world_size()):   # one rank at a time, as the lab's job makes it
        if i == dist.get_rank():
            engine = DcpEngine(str(Path(directory) / "dcp"), keep=2, asynchronous=True, process_group=group)
        dist.barrier()
    times["engine"] = []
    for _ in range(repeats + 1):            # the first save is left out: nothing was staged before it
        train()
        times["engine"].append(engine.save(job.step_count, job.dcp_state()))
    engine.close()
    times["engine"] = times["engine"][1:]
    if dist.get_rank() == 0:
        Path(out).write_text(json.dumps({"world_size": dist.get_world_size(), "state_B": cfg.state_B,
                                         "d_model": cfg.d_model, "seconds": times}, indent=1))
    dist.destroy_process_group()


def _run(world: int, size_B: float, repeats: int) -> dict:
    """One torchrun job of ``world`` ranks (:func:`lab_report.run_worker_job`), one intra-op thread a rank."""
    return run_worker_job(__file__, world, ("--size-mb", size_B / 1e6, "--repeats", repeats), TIMEOUT_S,
                          {"OMP_NUM_THREADS": "1"}, "mlsysim-dcp-staging-")


def main(argv=None) -> int:
    from mlsysim.lab.pytorch.results import within_bound
    p = argparse.ArgumentParser()
    p.add_argument("--json", help="write the result to this file")
    p.add_argument("--size-mb", type=float, default=SIZE_B / 1e6, help="the job's state (weights + AdamW moments)")
    p.add_argument("--repeats", type=int, default=REPEATS)
    p.add_argument("--worker", nargs=2, metavar=("DIR", "OUT"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.size_mb <= 0 or a.repeats < 1:
        p.error("--size-mb must be > 0 and --repeats >= 1")
    if a.worker:
        _worker(*a.worker, a.size_mb * 1e6, a.repeats)
        return 0
    t0 = time.time()
    runs, targets = [], []
    for world in WORLDS:
        r = _run(world, a.size_mb * 1e6, a.repeats)
        runs.append(r)
        med = {way: statistics.median(xs) for way, xs in r["seconds"].items()}
        print(f"{world} ranks, {r['state_B'] / 1e6:.0f} MB: rank 0's staging, median s: "
              + ", ".join(f"{way} {m:.3f}" for way, m in med.items()), flush=True)
        targets.append((f"{world} ranks: the probe within ±25 % of the engine's median stall",
                        within_bound(med["engine"], med["probe"]),
                        f"probe {med['probe']:.3f} s, engine {med['engine']:.3f} s ({med['engine'] / med['probe']:.2f}x)"))
    d = {**record_head("mlsysim.lab.dcp-staging/1", "bench_lab_dcp_staging.py", argv, t0), "every": EVERY,
         "repeats": a.repeats, "pause_s": PAUSE_S, "runs": runs, "wall_s": time.time() - t0}
    return finish(targets, d, [a.json] if a.json else [])


if __name__ == "__main__":
    raise SystemExit(main())
