"""Explorers of notebooks 09 and 10, driven kernel-side."""
import matplotlib.pyplot as plt
import numpy as np

import mlsysim as ms


def test_sensitivity_explorer_tracks_the_regime_and_the_target():
    ex = ms.widgets.sensitivity_explorer(batch=64, context_tokens=4096, target_ms=10)
    sens, need, target, verdict = ex.result
    assert sens.bound == "memory" and need == "bandwidth" and "1.48x" in verdict
    assert "elasticity to bandwidth: -1.00" in ex.summary_text()
    ex.controls["phase"].value = "prefill"
    sens, need, _, verdict = ex.result
    assert sens.bound == "compute" and need == "peak" and "elasticity to peak: -1.00" in ex.summary_text()
    assert verdict.startswith("none:") and "memory term alone" in verdict   # 10 ms is out of reach
    ex.controls["target_ms"].value = 100
    assert "PFLOP/s" in ex.summary_text() or "TFLOP/s" in ex.summary_text()


def test_sensitivity_explorer_reports_infeasible_configurations():
    ex = ms.widgets.sensitivity_explorer()
    ex.controls["workload"].value = "Llama-3-70B"
    assert isinstance(ex.result, ms.InfeasibleError) and "141" in ex.error
    assert "not feasible" in ex.summary_text()
    ex.controls["hardware"].value = "B200-HGX"
    assert ex.error == "" and ex.result[0].bound == "memory"


def test_wafer_explorer():
    ex = ms.widgets.wafer_explorer(workload="Llama-2-7B", seq_len=4096, batch=8)
    at, real, ideal = ex.result
    assert at.bound == "injection" and "not reachable" in ex.summary_text()
    assert np.isnan(real.time_s).any() and not np.isnan(ideal.time_s).any()   # past the SRAM limit
    ex.controls["workload"].value = "GPT-2-XL"
    ex.controls["seq_len"].value = 1024
    assert ": reachable" in ex.summary_text()
    ex.controls["recompute"].value = "none"
    ex.controls["batch"].value = 512
    assert isinstance(ex.result, ms.InfeasibleError) and "SRAM" in ex.error
    ex.controls["hardware"].value = "H100-SXM"          # weights offloaded over PCIe
    ex.controls["batch"].value = 4
    assert ex.error == "" and ex.result[0].hardware == "H100-SXM" and ex.result[0].ridge < 2e4


def test_analysis_plots_draw_from_results():
    s = ms.hardware_sensitivity(ms.roofline, "llama-3-8b", "a100-80gb", inputs={"batch": 512},
                                context_tokens=512)
    fig = ms.plots.tornado(s)
    assert len(fig.axes[0].patches) == 2 * len(s.items)
    grid = {"decode": {"A100": s, "H100": ms.hardware_sensitivity(ms.roofline, "llama-3-8b", "h100")}}
    fig2 = ms.plots.elasticities(grid)
    assert len(fig2.axes) == 2 and len(fig2.axes[0].lines) >= 1      # the kink's line on the A100
    sweep = np.geomspace(1, 100, 20)
    real = ms.weight_streaming("llama-3-70b", "cs-3", batch=sweep, recompute="full")
    fig3 = ms.plots.weight_streaming(real)
    assert "Llama-3-70B" in fig3.axes[0].get_title()
    plt.close("all")
