"""Authoring aid for the course notebooks.

    python tools/nb.py export notebooks/00_hello_roofline.ipynb > draft.py   # notebook -> percent text
    python tools/nb.py build draft.py notebooks/00_hello_roofline.ipynb      # percent text -> notebook
    python tools/nb.py execute notebooks/00_hello_roofline.ipynb ...         # run in place, keep widget state

Percent text: a line ``# %%`` starts a code cell, ``# %% [markdown]`` a markdown
cell (its lines start with "# "), and ``tags=["nbval-ignore-output"]`` after
either marker sets cell tags. Magics are commented in the text (``# %matplotlib
inline``) and uncommented in the notebook, as jupytext does. ``execute`` runs each notebook with nbclient in
its own folder and stores the widget state, so that the static site shows the
widgets and nbval has outputs to compare.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat

MAGIC = re.compile(r"^# %[^%]")
MARKER = re.compile(r"^# %%(?P<md> \[markdown\])?(?:\s+tags=(?P<tags>\[.*\]))?\s*$")


def build(src: Path, out: Path) -> None:
    cells, kind, tags, lines = [], None, [], []

    def flush():
        if kind is None:
            return
        text = "\n".join(lines).strip("\n")
        if kind == "markdown":
            text = "\n".join(l[2:] if l.startswith("# ") else l.lstrip("#") for l in text.split("\n"))
            cell = nbformat.v4.new_markdown_cell(text)
        else:  # a commented magic ("# %matplotlib inline") is a magic again in the notebook
            text = "\n".join(l[2:] if MAGIC.match(l) else l for l in text.split("\n"))
            cell = nbformat.v4.new_code_cell(text)
        if tags:
            cell.metadata["tags"] = tags
        cells.append(cell)

    for line in src.read_text(encoding="utf-8").split("\n"):
        m = MARKER.match(line)
        if m:
            flush()
            kind = "markdown" if m.group("md") else "code"
            tags = json.loads(m.group("tags")) if m.group("tags") else []
            lines = []
        else:
            lines.append(line)
    flush()
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"c{i:03d}"
    nbformat.write(nb, out)


def export(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    parts = []
    for cell in nb.cells:
        tags = cell.metadata.get("tags")
        suffix = f" tags={json.dumps(tags)}" if tags else ""
        if cell.cell_type == "markdown":
            body = "\n".join(("# " + l) if l else "#" for l in cell.source.split("\n"))
            parts.append(f"# %% [markdown]{suffix}\n{body}")
        else:
            body = "\n".join("# " + l if l.startswith("%") else l for l in cell.source.split("\n"))
            parts.append(f"# %%{suffix}\n{body}")
    return "\n\n".join(parts) + "\n"


def execute(path: Path, timeout: int = 600) -> None:
    from mlsysim.assign import notebook_client  # nbclient with a fix for a stall on widget cells
    nb = nbformat.read(path, as_version=4)
    notebook_client(nb, path.parent, timeout=timeout, store_widget_state=True).execute()
    nb.metadata.pop("widgets", None) if not _has_widgets(nb) else None
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"c{i:03d}"
    nbformat.write(nb, path)


def _has_widgets(nb) -> bool:
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    return bool(state.get("state"))


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "export":
        sys.stdout.write(export(Path(argv[1])))
    elif len(argv) == 3 and argv[0] == "build":
        build(Path(argv[1]), Path(argv[2]))
    elif len(argv) >= 2 and argv[0] == "execute":
        for p in argv[1:]:
            print(f"executing {p}", flush=True)
            execute(Path(p))
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
