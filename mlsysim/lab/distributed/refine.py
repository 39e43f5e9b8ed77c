"""The refined model beside a run of the distributed lab: this machine's terms for the lab's job, measured
as the benchmark measures them, and the run's figures predicted with them.

:func:`job_terms` gathers what :func:`~mlsysim.lab.distributed.terms.refined_job` needs for one job: gloo's
latency and each engine's fixed costs, timed in a restore job of the same job
(:func:`~mlsysim.lab.distributed.restore.measure_restores` with a probe); ``torch.save``'s CRC-32 and the
copy into PyTorch's new tensors; the floors, the disk shared by the ranks and the writers beside busy
processes (:func:`~mlsysim.lab.distributed.terms.measure_terms`); and, from the run's steps without
checkpoints, the ranks' busy share (CPU seconds per second of a step) and the memory they churn.
:func:`refined_figures` predicts the run's stall, time to durable and overhead per checkpoint with them.
``benchmarks/bench_lab_dist.py`` and ``mlsysim lab distributed --refined`` both use them.

The refined model covers the ``concurrent`` engine writing to durable storage and ``dcp-async``, on one
node; the memory tiers, the other engines and the recoveries of a killed job are predicted by the first
model only (:func:`~mlsysim.lab.distributed.predict.job_prediction`).
"""
from __future__ import annotations

from ...errors import MlsysimError

#: the engines the refined model predicts
ENGINES = ("concurrent", "dcp-async")
#: gloo's broadcast and pairs are timed with at most this many bytes
PROBE_B = 128e6


def torch_crc_Bps(size_B: float, repeats: int = 3) -> float:
    """The rate of ``torch.save``'s own CRC-32 (:func:`mlsysim.lab.pytorch.rates.torch_crc_Bps`) on a tensor
    of ``size_B`` bytes (at most 64 MiB); infinite (no such term) where this torch cannot switch it off."""
    from ..pytorch.rates import torch_crc_Bps as timed
    rate = timed(repeats, int(min(size_B, 64 * 2 ** 20)))
    return rate if rate == rate else float("inf")


def staging_rates(g: dict, way: str = "") -> dict:
    """σ and σ_0 (``dcp_stage_Bps``, ``dcp_stage_own_Bps``) from a probe record ``g`` (a restore job's, or a DCP job's
    own ``job_terms``): the bytes staged over ``dcp_stage{way}_s`` and over ``dcp_stage{way}_own_s`` (``way`` "": the
    probe's stagings; "_back": those timed back to back after them; "_freed": each freed a gap before the next);
    None where not timed.

    >>> staging_rates({"dcp_stage_B": 1e9, "dcp_stage_s": 0.5, "dcp_stage_own_s": 0.4})
    {'dcp_stage_Bps': 2000000000.0, 'dcp_stage_own_Bps': 2500000000.0}
    """
    def rate(key: str):
        return g["dcp_stage_B"] / g[key] if g.get(key) and g.get("dcp_stage_B") else None
    return {"dcp_stage_Bps": rate(f"dcp_stage{way}_s"), "dcp_stage_own_Bps": rate(f"dcp_stage{way}_own_s")}


