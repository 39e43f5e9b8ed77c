"""The distributed lab's compared outputs do not depend on the floating-point reduction order.

Whether the losses after a 4 -> 2 reshard equal the reference's to the last bit depends on the CPU's
vector units and the build (identical on some machines, a few last bits apart on others). The
notebook's cells that nbval compares must print the same text, and their asserts must hold, either
way. Running the real reshard twice on one machine gives one of the two cases only, so this test
runs the notebook's own reshard cells on the record the run returns, once with the losses equal and
once with them apart by the difference a machine of the other kind gave (4.77e-7), and requires the
stored output both times. The real run is tested in tests/test_lab_dist_run.py.
"""
import contextlib
import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "06c_lab_distributed.ipynb"
READS = ("reshard_loss_max_abs", "reshard_equal", "diff")   # what a cell reads of the reshard's result


def _compared_reshard_cells() -> list[tuple[str, str]]:
    """(source, stored stdout) of every compared code cell that reads the reshard's losses."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    out = []
    for c in cells:
        src = "".join(c["source"])
        tags = c.get("metadata", {}).get("tags", [])
        if c["cell_type"] != "code" or "nbval-ignore-output" in tags or "reshard" not in src:
            continue
        if any(name in src for name in READS):
            stored = "".join("".join(o.get("text", "")) for o in c["outputs"] if o["output_type"] == "stream")
            out.append((src, stored))
    return out


def _run(cells, loss_diff: float) -> list[str]:
    record = SimpleNamespace(reshard_equal=True, reshard_loss_max_abs=loss_diff, wall_s=30.0,
                             bytes_read_per_rank=(190336, 189568))
    launcher = SimpleNamespace(run_distributed=lambda **kw: record)
    ns = {"live": True, "launcher": launcher, "work": SimpleNamespace(name="/nonexistent"),
          "SKIPPED": "skipped"}
    printed = []
    for src, _ in cells:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(src, "<reshard cell>", "exec"), ns)
        printed.append(buf.getvalue())
    return printed


def test_the_reshard_cells_are_found():
    cells = _compared_reshard_cells()
    assert len(cells) >= 2 and any("assert" in src for src, _ in cells)


@pytest.mark.parametrize("loss_diff", [0.0, 4.77e-7], ids=["identical", "last-bits-apart"])
def test_compared_output_is_the_same_for_either_reduction_order(loss_diff):
    cells = _compared_reshard_cells()
    assert _run(cells, loss_diff) == [stored for _, stored in cells]


def test_a_real_divergence_still_fails_the_claim():
    with pytest.raises(AssertionError, match="claim reshard-diff"):
        _run(_compared_reshard_cells(), 1e-3)
