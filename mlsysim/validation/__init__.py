"""Validation cases: the package's predictions next to published measurements.

Each area keeps its cases in ``validation/<area>.py`` as a list ``CASES`` of
:class:`Case` records. The test suite asserts every case; the book's accuracy
chapter runs the same list to draw its table and parity plot, so nothing in
that chapter is typed by hand.

Two kinds of case:

* ``"estimate"`` — passes when ``abs(predicted / published - 1) <= tolerance``.
* ``"bound"`` — the model gives a physical limit (a roofline time can only be
  beaten by a faster machine). ``direction="lower"`` means the prediction must
  not exceed the published value, ``"upper"`` that it must not fall below it;
  ``tolerance`` is then the largest gap between the bound and reality that
  the case accepts.
"""
from __future__ import annotations

import pkgutil
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Callable


def areas() -> list[str]:
    """Names of the case modules in this package, sorted."""
    return sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]))


@dataclass(frozen=True)
class Case:
    """One published value, the function that predicts it, and what the comparison accepts."""

    id: str
    area: str
    title: str
    published: float
    unit: str
    predict: Callable[[], float]
    tolerance: float
    source: str
    kind: str = "estimate"       # or "bound"
    direction: str = ""          # for bounds: "lower" (prediction ≤ published) or "upper"
    note: str = ""               # why the model and reality differ, where they do


@dataclass(frozen=True)
class Outcome:
    """A case with its prediction: ``ratio`` predicted / published, ``miss`` and ``passed``."""

    case: Case
    predicted: float

    @property
    def ratio(self) -> float:
        return self.predicted / self.case.published

    @property
    def error(self) -> float:
        return self.ratio - 1.0

    @property
    def miss(self) -> float:
        """The quantity the tolerance limits.

        ``abs(ratio - 1)`` for an estimate; the gap ``1 - min(r, 1/r)`` for a bound.
        """
        return abs(self.error) if self.case.kind == "estimate" else 1.0 - min(self.ratio, 1 / self.ratio)

    @property
    def passed(self) -> bool:
        c = self.case
        if c.kind == "estimate":
            return abs(self.error) <= c.tolerance
        gap = 1.0 - min(self.ratio, 1 / self.ratio)
        side_ok = self.ratio <= 1.0 + 1e-9 if c.direction == "lower" else self.ratio >= 1.0 - 1e-9
        return side_ok and gap <= c.tolerance


@dataclass(frozen=True)
class Series:
    """A published scaling series: ``points`` in order of growth (model and layout together, or
    the GPU count), each ``(label, published, predict)``. The model must get the **trend** right
    (the sign of last − first); ``target`` is the relative miss the series aims at on every point
    (the points that meet it are also cases, asserted one by one)."""

    name: str
    source: str
    unit: str
    points: tuple
    target: float = 0.15
    note: str = ""

    def run(self) -> list[tuple[str, float, float]]:
        """``(label, published, predicted)`` for every point."""
        return [(label, float(pub), float(predict())) for label, pub, predict in self.points]

    @staticmethod
    def trend(values) -> int:
        """+1 rising, −1 falling, 0 flat (last against first)."""
        d = values[-1] - values[0]
        return (d > 0) - (d < 0)


def cases(selected_areas=None) -> list[Case]:
    """Every validation case of the given areas (all by default), in a stable order."""
    out = []
    for area in selected_areas or areas():
        out += import_module(f"{__name__}.{area}").CASES
    return out


def series(selected_areas=None) -> list[Series]:
    """Every published scaling series of the given areas (those that define ``SERIES``)."""
    out = []
    for area in selected_areas or areas():
        out += getattr(import_module(f"{__name__}.{area}"), "SERIES", [])
    return out


def run(selected=None) -> list[Outcome]:
    """Evaluate cases (all by default) and return their outcomes."""
    return [Outcome(c, float(c.predict())) for c in (selected if selected is not None else cases())]


def _kind(c: Case) -> str:
    return c.kind if c.kind == "estimate" else f"{c.direction} bound"


def _accepts(c: Case) -> str:
    if c.kind == "estimate":
        return f"within ±{c.tolerance:.0%}"
    side = "≤" if c.direction == "lower" else "≥"
    return f"{side} published, gap ≤ {c.tolerance:.0%}"


def rows(outcomes: list[Outcome]) -> list[dict]:
    """One printable row per outcome (for :func:`mlsysim.table`): values with units, the ratio
    predicted / published, what the case accepts, the result and the source."""
    from ..units import fmt
    return [{"case": o.case.id, "what": o.case.title, "predicted": fmt(o.predicted, o.case.unit),
             "published": fmt(o.case.published, o.case.unit), "ratio": f"{o.ratio:.3g}",
             "kind": _kind(o.case), "accepts": _accepts(o.case), "result": "pass" if o.passed else "FAIL",
             "source": o.case.source}
            for o in outcomes]


def _rule(row: dict) -> str:
    """The accepts text without the side of a bound (the kind already says it)."""
    return row["accepts"].replace("within ", "").replace("≤ published, ", "").replace("≥ published, ", "")


@dataclass(frozen=True)
class Report:
    """Outcomes shown as a table: plain text in a terminal, a compact HTML table in a notebook
    (each case's title and source under its id, so that the table fits a narrow page)."""

    outcomes: tuple

    def __str__(self) -> str:
        from ..tables import table
        return str(table(rows(list(self.outcomes))))

    def _repr_html_(self) -> str:
        import html
        pad = "padding:0.3em 0.6em;vertical-align:top"
        head = "".join(f"<th style='{pad};text-align:left'>{h}</th>"
                       for h in ("case", "predicted", "published", "ratio", "accepts", "result"))
        body = []
        for r in rows(list(self.outcomes)):
            e = {k: html.escape(v) for k, v in r.items()}
            colour = "#2ca02c" if r["result"] == "pass" else "#d62728"
            body.append(
                f"<tr><td style='{pad}'><b>{e['case']}</b><br>{e['what']}<br>"
                f"<span style='font-size:85%;color:#666'>{e['source']}</span></td>"
                + "".join(f"<td style='{pad};white-space:nowrap'>{e[k]}</td>"
                          for k in ("predicted", "published", "ratio"))
                + f"<td style='{pad}'>{e['kind']}, {html.escape(_rule(r))}</td>"
                f"<td style='{pad};color:{colour};font-weight:bold'>{e['result']}</td></tr>")
        return (f"<table style='font-size:90%;width:100%'><thead><tr>{head}</tr></thead>"
                f"<tbody>{''.join(body)}</tbody></table>")


def report(outcomes: list[Outcome]) -> Report:
    """A :class:`Report` of ``outcomes`` (e.g. ``report(run())``)."""
    return Report(tuple(outcomes))
