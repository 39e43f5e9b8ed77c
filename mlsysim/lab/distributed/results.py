"""The distributed lab's full-size benchmark, read without PyTorch.

``benchmarks/bench_lab_dist.py --record`` stores its run as ``lab/distributed/data/benchmark.json``
(schema ``mlsysim.lab.dist-benchmark/2``): per world size and state size, the stall, time to the
global commit and overhead per checkpoint of the sharded ``concurrent`` engine and of
``dcp.async_save``, the three restores with bytes read per rank, the terms measured beside them
(:mod:`mlsysim.lab.distributed.terms`); and at the largest size a node lost, recovered from peer
memory and from durable storage, with the downtime. Every figure has the first (``naive``,
:mod:`mlsysim.lab.distributed.predict`) and the refined prediction beside it. :func:`recorded`
reads it, :func:`model_table` lists every figure, :func:`targets` checks the benchmark's targets,
:func:`remodel` predicts a stored run again with the model as it is now, from the terms the run measured
(``benchmarks/bench_lab_dist.py --remodel --record`` stores it, with the date in ``remodelled``).
:func:`cpu_breakdown` reads ``lab/distributed/data/cpu_breakdown.json`` (``benchmarks/bench_lab_dist_cpu.py``):
where a checkpoint's cost to the training goes, thread by thread, in the same job at a gigabyte.
:func:`load_records` reads the other runs kept in a directory (the repository's ``benchmarks/records``) and
:func:`across` scores every figure over all of them: in how many runs the model holds, and whether every run
measured it on the same side of the prediction (a term the model lacks); :func:`spread`, whether the prediction
follows the figure from run to run. :func:`cycles_needed` and
:func:`overhead_resolution` say how many checkpoints an overhead's mean needs before the bound can judge it;
:func:`miss_chance` and :func:`chance_misses`, how many of a run's figures a model exactly right on average would
miss by the measurements' own noise; :func:`against_others`, how many the other runs' mean would miss by the
machine's moves from run to run;
:func:`staged_back_to_back` sets a run's DCP staging to the probe's back-to-back timing, where it has one;
:func:`probed_apart` takes out the terms its jobs timed of themselves, :func:`first_probes` takes each of them
from its first few times only; :func:`durable_split` splits the
``concurrent`` engine's time to durable at the moment rank 0's own shard was durable.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import math
import statistics
from importlib.resources import files
from pathlib import Path

from ...errors import MlsysimError
from ..pytorch.results import consistent, standard_error, within_bound

RECORD = "data/benchmark.json"
EARLIER = "data/benchmark_capped.json"   # the record before, its writers beside busy processes timed at 256 MB
CPU = "data/cpu_breakdown.json"          # where a checkpoint's cost goes: benchmarks/bench_lab_dist_cpu.py
#: the repository's other recorded runs, beside the package (installed editable, as the course's setup does)
KEPT = Path(__file__).resolve().parents[3] / "benchmarks" / "records"
ENGINES = (("concurrent", "concurrent"), ("dcp_async", "dcp-async"))   # (a point's key, the name in its figures)
#: the terms the training jobs time of themselves (:func:`~mlsysim.lab.distributed.refine.in_job_rates`)
JOB_RATES = ("job_copy_Bps", "job_copy_own_Bps", "job_write_Bps", "dcp_job_write_Bps", "job_fixed_durable_s",
             "dcp_writer_cpu_s")


def recorded(record: str = RECORD) -> dict:
    """The recorded full-size run (``dict``; see the module docstring for its layout), or with
    ``record=EARLIER`` the full-size run recorded before it, the same protocol but for one term: the writers
    beside busy processes (:func:`mlsysim.lab.distributed.terms.beside`) were timed with at most 256 MB and
    scaled by the bytes, not timed at each point's own size."""
    return json.loads(files(__package__).joinpath(record).read_text(encoding="utf-8"))


