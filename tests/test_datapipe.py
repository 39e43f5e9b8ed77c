"""The input-pipeline model: worked numbers, properties, bad input, infeasibility, explorer."""
import dataclasses
import importlib
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mlsysim as ms
from mlsysim.units import GB

dp_module = importlib.import_module("mlsysim.datapipe")

IMAGE_GPUS = ["a100-80gb", "h100", "h200", "b200", "l4"]


# --- worked numbers ------------------------------------------------------------
def test_docstring_worked_number_resnet50_a100():
    r = ms.datapipe("resnet-50", "a100-80gb", batch=256, workers=8)
    assert r.accelerator_sps == pytest.approx(5154, rel=0.001)
    assert r.cpu_sps == pytest.approx(8 * 31278 / 96)          # FFCV: 31,278 images/s on 96 threads
    assert r.delivered_sps == r.cpu_sps and r.bound == "cpu"
    assert r.utilization == pytest.approx(2606.5 / 5153.7, rel=0.001)
    assert r.workers_needed == math.ceil(r.accelerator_sps / (31278 / 96)) == 16


def test_stage_formulas_by_hand():
    r = ms.datapipe("resnet-50", "a100-80gb", batch=256, workers=4, storage="local-nvme", readers=8)
    jpeg_B = 65.47 * GB / 1281167                                  # FFCV 512 px, quality 90
    assert r.sample_B == pytest.approx(jpeg_B) and r.sample_B == pytest.approx(51.1e3, rel=0.001)
    assert r.storage_sps == pytest.approx(6.4 * GB / jpeg_B)       # 8 drives shared by 8 GPUs; packed
    lustre = ms.datapipe("resnet-50", "a100-80gb", storage="lustre", readers=2)
    assert lustre.storage_sps == pytest.approx(400e9 / 8 / jpeg_B / 2)   # the node's 400 Gb/s client link
    assert r.link_sps == pytest.approx(32 * GB / (224 * 224 * 3))  # PCIe 4.0 x16, one direction
    step = ms.roofline("resnet-50", "a100-80gb", batch=256, phase="training")
    assert r.accelerator_sps == pytest.approx(256 / step.time_s) and r.step_s == step.time_s


def test_imagenet_mean_jpeg_and_request_limit():
    p = ms.pipeline("imagenet-jpeg-decode")
    assert p.stored_B == pytest.approx(147_897_477_120 / 1_281_167) and 115e3 < p.stored_B < 116e3
    r = ms.datapipe("resnet-50", "h100", pipeline=p, workers=64, storage="s3")
    assert r.storage_sps == 5500 and r.bound == "storage"      # one GET per file, 5,500 per prefix
    four = ms.datapipe("resnet-50", "h100", pipeline=p, workers=64, storage="s3", readers=4)
    assert four.storage_sps == pytest.approx(5500 / 4)


def test_token_pipelines():
    assert ms.datapipe("gpt-2", "h100", batch=16, seq_len=1024).sample_B == 2 * 1024   # uint16 ids
    assert dp_module.stored_bytes_per_token("llama-3-8b") == 4                        # vocab > 65,500
    pre = ms.datapipe("gpt-2", "h100", batch=16, seq_len=1024)
    assert math.isinf(pre.cpu_sps) and pre.workers_needed == 0 and pre.bound == "accelerator"
    hf = ms.datapipe("gpt-2", "h100", batch=16, seq_len=1024, pipeline="text-hf-tokenizers")
    per_thread = 1.7e6 / 4 / 1024                                   # 1.7 MB/s of text, 4 B per token
    assert hf.per_worker_sps == pytest.approx(per_thread)
    assert hf.workers_needed == math.ceil(hf.accelerator_sps / per_thread)
    assert hf.tokens_per_s == pytest.approx(hf.delivered_sps * 1024)
    assert hf.device_B == 16 * 1024 and hf.input_Bps == pytest.approx(hf.delivered_sps * 4 * 1024)


def test_llm_needs_far_less_input_per_flop_than_images():
    img = ms.datapipe("resnet-50", "h100", batch=256)
    llm = ms.datapipe("gpt-2", "h100", batch=16, seq_len=1024)
    assert llm.flop_per_input_byte > 500 * img.flop_per_input_byte
    assert llm.input_Bps < 0.05 * img.input_Bps


