"""Small result tables that print the same way in a terminal, a notebook and on the site.

Values are shown as given when they are strings; numbers are rounded to four
significant figures, so that stored notebook outputs do not change with the
ninth digit of a BLAS result.
"""
from __future__ import annotations

import html
from typing import Sequence


def _cell(v) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool) or v is None:
        return str(v)
    try:
        return f"{float(v):.4g}"
    except (TypeError, ValueError):
        return str(v)


class Table:
    """Rows of equal keys shown as an aligned text table (``str``) or an HTML table."""

    def __init__(self, rows: Sequence[dict], title: str = ""):
        self.rows = [dict(r) for r in rows]
        self.columns = list(self.rows[0]) if self.rows else []
        self.title = title

    def __str__(self) -> str:
        cells = [[_cell(r.get(c, "")) for c in self.columns] for r in self.rows]
        widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(self.columns)]
        line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
        out = ([self.title] if self.title else []) + [line(self.columns), line(["-" * w for w in widths])]
        return "\n".join(out + [line(row) for row in cells])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        pad = "padding:0.15em 0.8em"
        head = "".join(f"<th style='{pad}'>{html.escape(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td style='{pad}'>{html.escape(_cell(r.get(c, '')))}</td>"
                                        for c in self.columns) + "</tr>" for r in self.rows)
        caption = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def rows_text(rows) -> str:
    """(label, value) pairs as two aligned text columns."""
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{w}}  {v}" for k, v in rows)


def rows_html(rows) -> str:
    """(label, value) pairs as a two-column HTML table."""
    cells = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return f"<table>{cells}</table>"


class Record:
    """Base of the result records: ``str()`` and the notebook's HTML view both show the
    (label, formatted value) pairs that the record's ``rows()`` returns."""

    def rows(self) -> list[tuple[str, str]]:
        raise NotImplementedError

    def __str__(self) -> str:
        return rows_text(self.rows())

    def _repr_html_(self) -> str:
        return rows_html(self.rows())


def table(rows: Sequence[dict], title: str = "") -> Table:
    """A :class:`Table` from a list of dicts (one per row, same keys)."""
    return Table(rows, title)