def cpu_breakdown() -> dict:
    """The recorded CPU accounting of the job at a gigabyte (``benchmarks/bench_lab_dist_cpu.py``): per run
    (``world_size``, ``engine``, ``allocator``) its step times, the training thread's page faults per step,
    and each count's growth in every checkpoint's cycle (:func:`mlsysim.lab.distributed.accounting.cycles`)
    with their ``mean``."""
    return recorded(CPU)


def within(measured: float, predicted: float, factor: float = 2.0) -> bool:
    """``predicted / factor <= measured <= predicted x factor``.

    >>> within(1.5, 1.0), within(0.4, 1.0), within(2.0, 1.0)
    (True, False, True)
    """
    return predicted / factor <= measured <= predicted * factor


def _point(q: dict) -> str:
    """A point's name in the figures: "2 ranks, 254 MB"."""
    return f"{q['world_size']} ranks, {q['state_B'] / 1e6:.0f} MB"


def _row(figure: str, naive, refined, measured, samples=None, statistic: str = "mean") -> dict:
    ok = measured is not None and refined is not None
    se = standard_error(samples, statistic)
    return {"figure": figure, "naive_s": naive, "refined_s": refined, "measured_s": measured,
            "ratio": measured / refined if ok and refined else float("nan"),
            "holds": bool(ok and within_bound(measured, refined)),
            "naive_holds": None if naive is None or not ok else within_bound(measured, naive),
            "measured_se_s": se, "consistent": bool(ok and consistent(measured, refined, se))}


def model_table(d: dict) -> list[dict]:
    """Every measured figure of a recorded run (schema 2) beside its two predictions, one row each:
    ``figure`` (its name and point), ``naive_s`` (the first prediction, ``ms.checkpoint``; None where it
    has none), ``refined_s`` (the module ``mlsysim.lab.distributed.terms``), ``measured_s``, ``ratio``
    (measured / refined) and whether each holds (``mlsysim.lab.pytorch.results.within_bound``: ±25 %,
    x1.5 under 0.1 s); ``measured_se_s``, the measurement's standard error where the figure comes from three
    samples or more (:func:`~mlsysim.lab.pytorch.results.standard_error`: a stall's and a time to durable's
    median over the checkpoints, an overhead's mean over the cycles, a restore's median over its rounds; None
    for a recovery or a downtime timed once; a node loss timed three times or more, ``trials``, gives their
    mean's), and ``consistent``: whether the refined prediction holds for
    some value within two standard errors of the measurement
    (:func:`~mlsysim.lab.pytorch.results.consistent`). A run recorded before the refined model gives no rows."""
    rows = []
    for q in d["points"]:
        tag = _point(q)
        for key, name in ENGINES:
            e = q[key]
            pred = e.get("predicted")
            if not pred:
                continue
            for fig, many, stat in (("stall_s", "stalls_s", "median"), ("durable_s", "durables_s", "median"),
                                    ("overhead_s", "overheads_s", "mean")):
                rows.append(_row(f"{tag}: {name} {fig[:-2]}", pred["naive"].get(fig), pred["refined"].get(fig),
                                 e.get(fig), e.get(many), stat))
        for r in q["restores"]:
            if "refined_restore_s" in r["predicted"]:
                rows.append(_row(f"{tag}: {r['scheme']} restore", r["predicted"]["restore_s"],
                                 r["predicted"]["refined_restore_s"], r["restore_s"], r.get("rounds_s"), "median"))
    for n in d["node_loss"]:
        pred = n.get("predicted")
        if not pred:
            continue
        tag = f"2 nodes x {n['world_size'] // 2}, {n['state_B'] / 1e6:.0f} MB"
        naive, ref = pred["naive"], pred["refined"]
        trials = n.get("trials") or []
        rows.append(_row(f"{tag}: peer-memory recovery", naive["peer_memory_s"], ref["peer_memory_s"], n["recovery_s"],
                         _each_trial(trials, "recovery_s")))
        rows.append(_row(f"{tag}: storage recovery", naive["storage_s"], ref["storage_s"], n["recovery_storage_s"],
                         _each_trial(trials, "recovery_storage_s")))
        for i, (t, key) in enumerate(zip(n["downtime_s"] or (), ("downtime_peer_s", "downtime_storage_s"))):
            rows.append(_row(f"{tag}: downtime, {key.split('_')[1]} recovery", None, ref.get(key), t,
                             _each_trial(trials, "downtime_s", i)))
    return rows


