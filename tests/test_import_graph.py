"""The package's modules import one another in one direction only: no import cycles.

Every ``import`` and ``from ... import`` in every module of mlsysim counts, at module level and
inside functions alike (a function-level import only postpones a cycle, it does not remove it).
"""
import ast
from pathlib import Path

import mlsysim

PACKAGE = Path(mlsysim.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(name: str) -> bool:
    rel = Path(*name.split("."))
    return (PACKAGE.parent / rel).with_suffix(".py").exists() or (PACKAGE.parent / rel / "__init__.py").exists()


def _imports(path: Path) -> set[str]:
    """mlsysim modules that ``path`` imports anywhere in its code."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names if _exists(f"{target}.{a.name}"))
    return {m for m in found if m.split(".")[0] == "mlsysim" and _exists(m) and m != name}


def import_graph(package_dir: Path = PACKAGE) -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in sorted(package_dir.rglob("*.py"))}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == "open":
                return stack[stack.index(n):] + [n]
            if n not in state:
                cycle = visit(n)
                if cycle:
                    return cycle
        stack.pop()
        state[m] = "done"
        return None

    for m in sorted(graph):
        if m not in state:
            cycle = visit(m)
            if cycle:
                return cycle
    return None


def test_the_cycle_finder_sees_function_level_imports():
    graph = {"mlsysim.a": {"mlsysim.b"}, "mlsysim.b": {"mlsysim.c"}, "mlsysim.c": {"mlsysim.a"}}
    assert find_cycle(graph) == ["mlsysim.a", "mlsysim.b", "mlsysim.c", "mlsysim.a"]
    assert find_cycle({"mlsysim.a": {"mlsysim.b"}, "mlsysim.b": set()}) is None


def test_the_graph_reads_relative_and_function_level_imports():
    graph = import_graph()
    assert "mlsysim.roofline" in graph["mlsysim"]                       # from .roofline import ...
    assert "mlsysim.serving.step" in graph["mlsysim.serving.phases"]    # from .step import ...
    assert "mlsysim.errors" in graph["mlsysim.serving.step"]            # from ..errors import ...
    assert "mlsysim.serving" in graph["mlsysim.widgets.one_device"]     # inside a function


def test_no_import_cycles_among_mlsysim_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def _layer(module: str) -> int:
    """0 the formulas (and the rest of mlsysim), 1 the lab's core, 2 its PyTorch room, 3 the distributed room."""
    for prefix, layer in (("mlsysim.lab.distributed", 3), ("mlsysim.lab.pytorch", 2), ("mlsysim.lab", 1)):
        if module == prefix or module.startswith(prefix + "."):
            return layer
    return 0


def test_the_lab_imports_downward_only():
    """core <- pytorch <- distributed, and no formula module imports the lab (function-level imports
    of the presentation layer excepted: widgets, plots, exercises and the command line show the labs)."""
    presentation = ("mlsysim.widgets", "mlsysim.plots", "mlsysim.exercises", "mlsysim.cli")
    upward = [(m, n) for m, deps in import_graph().items() for n in deps
              if _layer(n) > _layer(m) and not m.startswith(presentation)]
    assert upward == []


def test_the_lab_has_three_rooms_and_no_prefixed_modules():
    lab = PACKAGE / "lab"
    assert (lab / "pytorch" / "__init__.py").exists() and (lab / "distributed" / "__init__.py").exists()
    assert [p.name for p in lab.glob("*.py") if p.name.startswith(("dist_", "torch_"))] == []
