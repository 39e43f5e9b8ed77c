"""The distributed lab's figure and explorer (the model only: no torch, no run, no timing)."""
import math

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

import mlsysim as ms  # noqa: E402
from mlsysim.widgets import DIST_MODES  # noqa: E402


def test_explorer_shows_busiest_rank_bytes_and_restore_per_mode():
    ex = ms.widgets.lab_dist_explorer(model="Llama-3-8B", nodes=32, storage="lustre", strategy="async")
    assert not ex.error and list(ex.result["current"]) == list(DIST_MODES)
    c = ms.cluster("dgx-h100", nodes=32)
    for label, z in DIST_MODES.items():
        want = ms.checkpoint("llama-3-8b", c, tp=1, pp=1, zero_stage=z, strategy="async")
        got = ex.result["current"][label]
        assert math.isclose(got.rank_B, want.rank_B) and math.isclose(got.restore_s, want.restore_s)
        assert f"busiest rank writes {ms.fmt(want.rank_B, 'B')}; restore {ms.fmt(want.restore_s, 's')}" \
            in ex.summary_text()
    cur = ex.result["current"]
    # FSDP: each of 256 ranks writes 1/256 of the state (+ 16 KB); DDP: rank 0 writes all of it
    assert math.isclose(cur["FSDP (ZeRO-3)"].rank_B, cur["FSDP (ZeRO-3)"].size_B / 256, rel_tol=1e-3)
    assert math.isclose(cur["DDP (ZeRO-0)"].rank_B, cur["DDP (ZeRO-0)"].size_B - 255 * 16e3, rel_tol=1e-3)
    assert "256 GPUs (32 x DGX-H100)" in ex.summary_text()
    assert list(ex.result["gpus"]) == [8 * 2 ** i for i in range(12)]


def test_explorer_follows_its_controls():
    ex = ms.widgets.lab_dist_explorer()
    fsdp = ex.result["current"]["FSDP (ZeRO-3)"].rank_B
    ex.controls["nodes"].value = 64
    assert math.isclose(ex.result["current"]["FSDP (ZeRO-3)"].rank_B, (fsdp - 16e3) / 2 + 16e3, rel_tol=1e-9)
    ex.controls["strategy"].value = "in-memory"
    k = ms.checkpoint("llama-3-8b", ms.cluster("dgx-h100", nodes=64), tp=1, pp=1, zero_stage=3,
                      strategy="in-memory")
    assert math.isclose(ex.result["current"]["FSDP (ZeRO-3)"].restore_s, k.restore_s)
    ex.controls["storage"].value = "s3"
    assert ex.result["storage"] == "s3" and "local-nvme" not in ex.controls["storage"].options


def test_explorer_names_an_infeasible_layout_per_mode():
    ex = ms.widgets.lab_dist_explorer(model="Llama-3.1-405B", nodes=4)     # TP 8 x PP 16 = 128 > 32 GPUs
    assert not ex.error
    assert all(isinstance(r, str) and "does not divide" in r for r in ex.result["current"].values())
    assert "not feasible" in ex.summary_text()
    sweep = ex.result["sweep"]["FSDP (ZeRO-3)"]
    assert np.isnan(sweep.rank_B[:4]).all() and np.isfinite(sweep.rank_B[4:]).all()   # from 16 nodes on
    ex.controls["nodes"].value = 16
    assert "not feasible" not in ex.summary_text()


def test_figure_draws_lines_measured_points_and_two_panels():
    world = [2, 4, 8]
    fig = ms.plots.lab_dist_bytes(world, {"FSDP": [5.0, 2.5, 1.25], "DDP": [10.0, 10.0, 10.0]},
                                  {"FSDP": [1.0, 0.5, 0.25], "DDP": [3.0, 3.0, 3.0]},
                                  measured={"run": ([2, 4], [6.0, 3.0])}, mark=4, title="t")
    left, right = fig.axes
    assert [line.get_label() for line in left.lines if not line.get_label().startswith("_")] == \
        ["FSDP", "DDP", "run"]
    assert list(left.lines[2].get_xdata()) == [2, 4] and left.get_xscale() == "log" == left.get_yscale()
    assert [list(line.get_xdata()) for line in right.lines if line.get_linestyle() == ":"] == [[4, 4]]
    assert fig._suptitle.get_text() == "t"
    one = ms.plots.lab_dist_bytes(world, {"FSDP": [5.0, 2.5, 1.25]})
    assert len(one.axes) == 1 and one.axes[0].get_title() == "Busiest rank's checkpoint bytes"


def test_recovery_figure_has_a_panel_per_run_and_a_bar_per_tier():
    runs = {"live": {"storage": 0.2, "memory": 0.05, "peer-memory": 0.1}, "recorded": {"peer-memory": 3.0,
                                                                                        "storage": 1.5}}
    fig = ms.plots.lab_recovery_tiers(runs, predicted={"recorded": {"storage": 1.0, "peer-memory": None}})
    live, rec = fig.axes
    assert [round(p.get_height(), 3) for p in live.patches] == [0.05, 0.1, 0.2]       # memory, peer, storage
    assert [t.get_text() for t in live.get_xticklabels()][0].startswith("own node")
    assert [round(p.get_height(), 3) for p in rec.patches] == [3.0, 1.5]
    (model,) = rec.get_lines()
    assert list(model.get_xdata()) == [1] and list(model.get_ydata()) == [1.0]     # storage only; None skipped
    assert not live.get_lines() and rec.get_ylim()[1] >= 3.0


def test_restore_bytes_figure_draws_a_bar_per_rank_and_the_model():
    fig = ms.plots.lab_restore_bytes({"replicated": [10.0, 10.0], "sharded": [5.0, 5.0], "broadcast": [10.0, 0.1]},
                                     predicted={"sharded": [5.0, 5.0]}, file_B=10.0)
    (ax,) = fig.axes
    assert [p.get_height() for p in ax.patches] == [10.0, 5.0, 10.0, 10.0, 5.0, 0.1]  # rank 0's bars, then rank 1's
    model = [ln for ln in ax.get_lines() if ln.get_marker() == "D"]
    ys = np.concatenate([ln.get_ydata() for ln in model])
    assert np.isnan(ys).sum() == 4 and sorted(ys[~np.isnan(ys)]) == [5.0, 5.0]
    assert any(ln.get_linestyle() == "--" for ln in ax.get_lines())
    assert "checkpoint" in " ".join(t.get_text() for t in ax.get_legend().get_texts())