def _each_trial(trials: list, key: str, i: int | None = None) -> list:
    """Each node-loss trial's ``key`` (the ``i``-th of its list), or none where a trial lacks it (a job that never
    resumed has no downtime)."""
    xs = []
    for tr in trials:
        v = tr.get(key)
        xs.append(v if i is None else v[i] if v is not None and len(v) > i else None)
    return xs if all(x is not None for x in xs) else []


def miss_chance(measured_s: float, se_s: float) -> float:
    """The chance that a model exactly right on average misses the bound (``within_bound``) by the
    measurement's own noise alone: the measurement spread normally about the prediction P by its standard
    error ``se_s``, P taken as ``measured_s``; the bound ±25 % (P / 1.25 to P / 0.75) from 0.1 s up, a factor
    of 1.5 below. A mean of 12 cycles that spread by 70 % of it (se 20 %) misses ±25 % about once in five runs.

    >>> round(miss_chance(2.0, 0.4), 3), round(miss_chance(2.0, 0.1), 4), miss_chance(0.05, 0.0)
    (0.206, 0.0, 0.0)
    """
    for name, v in (("measured_s", measured_s), ("se_s", se_s)):
        if not (isinstance(v, (int, float)) and 0 <= v < math.inf):
            raise MlsysimError(f"{name} must be a finite number of seconds >= 0, got {v!r}")
    if measured_s <= 0:
        raise MlsysimError(f"measured_s must be above 0 s, got {measured_s!r}")
    p = measured_s
    if se_s == 0:
        return 0.0
    cdf = lambda x: 0.5 * (1.0 + math.erf((x - p) / (se_s * math.sqrt(2.0))))
    below = max(0.0, cdf(min(0.1, 1.5 * p)) - cdf(p / 1.5)) if p / 1.5 < 0.1 else 0.0   # within x1.5 under 0.1 s
    above = max(0.0, cdf(p / 0.75) - cdf(max(0.1, p / 1.25)))                           # within ±25 % from 0.1 s
    return max(0.0, 1.0 - below - above)


def chance_misses(d: dict) -> dict:
    """How many of a recorded run's figures (:func:`model_table`) a model exactly right on average would miss
    by the measurements' own noise (:func:`miss_chance` of each with a standard error): ``expected`` (the sum),
    ``all_hold`` (the chance that it holds every one of them, the product of the rest), ``sampled`` (the
    figures with a standard error) and ``unsampled`` (those timed fewer than three times, left out: their noise
    is not known from the run), ``rows`` (figure, measured_s, measured_se_s, chance), the likeliest misses
    first."""
    table = model_table(d)
    rows = [{"figure": r["figure"], "measured_s": r["measured_s"], "measured_se_s": r["measured_se_s"],
             "chance": miss_chance(r["measured_s"], r["measured_se_s"])}
            for r in table if r["measured_se_s"] is not None and r["measured_s"] and r["measured_s"] > 0]
    unsampled = sum(r["measured_se_s"] is None for r in table)
    return {"expected": sum(r["chance"] for r in rows), "all_hold": math.prod(1.0 - r["chance"] for r in rows),
            "sampled": len(rows), "unsampled": unsampled, "rows": sorted(rows, key=lambda r: -r["chance"])}


def targets(d: dict) -> list[tuple[str, bool, str]]:
    """The benchmark's targets as (name, met, the numbers): per world size and state size, the sharded
    concurrent engine's stall is at most half of ``dcp.async_save``'s; and every row of
    :func:`model_table`: the refined prediction within ±25 % of the measurement (x1.5 under 0.1 s)."""
    out = []
    for q in d["points"]:
        tag = _point(q)
        c, a = q["concurrent"], q["dcp_async"]
        out.append((f"{tag}: concurrent stall <= 1/2 of dcp.async_save's", c["stall_s"] <= 0.5 * a["stall_s"],
                    f"{c['stall_s']:.3f} s vs {a['stall_s']:.3f} s"))
    for r in model_table(d):
        out.append((f"{r['figure']}: refined model within ±25 % (x1.5 under 0.1 s)", r["holds"],
                    f"measured {r['measured_s']:.3f} s, model {r['refined_s']:.3f} s ({r['ratio']:.2f}x)"))
    return out


