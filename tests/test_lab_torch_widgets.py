"""The PyTorch lab's figure and explorer (model and recorded numbers only: no torch, no timing)."""
import math

import matplotlib

matplotlib.use("Agg")

import mlsysim as ms  # noqa: E402
from mlsysim.lab.pytorch.results import ENGINES, predicted  # noqa: E402


def test_explorer_follows_its_controls():
    ex = ms.widgets.lab_engines_explorer(size_GB=1.2, copy_GBps=20, write_GBps=1.5)
    e = {r["engine"]: r for r in ex.result["engines"]}
    assert math.isclose(ex.result["copy_floor_s"], 0.06) and math.isclose(ex.result["write_floor_s"], 0.8)
    assert abs(e["sync"]["stall_s"] - 0.86) < 1e-3 and abs(e["concurrent"]["stall_s"] - 0.06) < 1e-3
    assert abs(e["dcp-async"]["durable_s"] - 0.86) < 1e-3 and e["torch.save"]["durable_s"] is None
    assert "never" in ex.summary_text() and "write + fsync floor: 800 ms" in ex.summary_text()
    ex.controls["write_GBps"].value = 3.0
    e = {r["engine"]: r for r in ex.result["engines"]}
    assert abs(e["sync"]["durable_s"] - 0.46) < 1e-3 and "400 ms" in ex.summary_text()


def test_explorer_says_when_the_snapshot_does_not_fit():
    ex = ms.widgets.lab_engines_explorer(size_GB=48, host_memory_GB=16)
    assert ex.error and "host memory" in ex.error
    ex.controls["host_memory_GB"].value = 256
    assert not ex.error and ex.result["size_B"] == 48e9


def test_engine_figure_draws_bars_floors_and_never():
    d = predicted(1e9, copy_Bps=10e9, write_Bps=1e9)
    fig = ms.plots.lab_engines(d)
    ax = fig.axes[0]
    floors = {line.get_label(): line.get_ydata()[0] for line in ax.lines}
    assert floors == {"copy floor (100 ms)": 0.1, "write + fsync floor (1 s)": 1.0}
    assert [t.get_text() for t in ax.texts] == ["never"]
    assert len(ax.get_xticklabels()) == len(ENGINES) and ax.get_yscale() == "log"


def test_engine_figure_reads_a_recorded_run_with_nan_durable():
    d = predicted(2e9, copy_Bps=5e9, write_Bps=2e9)
    for r in d["engines"]:
        if r["durable_s"] is None:
            r["durable_s"] = float("nan")      # a Comparison's own EngineRun keeps NaN
    fig = ms.plots.lab_engines(d, title="t")
    assert fig.axes[0].get_title() == "t" and [t.get_text() for t in fig.axes[0].texts] == ["never"]