def test_host_cores():
    assert ms.host("dgx-a100").threads_per_accelerator == 32
    assert ms.host("DGX-H100").cores_per_accelerator == 14


def test_tables_list_every_entry_with_sources():
    data = dp_module._data()
    for kind in ("pipeline", "storage", "host"):
        for rec in data[kind].records:
            assert rec.source and rec.date, rec
    assert len(ms.pipelines_table().rows) == len(data["pipeline"].records)
    assert "not limiting" in str(ms.storage_table())
    names = {t.name for t in data["storage"].records}
    assert names == {"page-cache"} | {t.name for t in ms.storage_tiers()}   # reuses data/storage.yaml
    assert ms.input_tier("s3").reads_per_s == 5500 and ms.input_tier("ram").name == "page-cache"


def test_result_prints_and_renders():
    r = ms.datapipe("resnet-50", "a100-80gb")
    text = str(r)
    assert "delivered" in text and "cpu" in text and repr(r) == text
    assert "<table>" in r._repr_html_()
    arr = ms.datapipe("resnet-50", "a100-80gb", workers=np.array([1, 2]))
    assert "shape" in str(arr)


# --- properties -------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.sampled_from(IMAGE_GPUS), st.integers(1, 63), st.integers(1, 64),
       st.sampled_from(["page-cache", "local-nvme", "s3"]),
       st.sampled_from(["imagenet-ffcv", "imagenet-jpeg-decode"]))
def test_more_workers_never_lower_throughput(dev, w, extra, tier, pipe):
    a = ms.datapipe("resnet-50", dev, batch=64, workers=w, storage=tier, pipeline=pipe)
    b = ms.datapipe("resnet-50", dev, batch=64, workers=w + extra, storage=tier, pipeline=pipe)
    assert b.delivered_sps >= a.delivered_sps and b.cpu_sps >= a.cpu_sps


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(IMAGE_GPUS), st.integers(1, 128), st.integers(1, 8),
       st.floats(0.05, 1.0), st.sampled_from(["page-cache", "local-nvme", "lustre", "s3"]))
def test_throughput_never_exceeds_the_slowest_stage(dev, w, readers, eta, tier):
    r = ms.datapipe("resnet-50", dev, batch=128, workers=w, readers=readers, storage=tier,
                    efficiency=eta, mem_efficiency=eta)
    assert r.delivered_sps == min(r.stages.values())
    assert 0 < r.utilization <= 1
    assert r.stages[r.bound] == r.delivered_sps


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(IMAGE_GPUS), st.floats(0.05, 1.0))
def test_workers_needed_is_the_crossover(dev, eta):
    kw = dict(batch=256, storage="page-cache", efficiency=eta, mem_efficiency=eta)
    need = ms.datapipe("resnet-50", dev, **kw).workers_needed
    assert ms.datapipe("resnet-50", dev, workers=need, **kw).utilization == 1.0
    if need > 1:
        assert ms.datapipe("resnet-50", dev, workers=need - 1, **kw).utilization < 1.0


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 32), st.integers(1, 32))
def test_cores_cap_the_workers(w, c):
    capped = ms.datapipe("resnet-50", "h100", workers=w, cores=c)
    assert capped.cpu_sps == pytest.approx(min(w, c) * 31278 / 96)


def test_faster_accelerator_needs_more_workers():
    needs = [ms.datapipe("resnet-50", g, batch=256).workers_needed for g in ["a100-80gb", "h100", "h200", "b200"]]
    assert needs == sorted(needs) and needs[0] < needs[-1]


def test_more_readers_never_raise_storage_rate():
    r = ms.datapipe("resnet-50", "h100", storage="s3", pipeline="imagenet-jpeg-decode", readers=np.arange(1, 9))
    assert np.all(np.diff(r.storage_sps) < 0)


def test_vectorised_equals_scalar_calls():
    w = np.array([1, 3, 17, 40])
    b = np.array([32, 64, 128, 256])
    vec = ms.datapipe("resnet-50", "h100", batch=b, workers=w)
    one = [ms.datapipe("resnet-50", "h100", batch=int(x), workers=int(y)).delivered_sps for x, y in zip(b, w)]
    assert np.allclose(vec.delivered_sps, one)
    assert list(vec.bound) == [ms.datapipe("resnet-50", "h100", batch=int(x), workers=int(y)).bound
                               for x, y in zip(b, w)]


