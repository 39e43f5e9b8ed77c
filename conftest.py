"""Without the labs' torch extra, the modules that import torch, directly or through a lab module
that does, are left out of the doctest collection (``--doctest-modules`` imports every module of
the package); everything else runs. Whether a module needs torch is found by importing it, so a
module that reads recorded runs without torch (``mlsysim.lab.pytorch.results``) stays in."""
import importlib
from pathlib import Path

import pytest

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


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``, except that the lab notebooks run one after another on one worker: they
    time real writes and fsyncs, and an fsync waits for the journal that every writer fills, so a
    lab beside another lab's disk traffic measures the neighbour."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LabsInSeries(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            return "lab notebooks" if file.endswith(".ipynb") and "_lab_" in Path(file).stem else file

    return LabsInSeries(config, log)
