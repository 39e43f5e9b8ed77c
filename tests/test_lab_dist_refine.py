"""mlsysim.lab.distributed.refine without PyTorch: what it refuses, and the refined figures of a run from its
terms (the real run through the command line is in tests/test_lab_dist_cli.py)."""
import dataclasses
from types import SimpleNamespace

import pytest

from mlsysim.errors import MlsysimError
from mlsysim.lab.distributed import refine, terms

T = terms.Terms(cores=2, world=2, copy_Bps=10e9, parallel_copy_Bps=10e9, parallel_fresh_Bps=5e9, fresh_copy_Bps=5e9,
                crc_Bps=20e9, cache_write_Bps=4e9, write_Bps=1e9, read_cold_Bps=2e9, torch_crc_Bps=4e9)


def _run(**kw):
    base = dict(engine="concurrent", mode="fsdp", every=4, plain_steps=4, plain_step_s=0.4, plain_step_cpu_s=0.3,
                plain_churn_Bps=1e9, plain_gloo_cpu_s=None, nodes=1, world_size=2, d_model=32, layers=2,
                prediction={"size_B": 1e9})
    return SimpleNamespace(**{**base, **kw})


def test_the_figures_are_the_refined_models_for_the_runs_engine_mode_and_gap():
    # every 4 steps of 0.4 s: a 1.6 s gap, under the 2 s after which the host takes freed memory back
    back = dataclasses.replace(T, reclaimed_write_Bps=1e9)
    for engine in refine.ENGINES:
        got = refine.refined_figures(_run(engine=engine), back, 1e9)
        assert got == terms.refined_job(back, 1e9, "fsdp", gap_s=1.6)[engine] == terms.refined_job(back, 1e9)[engine]
    later = refine.refined_figures(_run(engine="dcp-async", plain_step_s=1.5), back, 1e9)     # 6 s apart
    assert later == terms.refined_job(back, 1e9, gap_s=6.0)["dcp-async"] and later["durable_s"] > got["durable_s"]
    assert refine.refined_figures(_run(mode="ddp"), T, 1e9) == terms.refined_job(T, 1e9, "ddp")["concurrent"]


@pytest.mark.parametrize("call, says", [
    (lambda: refine.refined_figures(_run(engine="sync"), T, 1e9), "predicts the engines concurrent, dcp-async"),
    (lambda: refine.refined_figures(_run(plain_step_s=None), T, 1e9), "plain steps"),
    (lambda: refine.check_refinable("dcp", 4, 1), "got 'dcp'"),
    (lambda: refine.check_refinable("concurrent", 0, 1), "needs steps without checkpoints"),
    (lambda: refine.check_refinable("concurrent", 4, 2), "one node, got 2 nodes"),
    (lambda: refine.job_terms(_run(), SimpleNamespace(gloo=None, world_size=2, state_B=1e9)), "without a gloo probe"),
    (lambda: refine.job_terms(_run(plain_step_s=None), SimpleNamespace(gloo={"bcast_Bps": 1e9}, world_size=2,
                                                                      state_B=1e9)), "no steps without checkpoints"),
    (lambda: refine.job_terms(_run(), SimpleNamespace(gloo={"bcast_Bps": 1e9}, world_size=2, state_B=1e9),
                              gap_s=0.0), "gap_s must be a time > 0 s"),
    (lambda: refine.job_terms(_run(), SimpleNamespace(gloo={"bcast_Bps": 1e9}, world_size=2, state_B=1e9),
                              gap_s=float("nan")), "got nan"),
    (lambda: refine.with_refined(_run(prediction=None)), "no first prediction"),
])
def test_what_it_refuses_says_why(call, says):
    with pytest.raises(MlsysimError, match=says):
        call()


def test_the_text_record_shows_the_refined_figures_and_leaves_the_terms_to_the_json():
    from mlsysim.lab.distributed.launcher import DistributedRun
    run = DistributedRun(engine="concurrent", mode="fsdp", world_size=2, steps=8, kills=(), resumed_from=(),
                         resumed_exactly=None, reshard_to=None, reshard_equal=None, reshard_loss_max_abs=None,
                         stall_s=0.001, durable_s=0.01, bytes_read_per_rank=(), wall_s=1.0,
                         prediction={"durable_s": 0.002, "refined_durable_s": 0.012, "refined_terms": T.to_dict()})
    text = str(run)
    assert "predicted refined_durable_s" in text and "0.012" in text and "refined_terms" not in text
    assert run.to_dict()["prediction"]["refined_terms"]["write_Bps"] == 1e9
