"""The distributed checkpoint lab at full size, on this machine: stall, durable, restore, recovery.

    python benchmarks/bench_lab_dist.py                            # 2 and 4 ranks x 64, 256, 1000 MB
    python benchmarks/bench_lab_dist.py --sizes-mb 64 --nproc 2    # one point, a minute or so
    python benchmarks/bench_lab_dist.py --record                   # store it with the package
    python benchmarks/bench_lab_dist.py --remodel --record         # the stored run, predicted again by this model
    python benchmarks/bench_lab_dist.py --terms-from benchmarks/records/lab_dist-2026-12-06j.json   # node losses alone

For every world size N and state size it runs, with ``torchrun`` on this CPU (gloo, FSDP2):

* the job uninterrupted with this package's sharded ``concurrent`` engine and with
  ``dcp.async_save``, both writing to storage only (no memory tier, which DCP does not have):
  every checkpoint's stall and time to the global commit, and their medians
  (:func:`mlsysim.lab.distributed.launcher.run_distributed`);
* the three restores of :func:`mlsysim.lab.distributed.restore.measure_restores` (every rank reads the
  replicated file, each owner reads its shard, rank 0 reads and broadcasts), each ``RESTORES`` times in
  one job, the median: bytes read per rank and seconds, beside the prediction;
* at the largest size, two nodes of N / 2 ranks (two ``torchrun`` agents) and a node lost: the
  recovery from the survivor's peer memory against the recovery from durable storage, and the
  downtime per loss beside the job's own start (its launch until it first resumed, in the same run) and the
  driver's teardown of the lost node; a launch of the same job apart, before it (``start_apart_s``,
  :func:`mlsysim.lab.distributed.terms.start_s`, the start the runs up to 2026-12-05i took): the model's T is
  the mean of the two starts (:func:`mlsysim.lab.distributed.terms.job_start_s`); each loss, with its launch
  apart, ``NODE_LOSS_TRIALS`` times (``trials``): the recoveries, downtimes and starts are their means, each
  figure with its standard error (``--terms-from RECORD`` times these alone, the model's other terms taken
  from a kept run's points at its largest state); each trial keeps the ``concurrent`` engine's preparation of
  its buffers at the killed job's start and after each loss (``prepares_s``) and at the launch apart
  (``start_apart_prepare_s``);
* the overhead per checkpoint of both engines: the job trains ``PLAIN`` steps without checkpoints,
  then checkpoints every ``EVERY`` steps; each checkpoint's cycle (its stall and the two steps after it)
  less the two steps after those, the last before the next checkpoint: a baseline in the same stretch
  of the job; their mean, and the same of rank 0's CPU time
  (:func:`mlsysim.lab.distributed.accounting.overhead_per_checkpoint`); rank 0's step ends are kept
  (``step_ends_s``, from 2026-12-08 on), so that another cycle can be taken from the record.

Every figure has two predictions beside it: the first (``naive``: :mod:`mlsysim.lab.distributed.predict`,
``ms.checkpoint`` with a copy, a write and a read rate) and the refined one
(:mod:`mlsysim.lab.distributed.terms`: the same rates with the terms the first leaves out, each measured in the
same point: CRC-32, page-cache write, the cores the ranks share, copies of N ranks at once (in pieces of a
rank's largest tensor, as the engine copies its state), gloo's broadcast (of a buffer, and of the state's
tensors into tensors the receivers allocate) and point-to-point rates, the writers' CPU time (after a gap alone;
beside processes that churn memory at the rate the job's plain steps fault it in, at the `concurrent` job's
cadence; and writing as DCP's writer does, at the DCP job's cadence), what busy processes lose beside them and
the CPU time the host takes from this machine meanwhile, the ranks' busy share in the job's plain steps, each
engine's fixed costs per save, the job's start and the teardown of a lost node). Each training job times its
own copy, disk and DCP's staging once its last checkpoint is durable (:mod:`mlsysim.lab.distributed.in_job`,
``job_terms``), and the model takes those in place of the same terms timed apart
(:func:`mlsysim.lab.distributed.results.probed_apart` predicts a run from the apart ones again).

Targets (:func:`mlsysim.lab.distributed.results.targets`): the sharded concurrent engine's stall is at
most half of ``dcp.async_save``'s; the refined model is within ±25 % of every measured figure
(x1.5 under 0.1 s). A measurement, not a test: it needs the torch extra and takes tens of minutes at
full size. ``--record`` stores the result as ``mlsysim/lab/distributed/data/benchmark.json``, the run the
notebook ``06c_lab_distributed`` shows. Exit status 1 if a target is missed.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import time
from pathlib import Path

from lab_report import finish, record_head

RECORD = Path(__file__).resolve().parent.parent / "mlsysim" / "lab" / "distributed" / "data" / "benchmark.json"
EVERY = 4                    # a checkpoint every four steps after the plain ones (steps 8, 12, ...)
CHECKPOINTS = ((500e6, 41), (math.inf, 13))   # per run, by state size: (below this many bytes, checkpoints);
                             # the stall and durable medians are over all, the overhead's mean over all but the
                             # last (a full interval after each). A cycle's overhead spreads from one checkpoint
                             # to the next by about its mean or more on this machine; the mean of 40 is surer
                             # than the x1.5 bound (an overhead under 0.1 s) where they spread by the mean
                             # (results.cycles_needed). At a gigabyte the `concurrent` overhead's spread asked for
                             # 71 to 791 cycles in the runs 2026-12-05j to 2026-12-06, hours of the job: 12 stay.
                             # The kept runs up to 2026-12-05m took 25 below 100 MB, 13 above.
JOB_TIMEOUT_S = 900          # a job's limit: 56 steps of the slowest point (4 ranks, 1 GB) take about 250 s, its
                             # restore job about 300 s (5 rounds, the probes; 300 s, its limit up to 2026-12-08b)
RESTORES = 5                 # each restore scheme timed five times in one job: the median
NODE_LOSS_STEPS, NODE_LOSS_EVERY = 6, 2   # the two-node run that loses a node: three checkpoints
PEER_PROBES = 3   # the uninterrupted two-node job times the recovery's transfer this many times at its end
NODE_LOSS_TRIALS = 3         # each node loss (and its launch apart) this many times: a recovery and a downtime are
                             # their mean, with its standard error; the kept runs up to 2026-12-06j timed each once,
                             # and a downtime's ratio to the model moved by 27 % over them on 2 nodes x 2
PLAIN = 4                    # steps trained before any checkpoint (the first one a warm-up)
PROBE_TERMS = ((500e6, 7), (math.inf, 5))   # each training job times its own copies, disk and DCP's staging
                             # at its end, this many times by state size (the median); the kept runs up to
                             # 2026-12-06f took three, whose medians at 61 MB differed by two to three times
                             # between 2026-12-06d and -06f (the write on 2 ranks, DCP's staging on 4)


def steps_for(state_B: float) -> int:
    """The steps of a run at ``state_B`` bytes of state: the plain ones, then :data:`CHECKPOINTS`' count
    of checkpoints, one every :data:`EVERY` steps."""
    return PLAIN + EVERY * next(n for below, n in CHECKPOINTS if state_B < below)


def probes_for(state_B: float) -> int:
    """How many times a job at ``state_B`` bytes of state times each of its own terms (:data:`PROBE_TERMS`)."""
    return next(n for below, n in PROBE_TERMS if state_B < below)


def _engine(run, naive: dict, refined: dict) -> dict:
    return {"stall_s": run.stall_s, "durable_s": run.durable_s, "stalls_s": list(run.stalls_s),
            "durables_s": list(run.durables_s), "shards_s": list(run.shards_s), "overhead_s": run.overhead_s,
            "overheads_s": list(run.overheads_s),
            "plain_step_s": run.plain_step_s, "plain_step_cpu_s": run.plain_step_cpu_s,
            "overheads_cpu_s": None if run.overheads_cpu_s is None else list(run.overheads_cpu_s),
            "overhead_cpu_s": run.overhead_cpu_s,
            "step_ends_s": None if run.step_ends_s is None else list(run.step_ends_s), "job_terms": run.job_terms,
            "predicted": {"naive": naive, "refined": refined}}


def _twice(run, say) -> tuple:
    """``run()``, launched once more if its launch fails (a rendezvous that times out once does not throw
    away the run's points): (its result, the attempts)."""
    from mlsysim.lab.distributed.launcher import LaunchError
    try:
        return run(), 1
    except LaunchError as e:
        say(f"   failed, launched again: {e}")
        return run(), 2


def _scheme(s, refined_s: float) -> dict:
    return {"scheme": s.scheme, "bytes_read_per_rank": list(s.bytes_read_per_rank),
            "bytes_read_total": s.bytes_read_total, "checkpoint_file_B": s.checkpoint_file_B,
            "device_bytes_per_rank": None if s.device_bytes_per_rank is None else list(s.device_bytes_per_rank),
            "restore_s": s.restore_s, "rounds_s": list(s.rounds_s), "read_s": s.read_s, "broadcast_s": s.broadcast_s,
            "load_s": s.load_s, "verified": s.verified, "cache_dropped": s.cache_dropped,
            "warmed_B_per_rank": list(s.warmed_B_per_rank),
            "predicted": {"bytes_read_per_rank": list(s.predicted.bytes_read_per_rank),
                          "bytes_read_total": s.predicted.bytes_read_total, "restore_s": s.predicted.restore_s,
                          "restore_cached_s": s.predicted.restore_cached_s, "refined_restore_s": refined_s}}


def _point(nproc: int, size_B: float, layers: int, say) -> tuple[dict, object]:
    from mlsysim.lab.distributed import predict, refine, terms
    from mlsysim.lab.distributed.restore import config_for, measure_restores
    from mlsysim.lab.distributed.launcher import run_distributed
    steps = steps_for(size_B)
    cfg = config_for(size_B, 32, layers, steps)
    kw = dict(nproc=nproc, steps=steps, every=EVERY, d_model=cfg.d_model, layers=layers, plain_steps=PLAIN,
              timeout_s=JOB_TIMEOUT_S, probe_terms=probes_for(size_B))
    tag = f"{nproc} ranks, {cfg.state_B / 1e6:.0f} MB"
    say(f"{tag}: concurrent")
    conc = run_distributed(engine="concurrent", memory=False, **kw)   # storage only, as DCP
    say(f"{tag}: dcp-async")
    dcpa = run_distributed(engine="dcp-async", **kw)
    say(f"{tag}: restores")
    rest, _ = _twice(lambda: measure_restores(nproc=nproc, d_model=cfg.d_model, layers=layers, machine=None,
                                              repeats=RESTORES, probe_B=min(refine.PROBE_B, cfg.state_B),
                                              stage_steps=EVERY, timeout_s=JOB_TIMEOUT_S), say)
    say(f"{tag}: the terms")
    t = refine.job_terms(conc, rest, gap_s=EVERY * dcpa.plain_step_s, dcp_run=dcpa)   # u_f at DCP's own gap
    naive_m = predict.dist_machine(t.copy_Bps, t.write_Bps, t.read_cold_Bps, predict.loopback_Bps(refine.PROBE_B))
    step_s = conc.plain_step_s
    p = predict.predict_job(cfg.state_B, nproc, "fsdp", naive_m, interval_s=EVERY * step_s)
    naive = {"stall_s": p.concurrent_stall_s, "durable_s": p.durable_s, "overhead_s": p.concurrent_stall_s}
    ref = terms.refined_job(t, cfg.state_B, "fsdp", gap_s=EVERY * dcpa.plain_step_s)
    schemes = [_scheme(dataclasses.replace(s, predicted=predict.predict_restore(s.scheme, cfg.state_B, nproc, naive_m)),
                       terms.refined_restore(t, s.scheme, cfg.state_B)) for s in rest.schemes]
    return {"world_size": nproc, "state_B": cfg.state_B, "d_model": cfg.d_model, "layers": layers, "steps": steps,
            "concurrent": {**_engine(conc, naive, ref["concurrent"]), "prepare_s": conc.prepare_s},
            "dcp_async": _engine(dcpa, naive, ref["dcp-async"]),
            "predicted": {"concurrent_stall_s": p.concurrent_stall_s, "durable_s": p.durable_s,
                          "restore_s": p.restore_s, "rank_B": p.rank_B},
            "machine": dataclasses.asdict(naive_m), "terms": t.to_dict(), "terms_s": ref["terms"],
            "gloo": rest.gloo, "restores": schemes}, t


def _node_loss(nproc: int, size_B: float, layers: int, t, say, trials: int = NODE_LOSS_TRIALS) -> dict:
    from mlsysim.lab.distributed import predict, refine, results, terms
    from mlsysim.lab.distributed.restore import config_for
    from mlsysim.lab.distributed.launcher import launch, run_distributed
    cfg = config_for(size_B, 32, layers, NODE_LOSS_STEPS)
    tag = f"2 nodes x {nproc // 2} ranks, {cfg.state_B / 1e6:.0f} MB"
    each = []
    for i in range(trials):
        say(f"{tag}: the job's start, launched apart ({i + 1} of {trials})")
        apart, apart_prep = terms.start_s(launch, nproc // 2, nodes=2, d_model=cfg.d_model, layers=layers)
        say(f"{tag}: a node lost ({i + 1} of {trials})")
        r, attempt = _twice(lambda: run_distributed(nproc=nproc // 2, nodes=2, kill="node", engine="concurrent",
                                                    steps=NODE_LOSS_STEPS, every=NODE_LOSS_EVERY,
                                                    d_model=cfg.d_model, layers=layers, probe_terms=PEER_PROBES), say)
        jt = r.job_terms or {}
        each.append({"sources": list(r.sources), "recovered_from": r.recovered_from, "recovery_s": r.recovery_s,
                     "recovery_storage_s": r.recovery_storage_s, "resumed_exactly": r.resumed_exactly,
                     "storage_bytes_read_per_rank": list(r.storage_bytes_read_per_rank),
                     "peer_bytes_per_rank": list(r.peer_bytes_per_rank), "recovery_phases_s": r.recovery_phases_s,
                     "recovery_storage_phases_s": r.recovery_storage_phases_s, "downtime_s": list(r.downtime_s),
                     "start_s": r.start_s, "teardown_s": list(r.teardown_s), "start_apart_s": apart,
                     "prepares_s": list(r.prepares_s), "start_apart_prepare_s": apart_prep,
                     "attempts": attempt, "peer_transfer_s": jt.get("peer_transfer_s"),
                     "peer_transfer_each_s": jt.get("peer_transfer_each_s"), "peer_transfer_B": jt.get("peer_transfer_B")})
    naive = predict.predict_recovery(cfg.state_B, nproc, 2, predict.dist_machine(
        t.copy_Bps, t.write_Bps, t.read_cold_Bps, predict.loopback_Bps(refine.PROBE_B)))
    mean = {k: _mean(each, k) for k in ("recovery_s", "recovery_storage_s", "downtime_s", "start_s", "teardown_s",
                                        "start_apart_s")}
    start = None if mean["start_s"] is None else terms.job_start_s(mean["start_s"], mean["start_apart_s"])
    t = dataclasses.replace(t, job_peer_transfer_s_per_B=results.peer_transfer_s_per_B(each))
    refined = terms.refined_recovery(dataclasses.replace(t, start_s=start), cfg.state_B,
                                     tuple(mean["teardown_s"] or (0.0, 0.0)))
    return {**each[0], **mean, "world_size": nproc, "nodes": 2, "state_B": cfg.state_B,
            "resumed_exactly": all(e["resumed_exactly"] for e in each), "attempts": sum(e["attempts"] for e in each),
            "trials": each, "predicted": {"naive": {"peer_memory_s": naive.peer_memory_s,
                                                    "storage_s": naive.storage_s}, "refined": refined}}


def _mean(trials: list, key: str):
    """The mean over ``trials`` of ``key`` (a number, or a list of them, element by element); None where one
    trial has none (a job that never resumed) or where their lists differ in length."""
    vs = [tr[key] for tr in trials]
    if any(v is None for v in vs):
        return None
    if isinstance(vs[0], list):
        if len({len(v) for v in vs}) != 1:
            return None
        return [statistics.mean(x) for x in zip(*vs)]
    return statistics.mean(vs)


def _terms_from(path: str) -> dict:
    """{world size: (its largest state, the Terms its point measured)} from a kept run (``--terms-from``)."""
    from mlsysim.lab.distributed.terms import Terms
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    out = {}
    for q in d["points"]:
        if q["world_size"] not in out or q["state_B"] > out[q["world_size"]][0]:
            out[q["world_size"]] = (q["state_B"], Terms(**q["terms"]))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes-mb", default="64,256,1000", help="state sizes in MB, comma-separated")
    p.add_argument("--nproc", default="2,4", help="world sizes, comma-separated")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--json", help="also write the result to this file")
    p.add_argument("--record", action="store_true", help=f"store the result as {RECORD.name} in the package")
    p.add_argument("--remodel", action="store_true",
                   help=f"measure nothing: compute the refined predictions of the stored {RECORD.name} again with "
                        f"this model, from the terms it measured, and print it; with --record store it, and the "
                        f"record before it, again")
    p.add_argument("--terms-from", metavar="RECORD",
                   help="time only the node losses, at the largest state of RECORD (a kept run), the model's terms "
                        "taken from that run's points there (the record says which)")
    a = p.parse_args(argv)
    if a.terms_from and (a.remodel or a.record):
        p.error("--terms-from times the node losses alone: it neither remodels nor stores the package's record")
    if a.remodel:
        from mlsysim.lab.distributed.results import EARLIER, recorded, remodel
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        if a.record:                              # the record before it, shown beside it, predicted alike
            finish([], {**remodel(recorded(EARLIER)), "remodelled": when}, [RECORD.with_name(Path(EARLIER).name)])
        return _report({**remodel(recorded()), "remodelled": when}, a)
    sizes = [float(s) * 1e6 for s in a.sizes_mb.split(",")]
    worlds = [int(n) for n in a.nproc.split(",")]
    t0 = time.time()

    def say(m):
        print(f"  {m} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)

    if a.terms_from:
        kept = _terms_from(a.terms_from)
        losses = [{**_node_loss(n, max(sizes), a.layers, kept[n][1], say), "terms": kept[n][1].to_dict()}
                  for n in worlds if n % 2 == 0 and n in kept]
        if not losses:
            p.error(f"--terms-from: {a.terms_from} has no point of an even world size in --nproc {a.nproc}")
        if any(n["state_B"] != kept[n["world_size"]][0] for n in losses):
            p.error(f"--terms-from: --sizes-mb {a.sizes_mb} is not the largest state of {a.terms_from}")
        return _report({**record_head("mlsysim.lab.dist-benchmark/2", "bench_lab_dist.py", argv, t0),
                        "terms_from": Path(a.terms_from).name, "every": EVERY, "points": [], "node_loss": losses,
                        "wall_s": time.time() - t0}, a)
    measured = {}
    for n in worlds:
        for s in sizes:
            measured[n, s] = _point(n, s, a.layers, say)
            if a.json:                                    # the points so far, kept should a later one fail
                Path(a.json + ".points").write_text(json.dumps([q for q, _ in measured.values()], indent=1) + "\n")
    losses = [_node_loss(n, max(sizes), a.layers, measured[n, max(sizes)][1], say) for n in worlds if n % 2 == 0]
    d = {**record_head("mlsysim.lab.dist-benchmark/2", "bench_lab_dist.py", argv, t0),
         "steps": max(q["steps"] for q, _ in measured.values()), "every": EVERY,
         "plain_steps": PLAIN, "points": [q for q, _ in measured.values()], "node_loss": losses,
         "wall_s": time.time() - t0}
    return _report(d, a)


def _report(d: dict, a) -> int:
    from mlsysim.lab.distributed.results import model_table, targets
    print("| figure | naive s | refined s | measured s | standard error s | measured / refined | holds "
          "| within 2 s.e. |")
    print("|---|---|---|---|---|---|---|---|")
    num = lambda x: "-" if x is None else f"{x:.3f}"
    for r in model_table(d):
        print(f"| {r['figure']} | {num(r['naive_s'])} | {r['refined_s']:.3f} | {r['measured_s']:.3f} | "
              f"{num(r['measured_se_s'])} | {r['ratio']:.2f} | {'yes' if r['holds'] else 'NO'} | "
              f"{'yes' if r['consistent'] else 'NO'} |")
    return finish(targets(d), d, ([a.json] if a.json else []) + ([RECORD] if a.record else []))


if __name__ == "__main__":
    raise SystemExit(main())
