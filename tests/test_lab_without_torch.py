"""The lab notebooks that use PyTorch run without an error where it is missing, as the book build needs.

PyTorch is the labs' optional extra, and `make test` installs it, so this test hides it instead: the
kernel starts with a ``sitecustomize`` on its path whose import hook refuses ``torch`` and every
``torch.*`` module (``import torch`` and ``importlib.util.find_spec("torch")`` both raise
``ModuleNotFoundError``, as they do in an environment without the package). Every cell must run;
the notebooks then print that the live runs are skipped and show their recorded runs.
"""
import json
import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
from jupyter_client.manager import KernelManager  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ["06b_lab_pytorch.ipynb", "06c_lab_distributed.ipynb"]
BLOCKER = '''
import sys

class _NoTorch:
    """Refuse torch as an environment without it would."""
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoTorch())
'''


@pytest.fixture()
def no_torch_path(tmp_path, monkeypatch):
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    return tmp_path


def _printed(nb) -> str:
    return "".join("".join(o.get("text", "")) for c in nb.cells if c.cell_type == "code" for o in c.outputs)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_lab_notebook_runs_without_torch(name, no_torch_path, tmp_path):
    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    # the kernel's channels over Unix sockets in tmp_path, not TCP ports that a torchrun job's rendezvous
    # in a parallel test could take between the kernel choosing them and binding them
    km = KernelManager(kernel_name="python3", transport="ipc", ip=str(tmp_path / "kernel"))
    NotebookClient(nb, km=km, timeout=300, resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = _printed(nb)
    assert "PyTorch is not installed" in printed            # it knew, and said so
    assert not any(o.get("output_type") == "error" for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def test_the_blocker_hides_torch(no_torch_path):
    import subprocess
    import sys
    probe = ("import importlib.util, json\n"
             "try:\n    importlib.util.find_spec('torch'); found = 'found'\n"
             "except ModuleNotFoundError:\n    found = 'refused'\n"
             "import mlsysim.lab.distributed.launcher as l\n"
             "print(json.dumps([found, l.has_torch()]))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout) == ["refused", False]