# --- infeasible and bad input ------------------------------------------------------
def test_training_step_that_does_not_fit():
    with pytest.raises(ms.InfeasibleError, match="needs"):
        ms.datapipe("llama-3-8b", "h100", batch=1, seq_len=2048)
    r = ms.datapipe("resnet-50", "l4", batch=np.array([64, 1_000_000]))
    assert r.feasible.tolist() == [True, False]
    assert np.isnan(r.delivered_sps[1]) and np.isnan(r.cpu_sps[1]) and r.bound[1] == "infeasible"
    assert r.reason


@pytest.mark.parametrize("bad", [0, -1, 1.5, float("nan"), np.array([2, 0])])
def test_bad_workers(bad):
    with pytest.raises(ms.MlsysimError, match="workers"):
        ms.datapipe("resnet-50", "h100", workers=bad)


@pytest.mark.parametrize("name,value", [("readers", 0), ("cores", 0), ("storage_Bps", -1.0),
                                        ("efficiency", 0.0), ("mem_efficiency", 1.5), ("host_link_Bps", 0.0)])
def test_bad_numbers_name_the_input(name, value):
    with pytest.raises(ms.MlsysimError, match=name):
        ms.datapipe("resnet-50", "h100", **{name: value})


def test_bad_seq_len():
    with pytest.raises(ms.MlsysimError, match="seq_len"):
        ms.datapipe("gpt-2", "h100", seq_len=0)


def test_unknown_names_and_mismatches():
    with pytest.raises(ms.UnknownNameError, match="input pipeline"):
        ms.datapipe("resnet-50", "h100", pipeline="ffcvv")
    with pytest.raises(ms.UnknownNameError, match="input storage tier"):
        ms.datapipe("resnet-50", "h100", storage="tape")
    with pytest.raises(ms.UnknownNameError, match="host"):
        ms.host("dgx-z")
    with pytest.raises(ms.MlsysimError, match="token"):
        ms.datapipe("gpt-2", "h100", pipeline="imagenet-ffcv")
    with pytest.raises(ms.MlsysimError, match="image"):
        ms.datapipe("resnet-50", "h100", pipeline="tokens")
    with pytest.raises(ms.MlsysimError, match="images, not tokens"):
        dp_module.stored_bytes_per_token("gpt-2", "imagenet-ffcv")


def test_missing_host_link_is_an_error_not_a_default():
    with pytest.raises(ms.MlsysimError, match="host_link_Bps"):
        ms.datapipe("resnet-50", "tpu-v4", batch=64)
    r = ms.datapipe("resnet-50", "tpu-v4", batch=64, host_link_Bps=16e9)
    assert r.link_sps == pytest.approx(16e9 / (224 * 224 * 3))


def test_custom_hardware_record():
    h = dataclasses.replace(ms.hardware("h100"), name="H100-slow-pcie", host_link_Bps=1e8)
    assert ms.datapipe("resnet-50", h, batch=256, workers=64).bound == "link"


# --- explorer ---------------------------------------------------------------------------
def test_datapipe_explorer():
    ex = ms.widgets.datapipe_explorer()
    assert ex.result.bound == "cpu" and "cpu" in ex.summary_text()
    ex.controls["workers"].value = 64
    assert ex.result.bound == "accelerator" and ex.result.workers == 64
    ex.controls["efficiency"].value = 0.3
    assert ex.result.accelerator_sps == pytest.approx(
        ms.datapipe("resnet-50", "a100-80gb", efficiency=0.3, mem_efficiency=0.3).accelerator_sps)
    ex.controls["workload"].value = "GPT-2"
    assert isinstance(ex.result, ms.MlsysimError) and "not feasible" in ex.summary_text()
    ex.controls["pipeline"].value = "tokens"
    assert "needs" in ex.error                       # batch 256 of GPT-2 does not fit for training
    ex.controls["batch"].value = 16
    assert ex.error == "" and ex.result.tokens_per_sample == 1024
    assert "workers to keep it fed: 0" in ex.summary_text()
