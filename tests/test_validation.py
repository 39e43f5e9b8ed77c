"""Every published case in mlsysim.validation must hold (the accuracy chapter draws the same list)."""
import pytest

import mlsysim as ms

CASES = ms.validation.cases()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_case(case):
    outcome = ms.validation.run([case])[0]
    assert outcome.passed, (f"{case.id}: predicted {outcome.predicted:.4g} vs published {case.published:.4g} "
                            f"({outcome.error:+.1%}, tolerance {case.tolerance:.0%}, {case.kind})")


def test_cases_are_documented():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    for c in CASES:
        assert c.source and c.tolerance > 0 and c.published > 0
        assert c.kind in ("estimate", "bound") and (c.kind == "estimate" or c.direction in ("lower", "upper"))


SERIES = ms.validation.series()


@pytest.mark.parametrize("series", SERIES, ids=lambda s: s.name.split(" (")[0])
def test_series_trend_is_right(series):
    """Per-GPU throughput rising or falling along a published scaling series: the model must agree."""
    points = series.run()
    published, predicted = [p for _, p, _ in points], [q for _, _, q in points]
    assert series.trend(published) != 0
    assert series.trend(predicted) == series.trend(published), (series.name, published, predicted)


def test_series_are_documented_and_misses_explained():
    assert len(SERIES) >= 5
    for s in SERIES:
        assert s.source and s.unit and len(s.points) >= 2
        misses = [label for label, pub, pred in s.run() if abs(pred / pub - 1) > s.target]
        assert not misses or s.note, f"{s.name}: {misses} miss ±{s.target:.0%} without a note"


def test_every_series_meets_its_aim_as_the_accuracy_chapter_says():
    text = open("book/accuracy.md", encoding="utf-8").read()
    assert "Every series meets the aim, with its trend right" in text
    missed = [any(abs(pred / pub - 1) > s.target for _, pub, pred in s.run()) for s in SERIES]
    assert not any(missed)