def peer_transfer_s_per_B(trials: list) -> float | None:
    """X of a node loss's ``trials`` (each a recorded trial): the mean of the recovery's transfer as each trial's
    job timed it (``peer_transfer_s`` over ``peer_transfer_B``, :func:`~mlsysim.lab.distributed.peer.probe_transfer`),
    seconds per byte; None where no trial timed it (the runs up to ``lab_dist-2026-12-07c``).

    >>> x = peer_transfer_s_per_B([{"peer_transfer_s": 0.3, "peer_transfer_B": 5e8}, {"peer_transfer_s": 0.4,
    ...                             "peer_transfer_B": 5e8}, {"recovery_s": 0.5}])
    >>> round(x * 1e9, 6)        # ns per byte: the mean of 0.6 and 0.8
    0.7
    """
    timed = [tr["peer_transfer_s"] / tr["peer_transfer_B"] for tr in trials if tr.get("peer_transfer_s")]
    return statistics.mean(timed) if timed else None


def remodel(d: dict) -> dict:
    """``d`` (a recorded run, schema 2) with every refined prediction and each point's ``terms_s`` computed
    again by the module ``mlsysim.lab.distributed.terms`` from the terms the run measured (each point's, the
    gap between checkpoints as the benchmark takes it, ``every`` x DCP's plain step; for a node loss the
    point of its world size at its state size (or the ``terms`` it carries, a run of node losses alone), with the
    teardowns it measured and T from its two starts,
    :func:`~mlsysim.lab.distributed.terms.job_start_s`); the measurements
    and the first predictions are left as they are."""
    from .terms import Terms, job_start_s, refined_job, refined_recovery, refined_restore
    out = copy.deepcopy(d)
    measured = {}
    for q in out["points"]:
        t = Terms(**q["terms"])
        measured[(q["world_size"], q["state_B"])] = t
        if not q["dcp_async"].get("predicted"):
            continue
        ref = refined_job(t, q["state_B"], "fsdp", gap_s=out["every"] * q["dcp_async"]["plain_step_s"])
        q["concurrent"]["predicted"]["refined"] = ref["concurrent"]
        q["dcp_async"]["predicted"]["refined"] = ref["dcp-async"]
        q["terms_s"] = ref["terms"]
        for r in q["restores"]:
            if "refined_restore_s" in r["predicted"]:
                r["predicted"]["refined_restore_s"] = refined_restore(t, r["scheme"], q["state_B"])
    for n in out["node_loss"]:
        if n.get("predicted", {}).get("refined"):
            start = job_start_s(n["start_s"], n.get("start_apart_s"))
            kept = measured.get((n["world_size"], n["state_B"]))
            t = dataclasses.replace(Terms(**n["terms"]) if kept is None else kept, start_s=start,
                                    job_peer_transfer_s_per_B=peer_transfer_s_per_B(n.get("trials") or []))
            n["predicted"]["refined"] = refined_recovery(t, n["state_B"], tuple(n.get("teardown_s") or (0.0, 0.0)))
    return out


def staged_back_to_back(d: dict) -> dict:
    """``d`` (a recorded run, schema 2) with DCP's staging rates taken from the probe's back-to-back stagings
    where its restore job timed them beside the held ones (a point's ``gloo`` holds ``dcp_stage_back_s`` and
    ``dcp_stage_back_own_s`` where ``dcp_stage_steps`` > 0): σ = the staged bytes / ``dcp_stage_back_s``, σ_0 the
    same over ``dcp_stage_back_own_s`` (:func:`~mlsysim.lab.distributed.refine.staging_rates`, as
    :func:`~mlsysim.lab.distributed.refine.job_terms` takes them from the held ones). Points without them are
    left as they are; :func:`remodel` predicts the run again. The two timings of one job set the model beside
    each for the same measurements; at 2 ranks and a gigabyte they came out equal (0.263 and 0.262 s,
    ``benchmarks/records/lab_dist_one_point-2026-12-06d.json``)."""
    from .refine import staging_rates
    out = copy.deepcopy(d)
    for q in out["points"]:
        back = staging_rates(q.get("gloo") or {}, "_back")
        if all(back.values()):
            q["terms"].update(back)
    return out


