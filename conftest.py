"""Without the labs' torch extra, the modules that import torch, directly or through a lab module
that does, are left out of the doctest collection (``--doctest-modules`` imports every module of
the package); everything else runs. Whether a module needs torch is found by importing it, so a
module that reads recorded runs without torch (``mlsysim.lab.pytorch.results``) stays in."""
import importlib
from pathlib import Path

ROOT = Path(__file__).parent


def _needs_torch(path: Path) -> bool:
    parts = path.relative_to(ROOT).with_suffix("").parts
    name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as e:
        return e.name == "torch" or (e.name or "").startswith("torch.")
    return False


try:
    import torch  # noqa: F401
    collect_ignore = []
except ImportError:
    collect_ignore = [str(p) for p in sorted(ROOT.joinpath("mlsysim").rglob("*.py")) if _needs_torch(p)]
