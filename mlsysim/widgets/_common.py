"""What every explorer shares: :class:`Explorer` and the helpers that build its controls."""
from __future__ import annotations

import re
from typing import Callable

import ipywidgets as W
import matplotlib.pyplot as plt
from IPython.display import display

from ..errors import MlsysimError
from ..registry import zoo


class Explorer(W.VBox):
    """Controls → ``compute(**values)`` → ``render(result)`` → (summary rows, figure).

    ``result`` is the latest solver result, or the :class:`~mlsysim.errors.MlsysimError`
    it raised; ``error`` is that error's message ("" when it ran).
    """

    def __init__(self, controls: dict[str, W.ValueWidget], compute: Callable, render: Callable,
                 title: str = ""):
        self.controls = controls
        self._compute, self._render = compute, render
        self.summary = W.HTML()
        self.output = W.Output()
        self.result = None
        self.error = ""
        header = [W.HTML(f"<b>{title}</b>")] if title else []
        panel = W.HBox([W.VBox(list(controls.values()), layout=W.Layout(width="45%")), self.summary])
        super().__init__(header + [panel, self.output])
        for c in controls.values():
            c.observe(self._update, names="value")
        self._update()

    def values(self) -> dict:
        return {k: c.value for k, c in self.controls.items()}

    def _update(self, change=None):
        try:
            self.result = self._compute(**self.values())
            self.error = ""
            rows, fig = self._render(self.result)
        except MlsysimError as e:  # infeasible or bad input: say so, show no numbers
            self.result, self.error = e, str(e)
            rows, fig = [("not feasible", str(e))], None
        self.summary.value = _table(rows)
        with self.output:
            self.output.clear_output(wait=True)
            if fig is not None:
                display(fig)
        if fig is not None:
            plt.close(fig)

    def summary_text(self) -> str:
        """The summary as plain text (for printing in a notebook or a test)."""
        return _plain(self.summary.value)


def _table(rows) -> str:
    cells = "".join(f"<tr><th style='text-align:left;padding-right:1em'>{k}</th><td>{v}</td></tr>"
                    for k, v in rows)
    return f"<table>{cells}</table>"


def _plain(html: str) -> str:
    rows = re.findall(r"<tr><th[^>]*>(.*?)</th><td>(.*?)</td></tr>", html)
    return "\n".join(f"{k}: {v}" for k, v in rows)


def _dropdown(kind: str, value: str, description: str, options=None) -> W.Dropdown:
    opts = options or zoo(kind)
    return W.Dropdown(options=opts, value=value, description=description, style={"description_width": "8em"})


def _log_slider(description: str, value: float, lo_exp: int, hi_exp: int) -> W.FloatLogSlider:
    return W.FloatLogSlider(value=value, base=2, min=lo_exp, max=hi_exp, step=1, description=description,
                            readout_format=".0f", style={"description_width": "8em"})


def _transformers() -> list[str]:
    from ..workloads import Transformer
    return [r.name for r in zoo("models", records=True) if isinstance(r, Transformer)]
