"""Widgets are driven kernel-side: set a control's value, read the explorer's result and summary."""
import mlsysim as ms


def test_roofline_explorer_updates_on_value_change():
    ex = ms.widgets.roofline_explorer()
    assert ex.result.bound == "memory" and "memory" in ex.summary.value
    ex.controls["batch"].value = 1024
    assert ex.result.bound == "compute" and ex.result.batch == 1024
    assert "compute" in ex.summary_text()
    ex.controls["hardware"].value = "A100-80GB"
    assert ex.result.hardware == "A100-80GB"


def test_explorer_reports_infeasible_configurations_instead_of_numbers():
    ex = ms.widgets.roofline_explorer()
    ex.controls["workload"].value = "Llama-3-70B"
    assert isinstance(ex.result, ms.InfeasibleError)
    assert "not feasible" in ex.summary_text() and "80 GB" in ex.error
    ex.controls["workload"].value = "Llama-3-8B"
    assert ex.error == "" and ex.result.bound == "memory"


def test_explorer_handles_cnn_phases():
    ex = ms.widgets.roofline_explorer(workload="ResNet-50", hardware="A100-80GB", phase="inference")
    assert ex.result.phase == "inference"
    ex.controls["phase"].value = "training"
    assert ex.result.phase == "training"


def test_generations_explorer():
    ex = ms.widgets.generations_explorer()
    assert len(ex.result.time_s) == 4 and ex.result.time_s[0] > ex.result.time_s[-1]
    ex.controls["phase"].value = "prefill"
    assert all(b == "compute" for b in ex.result.bound)
    assert "B200-HGX" in ex.summary_text()


def test_no_number_under_a_precision_the_device_lacks():
    """The T4 has no bf16 peak: the explorer says so and shows no time; in fp16 it shows one."""
    ex = ms.widgets.roofline_explorer(workload="GPT-2-XL", hardware="T4", precision="bf16")
    assert isinstance(ex.result, ms.MlsysimError) and "fp16" in ex.error and "time per pass" not in ex.summary_text()
    ex.controls["precision"].value = "fp16"
    assert ex.error == "" and ex.result.precision == "fp16" and "time per pass" in ex.summary_text()