def probed_apart(d: dict) -> dict:
    """``d`` (a recorded run, schema 2) with the terms its training jobs timed of themselves at their end (the
    ``job_*`` rates and DCP's staging from its job, :func:`~mlsysim.lab.distributed.refine.in_job_rates`) taken out:
    the copies and the disk as the benchmark timed them apart, DCP's staging as its restore job did. Points
    without them are left as they are; :func:`remodel` predicts the run again, so the two ways of timing the same
    terms can be set beside the same measurements."""
    from .refine import staging_rates
    out = copy.deepcopy(d)
    for q in out["points"]:
        t = q["terms"]
        if any(t.get(k) is not None for k in JOB_RATES):
            t.update({k: None for k in JOB_RATES}, **staging_rates(q.get("gloo") or {}))
    return out


def own_start_only(d: dict) -> dict:
    """``d`` (a recorded run, schema 2) with each node loss's launch apart (``start_apart_s``) taken out:
    :func:`remodel` then takes T from the job's own first start alone, as the runs before
    :func:`~mlsysim.lab.distributed.terms.job_start_s` were predicted."""
    out = copy.deepcopy(d)
    for n in out["node_loss"]:
        n.pop("start_apart_s", None)
    return out


def first_probes(d: dict, n: int) -> dict:
    """``d`` (a recorded run, schema 2) as if each training job had timed its own terms ``n`` times, not its
    ``repeats``: every term whose times the job kept (``*_each_s``, :mod:`~mlsysim.lab.distributed.in_job`) becomes
    the median of its first ``n``, and the rates the model takes from them are computed again
    (:func:`~mlsysim.lab.distributed.refine.in_job_rates`); a term kept as a median only stays as it is.
    :func:`remodel` predicts the run again: how much the model's figures owe to the probes' repeats, in one run.

    >>> d = {"points": [{"terms": {}, "dcp_async": {}, "concurrent": {"job_terms": {"repeats": 5, "copy_B": 1e9,
    ...      "copy_s": 0.2, "copy_own_s": 0.1, "write_B": 1e9, "write_s": 0.5, "write_each_s": [0.9, 0.4, 0.6, 0.5, 0.3]}}}]}
    >>> first_probes(d, 3)["points"][0]["terms"]["job_write_Bps"] / 1e9   # 1 GB over 0.6 s, the first three's median
    1.6666666666666667
    """
    from .refine import in_job_rates
    if type(n) is not int or n < 1:
        raise MlsysimError(f"n must be a whole number of probes >= 1, got {n!r}")
    out = copy.deepcopy(d)
    for q in out["points"]:
        timed = [q[e].get("job_terms") for e, _ in ENGINES]
        for jt in timed:
            if jt and n > jt["repeats"]:
                raise MlsysimError(f"n must be at most the {jt['repeats']} times the jobs timed their terms, got {n}")
        own, dcp = ({**jt, **{k[:-len("_each_s")] + "_s": statistics.median(v[:n])
                              for k, v in jt.items() if k.endswith("_each_s") and v}} if jt else None for jt in timed)
        if own or dcp:
            q["terms"].update(in_job_rates(own, dcp))
    return out


def load_records(directory=None, pattern: str = "lab_dist-*.json") -> dict:
    """{file stem: run} for every recorded run in ``directory`` (default :data:`KEPT`, the repository's
    ``benchmarks/records``) matching ``pattern`` (sorted by name), each as its JSON holds it (schema 2). A
    directory with none is an error: there is nothing to score."""
    directory = KEPT if directory is None else directory
    paths = sorted(Path(directory).glob(pattern))
    if not paths:
        raise MlsysimError(f"no recorded run matches {pattern!r} in {directory}")
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in paths}


