"""The serving-under-load explorer is driven kernel-side: set a control, read the run and the summary."""
import pytest

import mlsysim as ms


def _small(**kw):
    """Short requests, few of them: each update stays a few milliseconds."""
    return ms.widgets.serving_load_explorer(prompt=512, output=128, requests=120, **kw)


def test_a_rate_past_saturation_queues_requests_and_caps_throughput():
    ex = ms.widgets.serving_load_explorer(prompt=8192, output=256, requests=150, rate=2.0)
    light = ex.result
    assert light.load == "rate 2 req/s" and light.engine == "trtllm" and ex.error == ""
    assert "TTFT" in ex.summary_text() and "output tokens/s per GPU" in ex.summary_text()
    ex.controls["rate"].value = 128.0
    heavy = ex.result
    assert heavy.load == "rate 128 req/s"
    assert heavy.ttft_s["p99"] > 10 * light.ttft_s["p99"]                # queueing
    assert heavy.requests_per_s < 0.1 * 128                               # the GPU cannot keep up
    assert max(heavy.timeline["batch"]) < 150 and max(heavy.timeline["kv_used"]) > 0.95   # the cache is full
    assert heavy.itl_s["p50"] > light.itl_s["p50"]                        # a larger batch per iteration


def test_load_and_engine_controls_reach_the_simulation():
    ex = _small(concurrency=16)
    ex.controls["load"].value = "concurrency"
    assert ex.result.load == "concurrency 16" and max(ex.result.timeline["batch"]) <= 16
    ex.controls["load"].value = "all queued"
    assert ex.result.load == "all queued"
    ex.controls["engine"].value = "vllm"
    assert ex.result.engine == "vllm" and ex.result.max_batch == 1024
    ex.controls["engine"].value = "static"
    assert ex.result.engine == "static"
    ex.controls["output"].value = 256
    assert ex.result.output_tokens == 256 and "256 out" not in ex.error


def test_a_model_that_does_not_fit_says_so_and_recovers_with_tp():
    ex = _small(rate=2.0)
    ex.controls["workload"].value = "Llama-3-70B"
    ex.controls["precision"].value = "bf16"
    assert isinstance(ex.result, ms.InfeasibleError) and "larger tp" in ex.error
    assert "not feasible" in ex.summary_text()
    ex.controls["tp"].value = 4
    assert ex.error == "" and ex.result.tp == 4 and ex.result.workload == "Llama-3-70B"


@pytest.mark.parametrize("bad, words", [({"requests": 301}, ("requests", "300")),
                                        ({"engine": "tgi"}, ("engine", "vllm")),
                                        ({"load": "burst"}, ("load", "concurrency"))])
def test_bad_settings_raise_one_clear_error(bad, words):
    with pytest.raises(ms.MlsysimError) as err:
        ms.widgets.serving_load_explorer(**bad)
    assert all(w in str(err.value) for w in words)
