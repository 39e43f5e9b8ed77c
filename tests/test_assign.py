"""Student copies: markers replaced like nbgrader, nothing of a solution left, and they still run.

The notebook tests are parametrised over the files in notebooks/, so a new notebook is covered
as soon as it is there. One kernel per test worker runs every notebook: the student copy up to
its first exercise (which must fail with the stub's NotImplementedError, and nothing before it),
then the instructor's cells from that exercise on (every check must pass).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import mlsysim as ms
from mlsysim.assign import (BEGIN, CODE_STUB, END, TEXT_STUB, assign, check_ids, clear_solutions,
                            has_solution, nbgrader_source, read, student_copy)
from mlsysim.errors import MlsysimError
from mlsysim.lab.distributed.launcher import LIVE_ENV

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
NB_IDS = [p.stem for p in NOTEBOOKS]


def _src(cell) -> str:
    s = cell["source"]
    return "".join(s) if isinstance(s, list) else s


def _regions(text: str) -> list[list[str]]:
    """The lines inside each marked region of ``text``."""
    out, current = [], None
    for line in text.split("\n"):
        if BEGIN in line:
            current = []
        elif END in line:
            out.append(current)
            current = None
        elif current is not None:
            current.append(line)
    return out


# --- the marker rule, on small sources -------------------------------------------------------

def test_stub_is_nbgraders_and_keeps_indentation():
    src = "def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\nprint(f(1))"
    out, n = clear_solutions(src, CODE_STUB)
    assert n == 1
    assert out == "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()\nprint(f(1))"


def test_several_regions_and_any_comment_mark():
    src = "a = 1\n# BEGIN SOLUTION\nb = 2\n# END SOLUTION\nc = 3\n## BEGIN SOLUTION\nd = 4\n## END SOLUTION"
    out, n = clear_solutions(src, CODE_STUB)
    assert n == 2 and "b = 2" not in out and "d = 4" not in out and "c = 3" in out
    assert out.count("raise NotImplementedError()") == 2


def test_markdown_region_becomes_text_stub():
    out, n = clear_solutions("Why?\n<!-- BEGIN SOLUTION -->\nBecause bandwidth.\n<!-- END SOLUTION -->",
                             TEXT_STUB)
    assert (out, n) == ("Why?\nYOUR ANSWER HERE", 1)


@pytest.mark.parametrize("src, message", [
    ("### BEGIN SOLUTION\nx = 1", "without a matching"),
    ("x = 1\n### END SOLUTION", "without a 'BEGIN"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION", "nested"),
])
def test_broken_markers_are_errors(src, message):
    with pytest.raises(MlsysimError, match=message):
        clear_solutions(src, CODE_STUB)


def test_broken_marker_error_names_notebook_and_cell():
    nb = {"cells": [{"cell_type": "code", "source": "x = 1", "metadata": {}, "outputs": []},
                    {"cell_type": "code", "source": "### BEGIN SOLUTION\nx", "metadata": {}, "outputs": []}],
          "metadata": {}}
    with pytest.raises(MlsysimError, match=r"demo.ipynb, cell 1"):
        student_copy(nb, "demo.ipynb")


def test_assign_refuses_to_overwrite_its_input(tmp_path):
    src = tmp_path / "00_x.ipynb"
    src.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    with pytest.raises(MlsysimError, match="holds the input notebooks"):
        assign([tmp_path], tmp_path)


def test_assign_rejects_a_path_that_is_no_notebook(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(MlsysimError, match="neither a notebook"):
        assign([tmp_path / "notes.txt"], tmp_path / "out")
    with pytest.raises(MlsysimError, match="no notebooks found"):
        assign([tmp_path], tmp_path / "out")


# --- every course notebook ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    """Student and nbgrader copies of every notebook, written by the same function the CLI uses."""
    out = tmp_path_factory.mktemp("assign")
    assign(NOTEBOOKS, out / "student")
    assign(NOTEBOOKS, out / "nbgrader", nbgrader=True)
    return out


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 2


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NB_IDS)
def test_exercise_cells_follow_the_template(path):
    """At least three exercises, each a marked solution followed by its check in the same cell."""
    nb = read(path)
    solution_cells = [c for c in nb["cells"] if c["cell_type"] == "code" and has_solution(c)]
    assert len(solution_cells) >= 3, f"{path.name}: {len(solution_cells)} marked exercises, the template asks for 3"
    for cell in solution_cells:
        src = _src(cell)
        after = src[src.rindex(END):]
        assert check_ids(cell) and "ms.exercises.check(" in after, \
            f"{path.name}: the solution cell\n{src}\nhas no ms.exercises.check(...) after its END marker"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NB_IDS)
def test_every_registered_exercise_is_in_its_notebook(path):
    nb = read(path)
    in_notebook = sorted(i for c in nb["cells"] for i in check_ids(c))
    registered = ms.exercises.ids(ms.exercises.notebook_id(path.name))
    assert len(in_notebook) == len(set(in_notebook)), f"{path.name}: an exercise is checked twice"
    assert sorted(in_notebook) == sorted(registered), (f"{path.name} checks {in_notebook}; "
                                       f"mlsysim/exercises registers {registered}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NB_IDS)
def test_student_copy_has_no_solution(path, copies):
    original, student = read(path), read(copies / "student" / path.name)
    assert len(student["cells"]) == len(original["cells"])
    assert "widgets" not in student["metadata"]
    text = "\n".join(_src(c) for c in student["cells"])
    assert BEGIN not in text and END not in text
    for before, after in zip(original["cells"], student["cells"]):
        if after["cell_type"] == "code":
            assert after["outputs"] == [] and after["execution_count"] is None
        assert check_ids(after) == check_ids(before), "a check was lost"
        solution = [line.strip() for region in _regions(_src(before)) for line in region if line.strip()]
        for line in solution:
            assert line not in _src(after), f"{path.name}: solution line {line!r} survived in the student copy"
        if solution:
            stub = CODE_STUB if after["cell_type"] == "code" else TEXT_STUB
            assert stub in _src(after)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NB_IDS)
def test_nbgrader_source_marks_answer_and_test_cells(path, copies):
    nb = read(copies / "nbgrader" / path.name)
    answers = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("solution")]
    tests = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")
             and not c["metadata"]["nbgrader"]["solution"]]
    code_answers = [c for c in answers if c["cell_type"] == "code"]
    assert code_answers and all(has_solution(c) and not check_ids(c) for c in code_answers)
    assert len(tests) == len(code_answers)
    for t in tests:
        meta = t["metadata"]["nbgrader"]
        assert meta["locked"] and meta["points"] > 0 and meta["schema_version"] == 3
        assert re.fullmatch(r'assert ms\.exercises\.check\("[0-9]{2}[A-Z]?\.[0-9]+", answer\)', _src(t).strip())
    ids = [c["metadata"]["nbgrader"]["grade_id"] for c in nb["cells"] if "nbgrader" in c["metadata"]]
    assert len(ids) == len(set(ids)), "nbgrader grade ids must be unique"
    assert all(re.fullmatch(r"[a-zA-Z0-9_\-]+", i) for i in ids), f"ids outside nbgrader's pattern: {ids}"


def test_nbgrader_source_moves_each_check_into_a_locked_test_cell():
    nb = {"metadata": {}, "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source":
          '### BEGIN SOLUTION\nanswer = 1\n### END SOLUTION\nms.exercises.check("00.1", answer)'}]}
    cells = nbgrader_source(nb, points=2)["cells"]
    assert [_src(c) for c in cells] == ["### BEGIN SOLUTION\nanswer = 1\n### END SOLUTION",
                                        'assert ms.exercises.check("00.1", answer)']
    assert cells[0]["metadata"]["nbgrader"]["grade_id"] == "answer-00_1"  # nbgrader allows [A-Za-z0-9_-]
    assert cells[1]["metadata"]["nbgrader"]["points"] == 2


# --- execution: one kernel per worker -------------------------------------------------------------

@pytest.fixture(scope="module")
def kernel():
    """A started nbclient client whose kernel runs in notebooks/ and serves every notebook in turn."""
    nbformat = pytest.importorskip("nbformat")
    from mlsysim.assign import notebook_client
    client = notebook_client(nbformat.v4.new_notebook(), ROOT / "notebooks", timeout=120)
    client.km = client.create_kernel_manager()
    client.start_new_kernel(cwd=str(ROOT / "notebooks"))
    client.start_new_kernel_client()
    yield client
    client._cleanup_kernel()


def _run(client, cells, first_index: int = 0):
    """Execute ``cells`` in the shared kernel; returns the error (or None) and the cell index it came from."""
    from nbclient.exceptions import CellExecutionError
    for i, cell in enumerate(cells, start=first_index):
        if cell.cell_type != "code":
            continue
        try:
            client.execute_cell(cell, i)
        except CellExecutionError as e:
            return e, i
    return None, None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NB_IDS)
def test_student_copy_runs_to_first_exercise_and_solutions_pass(path, kernel, copies):
    import nbformat
    original = nbformat.read(path, as_version=4)
    student = nbformat.read(copies / "student" / path.name, as_version=4)
    first = next(i for i, c in enumerate(student.cells) if c.cell_type == "code" and CODE_STUB in c.source)
    # a lab's live cells may ask for more than the default 120 s per cell, as the book build allows them
    kernel.timeout = max(120, original.metadata.get("mystnb", {}).get("execution_timeout", 120))
    kernel.nb = student
    # the live torchrun jobs of a lab are nbval's and the book build's to run; here the recorded run stands in
    reset = nbformat.v4.new_code_cell(f"%reset -f\nimport os\nos.environ['{LIVE_ENV}'] = '0'")
    kernel.execute_cell(reset, 0)

    error, where = _run(kernel, student.cells[: first + 1])
    assert error is not None, f"{path.name}: the first exercise (cell {first}) ran without error in the student copy"
    assert (where, error.ename) == (first, "NotImplementedError"), \
        f"{path.name}: first error in cell {where} ({error.ename}: {error.evalue}), expected the stub in cell {first}"

    kernel.nb = original
    rest = original.cells[first:]
    error, where = _run(kernel, rest, first)
    assert error is None, f"{path.name}, cell {where}: {error.ename}: {error.evalue}"
    for i, cell in enumerate(rest, start=first):
        ids = check_ids(cell)
        if not ids:
            continue
        printed = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        shown = [o["data"]["text/plain"] for o in cell.outputs if o.output_type == "execute_result"]
        assert "❌" not in printed and all(f"✅ {x} correct" in printed for x in ids), \
            f"{path.name}, cell {i}: the instructor's answer fails its check:\n{printed}"
        assert shown == ["True"], f"{path.name}, cell {i}: check() should end the cell and return True"


# --- planning and scoring -----------------------------------------------------------------------

def test_outline_counts_what_a_reader_meets():
    from mlsysim.assign import outline
    o = outline(NOTEBOOKS[0])
    assert o["notebook"] == NOTEBOOKS[0].name[:2] and o["title"]
    assert o["exercises"] == len(ms.exercises.ids(o["notebook"]))
    assert o["code_cells"] > o["exercises"] and o["words"] > 300 and o["figures"] >= 1
    assert all(n < o["notebook"] for n in o["builds_on"])


def test_notebook_references_are_read_from_prose():
    from mlsysim.assign import _referenced
    text = "See notebook 03, notebooks 06–08 and 10, and 05_quantization; 2048 tokens are no notebook."
    assert sorted(_referenced(text)) == ["03", "05", "06", "07", "08", "10"]


def _stream(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


def test_score_reads_check_outputs():
    from mlsysim.assign import score
    cells = [{"cell_type": "code", "source": 'ms.exercises.check("00.1", a)', "outputs": [_stream("✅ 00.1 correct: 1\n")]},
             {"cell_type": "code", "source": 'ms.exercises.check("00.2", a)', "outputs": [_stream("❌ 00.2 not yet\n")]},
             {"cell_type": "code", "source": '# YOUR CODE HERE\nms.exercises.check("00.3", a)', "outputs": []}]
    assert score({"cells": cells}) == {"00.1": True, "00.2": False, "00.3": False}
    assert score({"cells": cells[:1]}, expected=["00.1", "00.4"]) == {"00.1": True, "00.4": False}


def test_execute_then_score_a_small_submission(tmp_path):
    pytest.importorskip("nbclient")
    from mlsysim.assign import execute, score
    right = 'answer = ms.hardware("a100-80gb").ridge("bf16")\nms.exercises.check("00.2", answer)'
    cells = [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "outputs": [], "execution_count": None,
              "source": s}
             for i, s in enumerate(["import mlsysim as ms", right, 'ms.exercises.check("00.3", 1)',
                                    'raise NotImplementedError()\nms.exercises.check("00.4", answer)'])]
    nb = {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                      "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    assert score(execute(nb, tmp_path)) == {"00.2": True, "00.3": False, "00.4": False}