def in_job_rates(own: dict | None, dcp: dict | None) -> dict:
    """The terms two training jobs timed of themselves at their end (``job_terms`` of the ``concurrent`` job,
    ``own``, and of DCP's, ``dcp``: :func:`~mlsysim.lab.distributed.in_job.time_terms`) as
    :class:`~mlsysim.lab.distributed.terms.Terms`' fields: c_N until the last rank and until rank 0 is done, each
    job's W_N, DCP's σ and σ_0 (of the stagings freed a gap before the next, ``dcp_stage_freed_*``, as the job's
    saves free theirs, where timed; else of those held through the gap), and the ``concurrent`` engine's fixed
    cost to durable beside the job's steps (o_b − o, ``job_fixed_durable_s``, where timed), and DCP's writer thread's
    CPU seconds per checkpoint (``dcp_writer_cpu_s``: their mean over the checkpoints the overhead's mean covers, all
    but the last, where the job kept them); none for a job that timed none.

    >>> r = in_job_rates({"copy_B": 1e9, "copy_s": 0.1, "copy_own_s": 0.08, "write_B": 1e9, "write_s": 0.5},
    ...                  {"dcp_stage_B": 1e9, "dcp_stage_s": 0.4, "dcp_stage_own_s": 0.3, "write_B": 1e9,
    ...                   "write_s": 1.0})
    >>> [round(r[k] / 1e9, 2) for k in ("job_copy_Bps", "job_copy_own_Bps", "job_write_Bps", "dcp_job_write_Bps",
    ...                                   "dcp_stage_Bps", "dcp_stage_own_Bps")]
    [10.0, 12.5, 2.0, 1.0, 2.5, 3.33]
    >>> in_job_rates({"copy_B": 1e9, "copy_s": 0.1, "copy_own_s": 0.08, "write_B": 1e9, "write_s": 0.5,
    ...               "fixed_durable_beside_s": 0.05, "fixed_stall_beside_s": 0.001}, None)["job_fixed_durable_s"]
    0.049
    >>> freed = in_job_rates(None, {"dcp_stage_B": 1e9, "dcp_stage_s": 0.4, "dcp_stage_own_s": 0.3, "write_B": 1e9,
    ...                             "write_s": 1.0, "dcp_stage_freed_s": 0.5, "dcp_stage_freed_own_s": 0.4})
    >>> freed["dcp_stage_Bps"] / 1e9, freed["dcp_stage_own_Bps"] / 1e9, "job_copy_Bps" in freed
    (2.0, 2.5, False)
    >>> in_job_rates(None, {"dcp_stage_B": 1e9, "dcp_stage_s": 0.4, "dcp_stage_own_s": 0.3, "write_B": 1e9,
    ...                     "write_s": 1.0, "dcp_writer_cpu_per_checkpoint_s": [0.3, 0.2, 0.9]})["dcp_writer_cpu_s"]
    0.25
    """
    out = {}
    if own:
        out.update(job_copy_Bps=own["copy_B"] / own["copy_s"], job_copy_own_Bps=own["copy_B"] / own["copy_own_s"],
                   job_write_Bps=own["write_B"] / own["write_s"])
        if own.get("fixed_durable_beside_s") is not None:
            out["job_fixed_durable_s"] = max(0.0, own["fixed_durable_beside_s"] - own["fixed_stall_beside_s"])
    if dcp:
        way = "_freed" if dcp.get("dcp_stage_freed_s") else ""
        out.update(dcp_job_write_Bps=dcp["write_B"] / dcp["write_s"], **staging_rates(dcp, way))
        cpu = dcp.get("dcp_writer_cpu_per_checkpoint_s")
        if cpu:
            covered = cpu[:-1] or cpu                       # the last has no full interval after it
            out["dcp_writer_cpu_s"] = sum(covered) / len(covered)
    return out


def job_terms(run, restores, directory=None, gap_s: float | None = None, dcp_run=None):
    """:class:`~mlsysim.lab.distributed.terms.Terms` for the job of ``run`` (a
    :class:`~mlsysim.lab.distributed.launcher.DistributedRun` with ``plain_steps``: its busy share and churn)
    at the state size of ``restores`` (a :class:`~mlsysim.lab.distributed.restore.RestoreComparison` of the
    same job, measured with ``probe_B``: gloo and the engines' fixed costs), the rest measured here, in
    ``directory`` (default: the temporary directory). Each engine's writers are timed at its job's cadence:
    u_c at ``run``'s gap between checkpoints (``every`` x its plain step), u_f at ``gap_s``, the DCP job's
    (default ``run``'s), each as many times as ``run`` took checkpoints (the job's mean weighs its first, which
    finds no memory a checkpoint before it freed, as the probe's does: :func:`~.beside.cadence_writes`). Where
    ``run`` is not the DCP job, pass the DCP job's gap: the two jobs' plain steps differ (by 0.88 to 2.06 times
    in the kept runs). The copies are timed in pieces of a rank's largest tensor
    in ``run``'s mode (:func:`largest_tensor_B`). Where ``run`` and ``dcp_run`` (the DCP job) timed their own
    terms at their end (``job_terms``), :func:`in_job_rates` gives the model those: they stand for the copies,
    the disk and DCP's staging timed here and in the restore job."""
    from .terms import measure_terms, parallel_torch_fresh_Bps
    g = restores.gloo
    if not g:
        raise MlsysimError("the restores were measured without a gloo probe: pass probe_B to measure_restores")
    if run.plain_step_s is None:
        raise MlsysimError("the run trained no steps without checkpoints (plain_steps): the ranks' busy share "
                           "and churn are timed in them")
    n, size = restores.world_size, restores.state_B
    gap_s = run.every * run.plain_step_s if gap_s is None else gap_s
    if not 0 < gap_s < float("inf"):      # :func:`beside` checks it too, but only after the floors' probes
        raise MlsysimError(f"gap_s must be a time > 0 s (the DCP job's gap between checkpoints), got {gap_s!r}")
    return measure_terms(
        n, size, directory, bcast_Bps=g["bcast_Bps"], bcast_state_Bps=g.get("bcast_state_Bps"),
        pair_Bps=g["pair_Bps"], latency_s=g["latency_s"], dcp_stall_s=g["dcp_stall_s"],
        dcp_durable_s=g["dcp_durable_s"], own_stall_s=g["own_stall_s"], dcp_overhead_s=g.get("dcp_overhead_s"),
        own_overhead_s=g.get("own_overhead_s"), dcp_overhead_cpu_s=g.get("dcp_overhead_cpu_s"),
        own_overhead_cpu_s=g.get("own_overhead_cpu_s"), dcp_writer_small_cpu_s=g.get("dcp_writer_small_cpu_s"),
        dcp_durable_beside_s=g.get("dcp_durable_beside_s"),
        own_durable_beside_s=g.get("own_durable_beside_s"), torch_crc_Bps=torch_crc_Bps(size / n),
        busy_share=run.plain_step_cpu_s / run.plain_step_s if run.plain_step_cpu_s else None,
        gloo_share=run.plain_gloo_cpu_s / run.plain_step_s if run.plain_gloo_cpu_s else None,
        churn_Bps=n * run.plain_churn_Bps if run.plain_churn_Bps else None, period_s=gap_s,
        churn_period_s=run.every * run.plain_step_s, checkpoints=len(run.durables_s) or None,
        torch_fresh_Bps=parallel_torch_fresh_Bps(size, n),
        **{**staging_rates(g), **in_job_rates(run.job_terms, dcp_run and dcp_run.job_terms)},
        dcp_stage_small_s=g.get("dcp_stage_small_s"), shard_read_Bps=g.get("shard_read_Bps"),
        new_tensor_ddp_s_per_B=g.get("new_tensor_ddp_s_per_B"),
        new_tensor_fsdp_s_per_B=g.get("new_tensor_fsdp_s_per_B"),
        copy_piece_B=largest_tensor_B(g, run.mode, n))


