"""Where a node loss's downtime goes: the distributed lab's job started fresh, and restarted after a loss.

    python benchmarks/bench_lab_restart.py --json out.json     # 2 nodes x 1 and 2 x 2 ranks, about six minutes

The refined model (:func:`mlsysim.lab.distributed.terms.refined_recovery`) predicted a node loss's downtime as
the job's measured start (:func:`mlsysim.lab.distributed.terms.start_s`: a fresh launch at the job's size, until
rank 0's resume event) plus the predicted recovery. Over the runs recorded so, up to 2026-12-05i, the first loss
on 2 nodes x 1 took less than that in every run, the second on 2 nodes x 2 more; the model now takes the killed
job's own first start and the driver's teardown of the lost node instead. This times the pieces, at the state size the
benchmark loses a node at (1 GB, FSDP, the ``concurrent`` engine with its memory tiers, as
``run_distributed(kill="node")`` runs it):

* two launches of the job, one right after the other: from the launch to the workers' start events (the
  agents, the rendezvous, new Python processes with PyTorch, the process groups: ``launch_s``), and from
  there to rank 0's resume event (the model built and sharded, the engines' buffers touched: ``setup_s``, of
  which the buffers' touch is ``prepare_s``);
  the second finds the memory the first one's workers freed a moment before, as a restart finds the
  memory of the workers a loss killed;
* the two losses of that run, the first recovered from the peer's memory, the second (the survivor's workers
  killed too) from storage: from the kill to the new workers' start events (the killed processes gone, a
  replacement agent started, the rendezvous, the new processes: ``rejoin_s``), and from there to the resume,
  less the recovery the worker reports (``setup_s``, with ``recovery_s`` beside it).

A measurement, not a test: it needs the torch extra.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from lab_report import finish, record_head

SIZE_B, LAYERS = 1000e6, 2
STEPS, EVERY = 6, 2            # as bench_lab_dist.py loses a node: three checkpoints
NODES = ((2, 1), (2, 2))       # (nodes, ranks per node)


def _phases(run, t0: float, kills=()) -> list[dict]:
    """Per attempt of ``run`` (a launcher Attempt): its start, from ``t0`` or from the kill that ended the
    attempt before, to the workers' first start event, and on to rank 0's resume event, less its recovery;
    of that setup, rank 0's touch of the engines' snapshot buffers (``prepare_s``)."""
    out = []
    prepared = [e["prepared_s"] for e in run.events if "prepared_s" in e]     # one per attempt, rank 0's
    starts = [t for e, t in zip(run.events, run.times) if "start" in e]   # an attempt's number may repeat
    for attempt in range(len(kills) + 1):
        begin = t0 if attempt == 0 else kills[attempt - 1]
        started = min(t for t in starts if t >= begin)
        resumed = [(e, t) for e, t in zip(run.events, run.times) if "resumed_from" in e][attempt]
        out.append({"from_s": started - begin, "setup_s": resumed[1] - started - resumed[0]["recovery_s"],
                    "prepare_s": prepared[attempt], "recovery_s": resumed[0]["recovery_s"],
                    "source": resumed[0]["source"]})
    return out


def measure(nodes: int, nproc: int, d_model: int) -> dict:
    """Two launches of the job in a row (one step each), then the run that loses a node twice."""
    from mlsysim.lab.distributed import launcher
    with tempfile.TemporaryDirectory(prefix="mlsysim-restart-") as tmp:
        starts = []
        for i in range(2):          # the second launch right after the first ended, in the memory it freed
            t0 = time.monotonic()
            fresh = launcher.launch(Path(tmp) / f"fresh-{i}", nproc, 1, every=EVERY, engine="concurrent",
                                    nodes=nodes, memory=True, d_model=d_model, layers=LAYERS)
            starts.append(*_phases(fresh, t0))
        first, second = launcher.node_loss_steps(STEPS, EVERY)
        losses = [launcher.NodeLoss(first), launcher.NodeLoss(second, point="stored", memory_too=True)]
        t0 = time.monotonic()
        run = launcher.launch(Path(tmp) / "killed", nproc, STEPS, every=EVERY, engine="concurrent", nodes=nodes,
                              memory=True, d_model=d_model, layers=LAYERS, node_losses=losses, checksums=True)
        _, *after = _phases(run, t0, run.kill_times)
    return {"nodes": nodes, "ranks_per_node": nproc,
            "fresh": [{"launch_s": x["from_s"], "setup_s": x["setup_s"], "prepare_s": x["prepare_s"]}
                      for x in starts],
            "losses": [{"rejoin_s": a["from_s"], "setup_s": a["setup_s"], "prepare_s": a["prepare_s"],
                        "recovery_s": a["recovery_s"],
                        "source": a["source"], "downtime_s": d} for a, d in zip(after, run.downtimes())]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="append", default=[], help="write the record here (repeatable)")
    a = p.parse_args(argv)
    from mlsysim.lab.distributed.restore import config_for
    t_start = time.time()
    cfg = config_for(SIZE_B, 32, LAYERS, STEPS)
    runs = []
    for nodes, nproc in NODES:
        r = measure(nodes, nproc, cfg.d_model)
        for i, f in enumerate(r["fresh"]):
            print(f"{nodes} nodes x {nproc}, {cfg.state_B / 1e6:.0f} MB: launch {i + 1} {f['launch_s']:.2f} s + setup "
                  f"{f['setup_s']:.2f} s (buffers {f['prepare_s']:.2f} s) = {f['launch_s'] + f['setup_s']:.2f} s",
                  flush=True)
        for x in r["losses"]:
            print(f"   loss, recovered from {x['source']}: rejoin {x['rejoin_s']:.2f} s + setup {x['setup_s']:.2f} s "
                  f"(buffers {x['prepare_s']:.2f} s) + recovery {x['recovery_s']:.2f} s; "
                  f"downtime {x['downtime_s']:.2f} s", flush=True)
        runs.append(r)
    result = {**record_head("mlsysim.lab.restart/1", "bench_lab_restart.py", argv, t_start),
              "state_B": cfg.state_B, "d_model": cfg.d_model, "layers": LAYERS, "steps": STEPS, "every": EVERY,
              "runs": runs, "wall_s": time.time() - t_start}
    return finish([], result, a.json)


if __name__ == "__main__":
    raise SystemExit(main())
