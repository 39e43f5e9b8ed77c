"""The package stays readable: no function or method longer than a screen, no module past 800 lines.

A function is counted from its ``def`` line to its last line, docstring included (80 lines at most);
a module by its lines (800 at most). Split a long function into its phases as named functions, and
a long module by the concepts it holds.
"""
import ast
from pathlib import Path

import mlsysim

PACKAGE = Path(mlsysim.__file__).parent
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 800


def long_functions(path: Path, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """(name, lines) of every function or method of ``path`` over ``limit`` lines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit]


def test_the_counter_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "m.py").write_text(f"def f():\n{body}\n\n\ndef g():\n    return 1\n")
    assert long_functions(tmp_path / "m.py") == [("f", MAX_FUNCTION_LINES + 1)]


def test_no_function_over_80_lines():
    found = {f"{p.relative_to(PACKAGE.parent)}:{name}": n for p in sorted(PACKAGE.rglob("*.py"))
             for name, n in long_functions(p)}
    assert found == {}


def test_no_module_over_800_lines():
    found = {str(p.relative_to(PACKAGE.parent)): n for p in sorted(PACKAGE.rglob("*.py"))
             if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert found == {}