def across(runs: dict) -> list[dict]:
    """Every figure of :func:`model_table` over several recorded runs (``{name: run}``), each run first
    predicted again by the model as it is now (:func:`remodel`), one row per figure in the first run's order:
    ``figure``, ``runs`` (how many runs have it), ``held`` and ``consistent`` (in how many runs it holds, and
    is within two standard errors), ``measured`` and ``predicted`` (seconds, the refined prediction, in the runs'
    order), ``ratios`` (measured / refined, in the same order), ``median_ratio``,
    ``lowest``, ``highest``, and ``side``: ``"above"`` where every run measured more than the prediction,
    ``"below"`` where every run measured less, else ``"both"``. A prediction with no bias lands on each side
    of the measurement about as often; one side in all of 12 runs happens to it with a chance of
    2 / 2**12 = 0.05 %, so that is a term the model lacks. A figure measured on both sides is not refuted
    that way, though its ratios may still lean to one side.

    >>> rows = across({"a": recorded(), "b": recorded(EARLIER)})
    >>> len(rows), {r["runs"] for r in rows}
    (62, {2})
    >>> sum(r["held"] for r in rows)          # 56 of 62 in the first run, 54 in the second
    110
    """
    if not runs:
        raise MlsysimError("across needs at least one recorded run")
    tables = [model_table(remodel(d)) for d in runs.values()]
    order, rows = [], {}
    for table in tables:
        for r in table:
            if r["figure"] not in rows:
                order.append(r["figure"])
                rows[r["figure"]] = []
            rows[r["figure"]].append(r)
    out = []
    for fig in order:
        rs = rows[fig]
        ratios = [r["ratio"] for r in rs]
        side = "above" if all(x > 1 for x in ratios) else "below" if all(x < 1 for x in ratios) else "both"
        out.append({"figure": fig, "runs": len(rs), "held": sum(r["holds"] for r in rs),
                    "consistent": sum(r["consistent"] for r in rs), "measured": [r["measured_s"] for r in rs],
                    "predicted": [r["refined_s"] for r in rs], "ratios": ratios,
                    "median_ratio": statistics.median(ratios), "lowest": min(ratios), "highest": max(ratios),
                    "side": side})
    return out


def spread(rows) -> list[dict]:
    """How far each figure's measurement, prediction and their ratio move from run to run, from rows of
    :func:`across`: ``figure``, ``runs``, and the standard deviation over the runs of each one's natural log
    (``measured_sd``, ``predicted_sd``, ``ratio_sd``: a fraction of the value, 0.1 about 10 %), and ``tracks``:
    whether the ratio moved less than the measurement. A prediction built from terms timed beside the figure
    follows what moves it (a slower disk in one run slows the probe and the job alike), and their ratio moves
    less than either; a prediction whose terms move apart from the figure adds their spread to the
    measurement's, and a constant would have done as well. Rows of fewer than three runs, or with a value that
    is not above zero, are left out.

    >>> rows = [{"figure": "f", "runs": 3, "measured": [1.0, 2.0, 4.0], "predicted": [1.1, 2.0, 3.6]},
    ...         {"figure": "g", "runs": 3, "measured": [1.0, 1.0, 1.0], "predicted": [0.5, 1.0, 2.0]}]
    >>> [(r["figure"], round(r["measured_sd"], 3), round(r["ratio_sd"], 3), r["tracks"]) for r in spread(rows)]
    [('f', 0.693, 0.1, True), ('g', 0.0, 0.693, False)]
    """
    out = []
    for r in rows:
        pairs = list(zip(r["measured"], r["predicted"]))
        if len(pairs) < 3 or not all(m and p and m > 0 and p > 0 for m, p in pairs):
            continue
        logs = {k: [math.log(v) for v in vs] for k, vs in
                (("measured", [m for m, _ in pairs]), ("predicted", [p for _, p in pairs]),
                 ("ratio", [m / p for m, p in pairs]))}
        sd = {k: statistics.stdev(v) for k, v in logs.items()}
        out.append({"figure": r["figure"], "runs": len(pairs), "measured_sd": sd["measured"],
                    "predicted_sd": sd["predicted"], "ratio_sd": sd["ratio"], "tracks": sd["ratio"] < sd["measured"]})
    return out


