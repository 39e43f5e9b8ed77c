"""Without the labs' torch extra, the modules that import torch, directly or through a lab module
that does, are left out of the doctest collection (``--doctest-modules`` imports every module of
the package); everything else runs. ``torch_results`` reads recorded runs without torch."""
import re
from pathlib import Path

try:
    import torch  # noqa: F401
    collect_ignore = []
except ImportError:
    _NEEDS_TORCH = re.compile(r"^(import torch|from torch\b|from \.torch_(?!results\b)\w+ import|"
                              r"from \. import .*\btorch_(?!results\b))", re.M)
    collect_ignore = [str(p) for p in sorted(Path(__file__).parent.joinpath("mlsysim").rglob("*.py"))
                      if _NEEDS_TORCH.search(p.read_text(encoding="utf-8"))]
