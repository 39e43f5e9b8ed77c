"""The distributed checkpoint lab at full size, on this machine: stall, durable, restore, recovery.

    python benchmarks/bench_lab_dist.py                            # 2 and 4 ranks x 64, 256, 1000 MB
    python benchmarks/bench_lab_dist.py --sizes-mb 64 --nproc 2    # one point, a minute or so
    python benchmarks/bench_lab_dist.py --record                   # store it with the package

For every world size N and state size it runs, with ``torchrun`` on this CPU (gloo, FSDP2):

* the job uninterrupted with this package's sharded ``concurrent`` engine and with
  ``dcp.async_save``, both writing to storage only (no memory tier, which DCP does not have):
  every checkpoint's stall and time to the global commit, and their medians (:func:`mlsysim.lab.distributed.launcher.run_distributed`): median stall and time to
  the global commit of its checkpoints, with :mod:`mlsysim.lab.distributed.predict`'s prediction;
* the three restores of :func:`mlsysim.lab.distributed.restore.measure_restores` (every rank reads the
  replicated file, each owner reads its shard, rank 0 reads and broadcasts): bytes read per
  rank and seconds, beside the prediction;
* at the largest size, two nodes of N / 2 ranks (two ``torchrun`` agents) and a node lost: the
  recovery from the survivor's peer memory against the recovery from durable storage.

Targets (:func:`mlsysim.lab.distributed.results.targets`): the sharded concurrent engine's stall is at
most half of ``dcp.async_save``'s; at the largest size (1 GB) recovery from peer memory is at
least 3x faster than from durable storage; the model is within x2 of the measured durable and
restore times. A measurement, not a test: it needs the torch extra and takes tens of minutes at
full size. ``--record`` stores the result as ``mlsysim/lab/distributed/data/benchmark.json``, the run the
notebook ``06c_lab_distributed`` shows. Exit status 1 if a target is missed.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from lab_report import finish

RECORD = Path(__file__).resolve().parent.parent / "mlsysim" / "lab" / "distributed" / "data" / "benchmark.json"
STEPS, EVERY = 6, 2          # three checkpoints per run: the medians are over three


def _point(nproc: int, size_B: float, layers: int, say) -> dict:
    from mlsysim.lab.distributed.restore import config_for, measure_restores
    from mlsysim.lab.distributed.launcher import run_distributed
    cfg = config_for(size_B, 32, layers, STEPS)
    kw = dict(nproc=nproc, steps=STEPS, every=EVERY, d_model=cfg.d_model, layers=layers)
    say(f"{nproc} ranks, {cfg.state_B / 1e6:.0f} MB: concurrent")
    conc = run_distributed(engine="concurrent", predict=True, memory=False, **kw)   # storage only, as DCP
    say(f"{nproc} ranks, {cfg.state_B / 1e6:.0f} MB: dcp-async")
    dcpa = run_distributed(engine="dcp-async", **kw)
    say(f"{nproc} ranks, {cfg.state_B / 1e6:.0f} MB: restores")
    rest = measure_restores(nproc=nproc, d_model=cfg.d_model, layers=layers, machine=None)
    p = conc.prediction
    schemes = [{"scheme": s.scheme, "bytes_read_per_rank": list(s.bytes_read_per_rank),
                "bytes_read_total": s.bytes_read_total, "checkpoint_file_B": s.checkpoint_file_B,
                "device_bytes_per_rank": None if s.device_bytes_per_rank is None else list(s.device_bytes_per_rank),
                "restore_s": s.restore_s, "broadcast_s": s.broadcast_s, "verified": s.verified,
                "cache_dropped": s.cache_dropped,
                "predicted": {"bytes_read_per_rank": list(s.predicted.bytes_read_per_rank),
                              "bytes_read_total": s.predicted.bytes_read_total, "restore_s": s.predicted.restore_s,
                              "restore_cached_s": s.predicted.restore_cached_s}}
               for s in rest.schemes]
    m = rest.machine
    return {"world_size": nproc, "state_B": cfg.state_B, "d_model": cfg.d_model, "layers": layers,
            "concurrent": {"stall_s": conc.stall_s, "durable_s": conc.durable_s, "stalls_s": list(conc.stalls_s),
                           "durables_s": list(conc.durables_s), "prepare_s": conc.prepare_s},
            "dcp_async": {"stall_s": dcpa.stall_s, "durable_s": dcpa.durable_s, "stalls_s": list(dcpa.stalls_s),
                          "durables_s": list(dcpa.durables_s)},
            "predicted": {"concurrent_stall_s": p["concurrent_stall_s"], "durable_s": p["durable_s"],
                          "restore_s": p["restore_s"], "rank_B": p.get("rank_B")},
            "machine": {"copy_Bps": m.copy_Bps, "write_Bps": m.write_Bps, "read_Bps": m.read_Bps,
                        "link_Bps": m.link_Bps},
            "restores": schemes}


def _node_loss(nproc: int, size_B: float, layers: int, say) -> dict:
    from mlsysim.lab.distributed.restore import config_for
    from mlsysim.lab.distributed.launcher import run_distributed
    cfg = config_for(size_B, 32, layers, STEPS)
    say(f"2 nodes x {nproc // 2} ranks, {cfg.state_B / 1e6:.0f} MB: a node lost")
    r = run_distributed(nproc=nproc // 2, nodes=2, kill="node", engine="concurrent", steps=STEPS, every=EVERY,
                        d_model=cfg.d_model, layers=layers)
    return {"world_size": nproc, "nodes": 2, "state_B": cfg.state_B, "sources": list(r.sources),
            "recovered_from": r.recovered_from, "recovery_s": r.recovery_s,
            "recovery_storage_s": r.recovery_storage_s, "resumed_exactly": r.resumed_exactly,
            "storage_bytes_read_per_rank": list(r.storage_bytes_read_per_rank),
            "peer_bytes_per_rank": list(r.peer_bytes_per_rank), "recovery_phases_s": r.recovery_phases_s,
            "recovery_storage_phases_s": r.recovery_storage_phases_s, "downtime_s": list(r.downtime_s)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes-mb", default="64,256,1000", help="state sizes in MB, comma-separated")
    p.add_argument("--nproc", default="2,4", help="world sizes, comma-separated")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--json", help="also write the result to this file")
    p.add_argument("--record", action="store_true", help=f"store the result as {RECORD.name} in the package")
    p.add_argument("--node-loss-only", metavar="FILE", help="measure the node losses alone and replace them in "
                                                           "this earlier result (its sizes and world sizes)")
    a = p.parse_args(argv)
    sizes = [float(s) * 1e6 for s in a.sizes_mb.split(",")]
    worlds = [int(n) for n in a.nproc.split(",")]
    t0 = time.time()

    def say(m):
        print(f"  {m} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)

    import torch
    from mlsysim.lab.floors import machine_facts
    if a.node_loss_only:
        d = json.loads(Path(a.node_loss_only).read_text())
        sizes, worlds = [max(q["state_B"] for q in d["points"])], sorted({q["world_size"] for q in d["points"]})
        d["node_loss"] = [_node_loss(n, sizes[0], d["points"][0]["layers"], say) for n in worlds if n % 2 == 0]
        d["node_loss_date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0))
        d["node_loss_command"] = "python benchmarks/bench_lab_dist.py " + " ".join(argv or sys.argv[1:])
        return _report(d, a)
    points = [_point(n, s, a.layers, say) for n in worlds for s in sizes]
    losses = [_node_loss(n, max(sizes), a.layers, say) for n in worlds if n % 2 == 0]
    d = {"schema": "mlsysim.lab.dist-benchmark/1", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0)),
         "command": "python benchmarks/bench_lab_dist.py " + " ".join(argv or sys.argv[1:]),
         "machine": {**machine_facts(None), "torch": torch.__version__}, "steps": STEPS, "every": EVERY,
         "points": points, "node_loss": losses, "wall_s": time.time() - t0}
    return _report(d, a)


def _report(d: dict, a) -> int:
    from mlsysim.lab.distributed.results import targets
    points, losses = d["points"], d["node_loss"]
    print("| ranks | state MB | concurrent stall s | dcp-async stall s | durable s (model) | sharded restore s "
          "(model) |")
    print("|---|---|---|---|---|---|")
    for q in points:
        sh = next(r for r in q["restores"] if r["scheme"] == "sharded")
        print(f"| {q['world_size']} | {q['state_B'] / 1e6:.0f} | {q['concurrent']['stall_s']:.3f} | "
              f"{q['dcp_async']['stall_s']:.3f} | {q['concurrent']['durable_s']:.3f} "
              f"({q['predicted']['durable_s']:.3f}) | {sh['restore_s']:.3f} ({sh['predicted']['restore_s']:.3f}) |")
    for n in losses:
        print(f"node lost at {n['world_size']} ranks, {n['state_B'] / 1e6:.0f} MB: {n['sources']}, peer memory "
              f"{n['recovery_s']:.3f} s, storage {n['recovery_storage_s']:.3f} s")
    return finish(targets(d), d, ([a.json] if a.json else []) + ([RECORD] if a.record else []))


if __name__ == "__main__":
    raise SystemExit(main())
