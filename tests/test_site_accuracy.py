"""What the accuracy chapter draws from mlsysim.validation: misses, the report table, the figures."""
from __future__ import annotations

import matplotlib
import numpy as np
import pytest

import mlsysim as ms
from mlsysim.validation import Case, Outcome, report, rows


def _case(kind="estimate", direction="", published=100.0, tolerance=0.1, area="demo", id="d1"):
    return Case(id=id, area=area, title=f"{id} title", published=published, unit="s",
                predict=lambda: 0.0, tolerance=tolerance, source=f"{id} source", kind=kind,
                direction=direction, note="")


@pytest.mark.parametrize("kind, direction, predicted, miss, passed", [
    ("estimate", "", 105.0, 0.05, True),
    ("estimate", "", 80.0, 0.20, False),
    ("bound", "lower", 60.0, 0.40, False),   # 40 % below, more than the 10 % gap allowed
    ("bound", "lower", 95.0, 0.05, True),
    ("bound", "lower", 101.0, 1 - 100 / 101, False),  # a lower bound above the published value
    ("bound", "upper", 125.0, 0.20, False),
])
def test_miss_is_what_the_tolerance_limits(kind, direction, predicted, miss, passed):
    o = Outcome(_case(kind, direction), predicted)
    assert o.miss == pytest.approx(miss)
    assert o.passed is passed


def test_report_shows_every_case_with_its_source_and_result():
    outcomes = [Outcome(_case(id="good"), 101.0), Outcome(_case("bound", "lower", id="bad"), 150.0)]
    html = report(outcomes)._repr_html_()
    for text in ("good", "bad", "good source", "bad source", "estimate, ±10%", "lower bound, gap ≤ 10%"):
        assert text in html
    assert html.count(">pass<") == 1 and html.count(">FAIL<") == 1
    text = str(report(outcomes))
    assert "good" in text and "FAIL" in text and "1.68 min" in text  # 101 s, formatted
    assert [r["result"] for r in rows(outcomes)] == ["pass", "FAIL"]


def test_report_escapes_html():
    o = Outcome(_case(id="<x>"), 100.0)
    assert "<x>" not in report([o])._repr_html_() and "&lt;x&gt;" in report([o])._repr_html_()


def test_every_published_case_has_a_row():
    outcomes = ms.validation.run()
    table = rows(outcomes)
    assert [r["case"] for r in table] == [o.case.id for o in outcomes]
    assert all(r["source"] and r["result"] in ("pass", "FAIL") for r in table)


def test_parity_plot_has_one_panel_per_area_and_marks_failures():
    outcomes = [Outcome(_case(area="a", id="a1"), 100.0), Outcome(_case(area="a", id="a2"), 200.0),
                Outcome(_case("bound", "lower", area="b", id="b1"), 90.0)]
    fig = ms.plots.accuracy_parity(outcomes)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["a (2 cases)", "b (1 cases)"]
    red = matplotlib.colors.to_rgba(ms.plots.PALETTE[1])
    failed = [line for line in visible[0].get_lines() if line.get_label().endswith("failed")]
    assert len(failed) == 1 and matplotlib.colors.to_rgba(failed[0].get_color()) == red
    assert failed[0].get_xydata().tolist() == [[100.0, 200.0]]
    assert {line.get_marker() for line in visible[1].get_lines()} >= {"v"}
    matplotlib.pyplot.close(fig)


def test_ratio_plot_draws_each_ratio():
    outcomes = [Outcome(_case(id="r1"), 50.0), Outcome(_case(id="r2"), 150.0)]
    fig = ms.plots.accuracy_ratios(outcomes)
    ys = sorted(float(y) for line in fig.axes[0].get_lines() if line.get_marker() == "o"
                for y in np.atleast_1d(line.get_ydata()))
    assert ys == [0.5, 1.5]
    matplotlib.pyplot.close(fig)
