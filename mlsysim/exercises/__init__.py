"""Checked exercises: ``check("NN.k", answer)`` prints feedback and returns True or False.

Each notebook's exercises live in ``exercises/nbNN.py`` (or several modules
``nbNN_<part>.py``) as a list ``EXERCISES`` of :class:`Exercise` records. The expected answer is computed by the package
when it is checked (never typed), so it cannot drift from the solvers; a
numeric answer is accepted within a relative tolerance, a text answer when it
matches one of the accepted words (case and spacing ignored). An exercise with
many right answers (propose a change that meets a target) has an ``accept``
predicate that judges the reader's own answer; its ``expected()`` is one right
answer.
"""
from __future__ import annotations

import math
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from importlib import import_module
from typing import Callable

from ..errors import UnknownNameError
from ..units import fmt


@dataclass(frozen=True)
class Exercise:
    """One exercise: ``expected()`` computes the answer; ``unit`` formats numbers with :func:`fmt`.

    ``accept``, when given, decides instead whether an answer is right (for exercises with
    many right answers); ``expected()`` then returns one of them.
    """

    id: str
    question: str
    expected: Callable[[], object]
    rtol: float = 0.02
    unit: str = ""
    hint: str = ""
    accept: Callable[[object], bool] | None = None


def _modules(notebook: str) -> list[str]:
    here = Path(__file__).parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)])
                  if m.name == f"nb{notebook}" or m.name.startswith(f"nb{notebook}_"))


def _registry(notebook: str) -> dict[str, Exercise]:
    names = _modules(notebook)
    if not names:
        known = sorted({m.name[2:].split("_")[0] for m in pkgutil.iter_modules([str(Path(__file__).parent)])})
        raise UnknownNameError("notebook for exercises", notebook, known)
    return {e.id: e for name in names for e in import_module(f"{__name__}.{name}").EXERCISES}


def get(exercise_id: str) -> Exercise:
    """The :class:`Exercise` with this id (``"00.1"`` is notebook 00, exercise 1)."""
    table = _registry(str(exercise_id).split(".")[0])
    if exercise_id not in table:
        raise UnknownNameError("exercise", exercise_id, table)
    return table[exercise_id]


def _show(value, unit: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return repr(value)
    return fmt(value, unit) if unit else f"{value:.4g}"


def _norm(text) -> str:
    return " ".join(str(text).lower().replace("-", " ").replace("_", " ").split())


def is_correct(exercise: Exercise, answer) -> bool:
    if exercise.accept is not None:
        return bool(exercise.accept(answer))
    expected = exercise.expected()
    if isinstance(expected, bool):
        return isinstance(answer, bool) and answer == expected
    if isinstance(expected, str):
        return _norm(answer) == _norm(expected)
    if isinstance(expected, (tuple, list, set, frozenset)):
        return _norm(answer) in {_norm(x) for x in expected}
    try:
        a = float(answer)
    except (TypeError, ValueError):
        return False
    return math.isfinite(a) and math.isclose(a, float(expected), rel_tol=exercise.rtol, abs_tol=1e-12)


def check(exercise_id: str, answer) -> bool:
    """Print whether ``answer`` is right (within the exercise's tolerance) and return it as a bool."""
    ex = get(exercise_id)
    ok = is_correct(ex, answer)
    if ok:
        print(f"✅ {exercise_id} correct: {_show(answer, ex.unit)}")
    else:
        tol = f" (accepted within ±{ex.rtol:.0%})" if ex.accept is None and isinstance(
            ex.expected(), (int, float)) and not isinstance(ex.expected(), bool) else ""
        print(f"❌ {exercise_id} not yet: your answer is {_show(answer, ex.unit)}{tol}.")
        if ex.hint:
            print(f"   Hint: {ex.hint}")
    return ok


def ids(notebook: str) -> list[str]:
    """Ids of every exercise of a notebook (``"00"``), in the order of their numbers."""
    return sorted(_registry(str(notebook)), key=lambda i: [int(p) if p.isdigit() else p for p in i.split(".")])


def notebook_id(filename) -> str:
    """The exercise prefix of a notebook file: what its name has before the first ``_``, two digits and
    a letter for a lab that follows a chapter (``"06"`` for ``06_scaling_1000_gpus.ipynb``, ``"06b"``
    for ``06b_lab_pytorch.ipynb``).

    >>> notebook_id("notebooks/06c_lab_distributed.ipynb")
    '06c'
    """
    return Path(str(filename)).name.split("_")[0]
