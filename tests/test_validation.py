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
