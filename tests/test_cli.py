"""The mlsysim command: instant help, one subcommand per task, clear errors, JSON output."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from mlsysim import cli
from mlsysim.assign import read

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("matplotlib", "ipywidgets", "nbformat", "nbclient", "IPython")


def test_help_is_fast_and_imports_nothing_heavy():
    code = ("import sys, time; t = time.perf_counter(); from mlsysim import cli\n"
            "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
            f"print('LOADED', [m for m in {HEAVY!r} if m in sys.modules], time.perf_counter() - t)")
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - t0
    assert "usage: mlsysim" in out and "assign" in out
    loaded = out.split("LOADED ")[1]
    assert loaded.startswith("[]"), f"--help imported {loaded}"
    assert wall < 1.0, f"mlsysim --help took {wall:.2f} s including the interpreter start"


def test_no_command_prints_help_and_fails(capsys):
    assert cli.main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


def test_version(capsys):
    import mlsysim
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == mlsysim.__version__


def test_assign_writes_student_copies(tmp_path, capsys):
    out = tmp_path / "student"
    assert cli.main(["assign", str(ROOT / "notebooks"), "--out", str(out)]) == 0
    lines = capsys.readouterr().out.strip().split("\n")
    written = sorted(out.glob("*.ipynb"))
    assert len(lines) == len(written) == len(list((ROOT / "notebooks").glob("*.ipynb")))
    assert all("replaced by stubs" in line for line in lines)
    assert all("BEGIN SOLUTION" not in json.dumps(read(p)) for p in written)


def test_assign_nbgrader_mode(tmp_path, capsys):
    nb = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))[0]
    assert cli.main(["assign", str(nb), "--out", str(tmp_path), "--nbgrader"]) == 0
    assert "marked for nbgrader" in capsys.readouterr().out
    cells = read(tmp_path / nb.name)["cells"]
    assert any(c["metadata"].get("nbgrader", {}).get("grade") for c in cells)


def test_package_errors_are_one_line_with_status_2(tmp_path, capsys):
    assert cli.main(["assign", str(tmp_path / "missing.ipynb"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mlsysim assign: error:") and "missing.ipynb" in err and err.count("\n") == 1


def test_console_script_is_declared():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'mlsysim = "mlsysim.cli:main"' in text


def test_emit_prints_text_or_json(capsys):
    @dataclasses.dataclass(frozen=True)
    class R:
        time_s: float
        sweep: np.ndarray
        bound: str

        def __str__(self):
            return f"time {self.time_s} s"

    r = R(0.5, np.array([1.0, 2.0]), "memory")
    cli.emit(r, cli.argparse.Namespace(json=False))
    assert capsys.readouterr().out == "time 0.5 s\n"
    cli.emit(r, cli.argparse.Namespace(json=True))
    assert json.loads(capsys.readouterr().out) == {"time_s": 0.5, "sweep": [1.0, 2.0], "bound": "memory"}


def test_score_counts_correct_exercises(tmp_path, capsys):
    nb = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))[0]
    assert cli.main(["score", str(nb)]) == 0
    out = capsys.readouterr().out
    import mlsysim
    n = len(mlsysim.exercises.ids(nb.name[:2]))
    assert f"{n} / {n} correct" in out
    assert cli.main(["assign", str(nb), "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert cli.main(["score", "--json", str(tmp_path / nb.name)]) == 0
    marks = json.loads(capsys.readouterr().out)[str(tmp_path / nb.name)]
    assert len(marks) == n and not any(marks.values())  # a fresh student copy has no outputs
