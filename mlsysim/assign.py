"""Student copies of the course notebooks, with the same solution markers as nbgrader.

An instructor's notebook marks each answer between two comment lines::

    ### BEGIN SOLUTION
    answer = ms.roofline("llama-3-8b", "h100", batch=1).intensity
    ### END SOLUTION
    ms.exercises.check("00.1", answer)

:func:`student_copy` replaces every such region by the stub nbgrader uses
(``# YOUR CODE HERE`` then ``raise NotImplementedError()``, indented like the
``BEGIN`` line), replaces marked regions of markdown cells by ``YOUR ANSWER
HERE``, clears outputs and execution counts, and drops the saved widget state;
the checks stay, so a student gets feedback on every answer. A line counts as a
marker when it *contains* ``BEGIN SOLUTION`` or ``END SOLUTION``, exactly as in
nbgrader's ``ClearSolutions`` preprocessor, so ``nbgrader generate_assignment``
accepts the same notebooks. :func:`nbgrader_source` adds the cell metadata that
nbgrader needs on top of the markers (answer cells, and locked autograder test
cells that assert the checks).

The module reads and writes notebook JSON itself (no nbformat needed), so that
``mlsysim assign`` works wherever the package is installed.
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from .errors import MlsysimError

BEGIN, END = "BEGIN SOLUTION", "END SOLUTION"
CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
TEXT_STUB = "YOUR ANSWER HERE"
CHECK = re.compile(r"""^(?P<indent>\s*)ms\.exercises\.check\(\s*["'](?P<id>[^"']+)["']""")
_DROPPED_CELL_METADATA = ("execution", "collapsed", "scrolled")


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def clear_solutions(source: str, stub: str) -> tuple[str, int]:
    """``source`` with every marked region replaced by ``stub``, and the number of regions.

    The stub takes the indentation of its ``BEGIN`` line. A region without its ``END``
    line, or a ``BEGIN`` inside a region, is an error (as in nbgrader).

    >>> clear_solutions("x = 1\\n    ### BEGIN SOLUTION\\n    y = 2\\n    ### END SOLUTION", CODE_STUB)
    ('x = 1\\n    # YOUR CODE HERE\\n    raise NotImplementedError()', 1)
    """
    out, inside, regions = [], False, 0
    for line in source.split("\n"):
        if BEGIN in line:
            if inside:
                raise MlsysimError(f"nested '{BEGIN}' marker: {line.strip()!r} inside an open region")
            inside, regions = True, regions + 1
            indent = line[: len(line) - len(line.lstrip())]
            out += [indent + s for s in stub.split("\n")]
        elif END in line:
            if not inside:
                raise MlsysimError(f"'{END}' without a '{BEGIN}' before it")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise MlsysimError(f"'{BEGIN}' without a matching '{END}'")
    return "\n".join(out), regions


def has_solution(cell) -> bool:
    """Whether a cell contains a solution marker."""
    return BEGIN in _source(cell)


def check_ids(cell) -> list[str]:
    """Exercise ids of the ``ms.exercises.check("NN.k", ...)`` calls in a code cell."""
    if cell.get("cell_type") != "code":
        return []
    return [m.group("id") for line in _source(cell).split("\n") if (m := CHECK.match(line))]


def _cleared_cell(cell) -> dict:
    cell = copy.deepcopy(cell)
    cell["metadata"] = {k: v for k, v in cell.get("metadata", {}).items() if k not in _DROPPED_CELL_METADATA}
    if cell["cell_type"] == "code":
        cell["outputs"], cell["execution_count"] = [], None
    return cell


def student_copy(nb: dict, name: str = "notebook") -> tuple[dict, int]:
    """A student version of notebook JSON ``nb`` and the number of solution regions removed.

    ``name`` only labels errors (a marker without its pair names the notebook and cell).
    """
    out = copy.deepcopy(nb)
    out["metadata"] = {k: v for k, v in nb.get("metadata", {}).items() if k not in ("widgets", "celltoolbar")}
    cells, removed = [], 0
    for i, cell in enumerate(nb.get("cells", [])):
        cell = _cleared_cell(cell)
        if cell["cell_type"] in ("code", "markdown"):
            stub = CODE_STUB if cell["cell_type"] == "code" else TEXT_STUB
            try:
                text, n = clear_solutions(_source(cell), stub)
            except MlsysimError as e:
                raise MlsysimError(f"{name}, cell {i}: {e}") from None
            if n:
                cell["source"], removed = text, removed + n
        cells.append(cell)
    out["cells"] = cells
    return out, removed


def _nbgrader(grade_id: str, *, solution: bool, grade: bool, locked: bool, points: float = 0) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if grade:
        meta["points"] = points
    return meta


def nbgrader_source(nb: dict, points: float = 1) -> dict:
    """An nbgrader *source* notebook: solutions kept, cell metadata added for ``generate_assignment``.

    A code cell with a solution region becomes an autograded answer cell; the
    ``ms.exercises.check("NN.k", answer)`` lines after its region move into a new
    locked autograder test cell, ``assert ms.exercises.check("NN.k", answer)``,
    worth ``points``. A markdown cell with a region becomes a manually graded answer
    worth ``points``.
    """
    out = copy.deepcopy(nb)
    out.get("metadata", {}).pop("widgets", None)  # the release copy starts without saved widget views
    cells = []
    for i, cell in enumerate(out.get("cells", [])):
        if not has_solution(cell):
            cells.append(cell)
            continue
        if cell["cell_type"] == "markdown":
            cell.setdefault("metadata", {})["nbgrader"] = _nbgrader(f"answer-md-{i}", solution=True, grade=True,
                                                                    locked=False, points=points)
            cells.append(cell)
            continue
        clear_solutions(_source(cell), CODE_STUB)  # raises on a broken marker pair
        ids = check_ids(cell)
        label = re.sub(r"[^A-Za-z0-9_-]", "_", ids[0]) if ids else f"cell-{i}"  # nbgrader's id pattern
        lines = _source(cell).split("\n")
        keep = [line for line in lines if not CHECK.match(line)]
        tests = [CHECK.match(line).group("indent") + "assert " + line.strip() for line in lines if CHECK.match(line)]
        cell["source"] = "\n".join(keep).rstrip("\n")
        cell.setdefault("metadata", {})["nbgrader"] = _nbgrader(f"answer-{label}", solution=True, grade=False,
                                                                locked=False)
        cells.append(cell)
        if tests:
            cells.append({"cell_type": "code", "execution_count": None, "id": f"check-{label}",
                          "metadata": {"nbgrader": _nbgrader(f"check-{label}", solution=False, grade=True,
                                                             locked=True, points=points)},
                          "outputs": [], "source": "\n".join(tests)})
    out["cells"] = cells
    return out


def read(path) -> dict:
    """Notebook JSON from a file."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write(nb: dict, path) -> None:
    """Write notebook JSON the way Jupyter does (one-space indent, trailing newline)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    nb = dict(nb, cells=[dict(c, source=_source(c).splitlines(keepends=True)) for c in nb.get("cells", [])])
    with open(path, "w", encoding="utf-8") as f:
        json.dump(nb, f, indent=1, ensure_ascii=False, sort_keys=True)
        f.write("\n")


def notebooks(paths) -> list[Path]:
    """The ``.ipynb`` files named by ``paths`` (files, or folders searched one level deep), sorted."""
    found, paths = [], [paths] if isinstance(paths, (str, Path)) else list(paths)
    for p in map(Path, paths):
        if p.is_dir():
            found += sorted(q for q in p.glob("*.ipynb") if not q.name.startswith("."))
        elif p.suffix == ".ipynb" and p.is_file():
            found.append(p)
        else:
            raise MlsysimError(f"{str(p)!r} is neither a notebook (.ipynb) nor a folder")
    if not found:
        raise MlsysimError(f"no notebooks found in {', '.join(map(str, paths))}")
    return found


def assign(paths, out_dir, nbgrader: bool = False) -> list[tuple[Path, int]]:
    """Write a student copy (or, with ``nbgrader``, an nbgrader source copy) of each notebook.

    Returns ``(written path, solution regions)`` per notebook. Refuses to write over an
    input notebook, since that would destroy the solutions.
    """
    out_dir, done = Path(out_dir), []
    sources = notebooks(paths)
    for src in sources:
        dest = out_dir / src.name
        if dest.exists() and dest.resolve() == src.resolve():
            raise MlsysimError(f"output folder {str(out_dir)!r} holds the input notebooks; choose another --out")
        nb = read(src)
        regions = sum(_source(c).count(BEGIN) for c in nb.get("cells", []))
        write(nbgrader_source(nb) if nbgrader else student_copy(nb, src.name)[0], dest)
        done.append((dest, regions))
    return done


_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.DOTALL)
_NOTEBOOK_REF = re.compile(r"\bnotebooks?\s+((?:\d\d)(?:(?:\s*,\s*|\s+and\s+|\s*[–-]\s*)\d\d)*)|\b(\d\d)_[a-z0-9_]+")


def _referenced(text: str) -> set[str]:
    """Two-digit notebook numbers named in ``text``: "notebook 03", "notebooks 02 and 03", "03_kv_cache"."""
    found = set()
    for m in _NOTEBOOK_REF.finditer(text):
        if m.group(2):
            found.add(m.group(2))
        else:
            numbers = re.findall(r"\d\d|[–-]", m.group(1))
            for i, tok in enumerate(numbers):
                if tok in "–-" and 0 < i < len(numbers) - 1:  # a range such as "06–08"
                    found.update(f"{k:02d}" for k in range(int(numbers[i - 1]), int(numbers[i + 1]) + 1))
                elif tok not in "–-":
                    found.add(tok)
    return found


def outline(path) -> dict:
    """What a notebook asks of its reader, counted from the file.

    Returns ``notebook`` (its two-digit number), ``title`` (first heading), ``words`` of prose
    (markdown outside equations), ``code_cells``, ``exercises`` (checked answers), ``figures``
    (stored image outputs), ``explorers`` (stored widget views) and ``builds_on``: the
    earlier notebooks its text refers to.
    """
    nb, path = read(path), Path(path)
    number = path.name[:2]
    md = [_source(c) for c in nb["cells"] if c["cell_type"] == "markdown"]
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    title = next((line.lstrip("# ").strip() for text in md for line in text.split("\n")
                  if line.startswith("# ")), path.stem)
    outputs = [o for c in code for o in c.get("outputs", [])]
    text = "\n".join(md)
    return {
        "notebook": number, "title": title,
        "words": len(_WORD.findall(_MATH.sub(" ", text))),
        "code_cells": len(code),
        "exercises": sum(len(check_ids(c)) for c in code),
        "figures": sum("image/png" in o.get("data", {}) for o in outputs),
        "explorers": sum("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs),
        "builds_on": sorted(n for n in _referenced(text + "\n".join(_source(c) for c in code))
                            if n.isdigit() and n < number),
    }


def score(nb: dict, expected: list[str] | None = None) -> dict[str, bool]:
    """Which exercises an *executed* notebook answers correctly, read from its check outputs.

    Each ``ms.exercises.check`` prints ``✅ <id> correct`` when the answer is right; an
    exercise whose cell raised, was deleted or printed ``❌`` counts as not passed.
    ``expected`` lists the ids to score (by default those the notebook's cells check).
    Re-execute a submission before scoring it (``mlsysim score --execute``): stored
    outputs can be edited by hand.
    """
    passed = {}
    for cell in nb.get("cells", []):
        text = "".join("".join(o.get("text", "")) for o in cell.get("outputs", [])
                       if o.get("output_type") == "stream")
        for i in check_ids(cell):
            passed[i] = passed.get(i, False) or f"✅ {i} correct" in text
    return {i: passed.get(i, False) for i in (expected if expected is not None else passed)}


def notebook_client(nb, cwd, timeout: int = 120, **options):
    """An nbclient ``NotebookClient`` for notebook node ``nb``, run in folder ``cwd``.

    Its kernel client polls for each execute reply in slices of a quarter second: with
    widgets, the asyncio poll of the stock client sometimes sleeps through a reply that
    has arrived and wakes only at the cell's timeout (jupyter/nbclient#312), which made
    one widget cell in a few dozen take the whole timeout.
    """
    from time import monotonic

    from jupyter_client.asynchronous import AsyncKernelClient
    from jupyter_client.channels import AsyncZMQSocketChannel
    from nbclient import NotebookClient
    from queue import Empty
    from traitlets import Type

    class SlicedChannel(AsyncZMQSocketChannel):
        async def get_msg(self, timeout=None):
            deadline = None if timeout is None else monotonic() + timeout
            while True:
                left = 0.25 if deadline is None else min(0.25, max(0.0, deadline - monotonic()))
                if await self.socket.poll(int(left * 1000)):
                    return await self._recv()
                if deadline is not None and monotonic() >= deadline:
                    raise Empty

    class SlicedKernelClient(AsyncKernelClient):
        shell_channel_class = Type(SlicedChannel)

    class Client(NotebookClient):
        def create_kernel_manager(self):
            km = super().create_kernel_manager()
            km.client_factory = SlicedKernelClient
            return km

    return Client(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(cwd)}},
                  **options)


def execute(nb: dict, cwd, timeout: int = 120) -> dict:
    """Run a notebook top to bottom in a fresh kernel, keeping going after errors (needs nbclient)."""
    import nbformat
    node = nbformat.reads(json.dumps(nb), as_version=4)
    notebook_client(node, cwd, timeout, allow_errors=True).execute()
    return json.loads(nbformat.writes(node))
