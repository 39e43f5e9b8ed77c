"""The lab's figure and explorer (model only: no run, no timing)."""
import matplotlib

matplotlib.use("Agg")

import mlsysim as ms  # noqa: E402
from mlsysim.lab.predict import machine_from, predict  # noqa: E402


def test_explorer_follows_its_controls():
    ex = ms.widgets.lab_checkpoint_explorer(size_GB=1.2, copy_GBps=20, write_GBps=1.5, read_GBps=3, interval_s=10)
    p, _ = ex.result
    assert abs(p.sync_stall_s - 0.86) < 1e-3 and abs(p.concurrent_stall_s - 0.06) < 1e-3
    ex.controls["interval_s"].value = 0.5          # faster than the disk: back-pressure
    p, _ = ex.result
    assert abs(p.concurrent_stall_s - 0.30) < 1e-3 and "concurrent stall" in ex.summary.value
    ex.controls["write_GBps"].value = 3.0
    assert ex.result[0].sync_stall_s < 0.86


def test_stall_figure_draws_model_and_runs():
    m = machine_from(20e9, 1.5e9, 3e9)
    tau = [0.1, 1.0, 10.0]
    fig = ms.plots.lab_stalls(model=(tau, [predict(1e9, m, t).sync_stall_s for t in tau],
                                     [predict(1e9, m, t).concurrent_stall_s for t in tau]))
    labels = [l.get_label() for l in fig.axes[0].lines]
    assert labels == ["sync, model", "concurrent, model"]