def against_others(runs: dict) -> dict:
    """Each recorded run (``{name: run}``, three or more) judged twice, figure by figure (the rows of
    :func:`across` that every run has): by the model, and by the mean of the other runs' measurements of the
    same figure, a prediction that knows how large the figure is on this machine but not how the machine stood
    that day.
    Its misses are how far a figure moves from run to run (the host, the memory it took back, the disk's
    day); a figure the model misses where the others' mean holds is a miss of the model's. Per run:
    ``model_held``, ``others_held`` (how many figures hold, ±25 %, x1.5 under 0.1 s), ``model_only`` (the model
    missed, the others' mean held) and ``figures``; per figure that either missed (``figures_missed``):
    ``model`` and ``others``, in how many runs each missed it.

    >>> j = against_others({"shipped": recorded(), "before": recorded(EARLIER), "again": recorded()})
    >>> [(r["model_held"], r["others_held"]) for r in j["runs"].values()]
    [(56, 61), (54, 59), (56, 61)]
    """
    if len(runs) < 3:
        raise MlsysimError(f"against_others needs three recorded runs or more, got {len(runs)}")
    shared = [r for r in across(runs) if r["runs"] == len(runs)]      # in every run, in the runs' order
    per_run, missed = {}, {r["figure"]: {"model": 0, "others": 0} for r in shared}
    for i, n in enumerate(runs):
        held = {"model_held": 0, "others_held": 0, "model_only": 0, "figures": len(shared)}
        for r in shared:
            m, p = r["measured"][i], r["predicted"][i]
            mean = statistics.mean(x for j, x in enumerate(r["measured"]) if j != i)
            ok = {"model": m is not None and p is not None and within_bound(m, p), "others": within_bound(m, mean)}
            for key in ok:
                held[f"{key}_held"] += ok[key]
                missed[r["figure"]][key] += not ok[key]
            held["model_only"] += ok["others"] and not ok["model"]
        per_run[n] = held
    return {"runs": per_run, "figures_missed": {f: m for f, m in missed.items() if m["model"] or m["others"]}}


def cycles_needed(samples, predicted_s: float, k: float = 2.0) -> int:
    """How many samples a mean needs for ``k`` of its standard errors to fit inside the bound around the
    prediction, the samples spreading as ``samples`` do: ceil((k s / w)^2), s their standard deviation and w the
    bound's narrower side about ``predicted_s``: 0.2 x ``predicted_s`` (±25 % of the measurement lets it lie from
    ``predicted_s`` / 1.25 to ``predicted_s`` / 0.75), ``predicted_s`` / 3 under 0.1 s (a factor of 1.5 either
    way). With fewer, a model that is exactly right misses the bound by chance in more than 4.5 % of runs (a
    normally spread mean); with more, a miss says something about the model. Needs two samples or more and a
    positive prediction.

    >>> cycles_needed([0.4, 0.6, 0.5, 0.3, 0.7], 0.5)     # s = 0.158, w = 0.1: (2 x 0.158 / 0.1)^2 = 10
    10
    >>> cycles_needed([0.02, 0.08, 0.05], 0.05)           # under 0.1 s, w = 0.0167: (2 x 0.03 / 0.0167)^2 = 13
    13
    """
    xs = [float(x) for x in (() if samples is None else samples)]
    if len(xs) < 2 or not all(math.isfinite(x) for x in xs):
        raise MlsysimError(f"samples must be two finite numbers or more, got {samples!r}")
    if not (isinstance(predicted_s, (int, float)) and 0 < predicted_s < math.inf):
        raise MlsysimError(f"predicted_s must be a finite number of seconds > 0, got {predicted_s!r}")
    if not (isinstance(k, (int, float)) and 0 < k < math.inf):
        raise MlsysimError(f"k must be a finite number of standard errors > 0, got {k!r}")
    half = predicted_s / 3 if predicted_s < 0.1 else 0.2 * predicted_s
    return max(1, math.ceil(round((k * statistics.stdev(xs) / half) ** 2, 9)))


