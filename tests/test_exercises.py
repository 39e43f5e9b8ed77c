import pkgutil
from pathlib import Path

import pytest

import mlsysim as ms
from mlsysim import exercises

NOTEBOOKS = sorted({m.name[2:].split("_")[0] for m in pkgutil.iter_modules([str(Path(exercises.__file__).parent)])
                    if m.name.startswith("nb")})   # "00" … "11", and "06a" for the lab after notebook 06
ALL = [e for nb in NOTEBOOKS for e in exercises._registry(nb).values()]


@pytest.mark.parametrize("ex", ALL, ids=lambda e: e.id)
def test_expected_answer_passes_and_a_wrong_one_fails(ex, capsys):
    expected = ex.expected()
    assert ms.exercises.check(ex.id, expected) is True
    assert "✅" in capsys.readouterr().out
    if ex.accept is not None:  # many right answers: no answer at all is wrong
        wrong = None
    else:
        wrong = "definitely wrong" if isinstance(expected, str) else (not expected if isinstance(expected, bool)
                                                                       else expected * 1.5 + 1)
    assert ms.exercises.check(ex.id, wrong) is False
    assert "❌" in capsys.readouterr().out


def test_every_notebook_has_three_exercises():
    for nb in NOTEBOOKS:
        assert len(exercises._registry(nb)) >= 3, nb


def test_unknown_exercise():
    with pytest.raises(ms.UnknownNameError):
        ms.exercises.check("00.99", 1.0)
    with pytest.raises(ms.UnknownNameError):
        ms.exercises.check("77.1", 1.0)


def test_tolerance_and_text_answers():
    ex = ms.exercises.get("00.2")
    assert ms.exercises.is_correct(ex, ex.expected() * (1 + ex.rtol / 2))
    assert not ms.exercises.is_correct(ex, ex.expected() * (1 + 2 * ex.rtol))
    assert not ms.exercises.is_correct(ex, "not a number")
    assert ms.exercises.is_correct(ms.exercises.get("01.4"), "  Bandwidth ")
