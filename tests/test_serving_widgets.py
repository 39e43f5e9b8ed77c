"""Serving explorers are driven kernel-side: set a control, read the result and the summary."""
import mlsysim as ms


def test_serving_explorer_reports_both_phases_and_follows_its_controls():
    ex = ms.widgets.serving_explorer()
    assert ex.result["prefill"].bound == "compute" and ex.result["decode"].bound == "memory"
    assert "TTFT" in ex.summary_text() and "meets" in ex.summary_text()
    itl = ex.result["decode"].time_s
    ex.controls["batch"].value = 128
    assert ex.result["decode"].batch == 128 and ex.result["decode"].time_s > itl
    ex.controls["batch"].value = 512                       # 512 caches of 2,048 tokens do not fit
    assert isinstance(ex.result, ms.InfeasibleError) and "serve it with tp=2" in ex.error
    ex.controls["batch"].value = 8
    ex.controls["hardware"].value = "H200-SXM"
    assert ex.result["decode"].hardware == "H200-SXM" and ex.error == ""


def test_serving_explorer_refuses_a_model_that_does_not_fit_and_recovers_with_tp():
    ex = ms.widgets.serving_explorer()
    ex.controls["workload"].value = "Llama-3-70B"
    assert isinstance(ex.result, ms.InfeasibleError) and "tp=2" in ex.error
    assert "not feasible" in ex.summary_text()
    ex.controls["tp"].value = 4
    assert ex.error == "" and ex.result["decode"].tp == 4
    assert "communication share" in ex.summary_text()


def test_kv_explorer_updates_capacity_with_block_size_and_precision():
    ex = ms.widgets.kv_explorer()
    small = ex.result["paged"].requests_paged
    ex.controls["block_tokens"].value = 512
    assert ex.result["paged"].requests_paged < small
    kv = ex.result["kv_per_token_B"]
    ex.controls["kv_precision"].value = "fp8"
    assert ex.result["kv_per_token_B"] == kv / 2
    assert "requests, paged" in ex.summary_text()


def test_kv_explorer_shows_why_a_large_model_does_not_fit():
    ex = ms.widgets.kv_explorer(workload="DeepSeek-V3", hardware="B200-HGX", tp=8)
    assert isinstance(ex.result, ms.InfeasibleError) and "no KV memory" in ex.error
    ex.controls["weight_precision"].value = "fp8"
    assert ex.error == "" and ex.result["paged"].requests_paged > 0