def overhead_resolution(d: dict) -> list[dict]:
    """Per point and engine of a recorded run (schema 2, predicted again by :func:`remodel` first where the
    model has moved): ``figure`` (as :func:`model_table` names it), ``cycles`` (how many the mean took),
    ``spread_s`` (their standard deviation), ``refined_s``, ``measured_s``, ``needed``
    (:func:`cycles_needed`), ``resolved`` (``cycles`` >= ``needed``: the bound can judge this mean) and
    ``needed_s``: what those cycles cost, ``needed`` x the run's ``every`` x the point's plain step (the job's
    seconds without checkpoints; None where the run did not record the step or ``every``)."""
    rows = []
    for q in d["points"]:
        tag = _point(q)
        for key, name in ENGINES:
            e = q[key]
            pred = (e.get("predicted") or {}).get("refined", {}).get("overhead_s")
            xs = e.get("overheads_s") or []
            if not pred or len(xs) < 2:
                continue
            need, step = cycles_needed(xs, pred), e.get("plain_step_s")
            rows.append({"figure": f"{tag}: {name} overhead", "cycles": len(xs), "spread_s": statistics.stdev(xs),
                         "refined_s": pred, "measured_s": e["overhead_s"], "needed": need,
                         "resolved": len(xs) >= need,
                         "needed_s": None if step is None or d.get("every") is None else need * d["every"] * step})
    return rows


def durable_split(d: dict, model: bool = True) -> list[dict]:
    """Where the ``concurrent`` engine's time to durable goes, per point of a recorded run (schema 2) whose job kept
    when rank 0's own shard was durable at each checkpoint (``shards_s``; points without are left out): the medians
    over its checkpoints of the stall (``stall_s``), of the time until rank 0's shard and its rank commit were
    durable (``shard_s``), of the time to the global commit (``durable_s``) and of the rest, each checkpoint's
    durable less its shard (``after_s``: the other ranks' shards still being written, their records gathered to
    rank 0, the global record written), and ``checkpoints``; with ``model``, beside them what the model
    (:func:`remodel`) takes for the writes (``model_writers_s``; ``model_fill_s``, the part of it their chunks' pipeline
    cannot overlap: :func:`mlsysim.lab.store.pipelined_s`) and for that rest (``model_fixed_s``: the engine's
    fixed cost to durable, timed beside the job's own steps where its job timed it, else beside those of the job at
    its smallest width).

    >>> q = {"world_size": 2, "state_B": 1e9, "concurrent": {"stalls_s": [0.1, 0.1, 0.1],
    ...      "shards_s": [0.5, 0.6, 0.7], "durables_s": [0.55, 0.7, 0.75]}}
    >>> r = durable_split({"points": [q]}, model=False)[0]
    >>> r["point"], r["shard_s"], round(r["after_s"], 2), r["durable_s"], r["checkpoints"]
    ('2 ranks, 1000 MB', 0.6, 0.05, 0.7, 3)
    """
    points = remodel(d)["points"] if model else d["points"]
    rows = []
    for q in points:
        e = q["concurrent"]
        shards, durables = e.get("shards_s") or [], e.get("durables_s") or []
        if not shards:
            continue
        if len(shards) != len(durables):
            raise MlsysimError(f"{_point(q)}: {len(shards)} shard times for {len(durables)} checkpoints")
        row = {"point": _point(q), "checkpoints": len(shards), "stall_s": statistics.median(e["stalls_s"]),
               "shard_s": statistics.median(shards), "durable_s": statistics.median(durables),
               "after_s": statistics.median(t - s for t, s in zip(durables, shards))}
        if model:
            row.update(model_writers_s=q["terms_s"]["writers_s"], model_fill_s=q["terms_s"]["pipeline_fill_s"],
                       model_fixed_s=q["terms_s"]["fixed_durable_s"])
        rows.append(row)
    return rows