def largest_tensor_B(gloo: dict, mode: str, world: int) -> float | None:
    """A rank's largest tensor in ``mode`` (bytes) as the restore job's probe found it (``gloo``), else from the
    other mode's: a DDP rank holds whole tensors, an FSDP rank about 1/``world`` of each one's rows; None where
    neither was timed.

    >>> largest_tensor_B({"new_tensors_fsdp": {"largest_B": 4e6}}, "ddp", 2)
    8000000.0
    >>> largest_tensor_B({"new_tensors_ddp": {"largest_B": 8e6}}, "ddp", 2), largest_tensor_B({}, "fsdp", 2)
    (8000000.0, None)
    """
    own = (gloo.get(f"new_tensors_{mode}") or {}).get("largest_B")
    if own:
        return float(own)
    other = "fsdp" if mode == "ddp" else "ddp"
    found = (gloo.get(f"new_tensors_{other}") or {}).get("largest_B")
    if not found:
        return None
    return float(found) * world if mode == "ddp" else float(found) / world


def refined_figures(run, terms, state_B: float) -> dict:
    """The refined model's ``stall_s``, ``durable_s`` and ``overhead_s`` for ``run``'s engine (one of
    :data:`ENGINES`) and mode at ``state_B`` bytes, with ``terms``; the gap between checkpoints is ``every``
    of the run's plain steps."""
    from .terms import refined_job
    check_refinable(run.engine, run.plain_steps, run.nodes)
    if run.plain_step_s is None:
        raise MlsysimError("the gap between checkpoints is timed in the run's plain steps (plain_steps)")
    job = refined_job(terms, state_B, run.mode, gap_s=run.every * run.plain_step_s)
    return dict(job[run.engine])


def check_refinable(engine: str, plain_steps: int, nodes: int) -> None:
    """Refuse, with one line, a run whose figures the refined model does not predict."""
    if engine not in ENGINES:
        raise MlsysimError(f"the refined model predicts the engines {', '.join(ENGINES)}, got {engine!r}")
    if not plain_steps:
        raise MlsysimError("the refined model needs steps without checkpoints (plain_steps): the ranks' busy "
                           "share and churn are timed in them")
    if nodes != 1:
        raise MlsysimError(f"the refined model predicts a job on one node, got {nodes} nodes")


def with_refined(run, directory=None):
    """``run`` (a :class:`~mlsysim.lab.distributed.launcher.DistributedRun` with its first prediction) with the
    refined model's figures beside it in ``prediction`` (``refined_stall_s``, ``refined_durable_s``,
    ``refined_overhead_s``), the state they are for (``refined_state_B``) and the terms measured
    (``refined_terms``): a restore job of the same job with a gloo probe, then :func:`job_terms` in
    ``directory`` (default: the temporary directory), as the benchmark measures them."""
    import dataclasses
    from .restore import measure_restores
    check_refinable(run.engine, run.plain_steps, run.nodes)
    if not run.prediction:
        raise MlsysimError("the run has no first prediction to set the refined one beside (predict=True)")
    rest = measure_restores(nproc=run.world_size, d_model=run.d_model, layers=run.layers, schemes="sharded",
                            probe_B=min(PROBE_B, run.prediction["size_B"]), stage_steps=run.every)
    terms = job_terms(run, rest, directory)
    figures = {f"refined_{k}": v for k, v in refined_figures(run, terms, rest.state_B).items()}
    return dataclasses.replace(run, prediction={**run.prediction, **figures, "refined_state_B": rest.state_B,
                                                "refined_terms": terms.to_dict()})
