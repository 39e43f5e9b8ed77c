"""Why a torchrun job failed, read from a real job's stderr: the rank that failed first, not its peers' echo."""
import subprocess
import sys
import textwrap

import pytest

from mlsysim.lab.distributed.failures import failure_line, root_cause
from mlsysim.lab.distributed.launcher import free_port

SCRIPT = """
import os, signal, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(16)
dist.all_reduce(t)
if dist.get_rank() == 1:
    {failure}
dist.all_reduce(t)          # rank 0 waits here for a peer that is gone
"""


def _failed_job(tmp_path, failure: str) -> str:
    """Two ranks under torchrun on 127.0.0.1; rank 1 fails by ``failure`` after a first all-reduce: the stderr."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(SCRIPT).format(failure=failure))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
           "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", str(script)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode != 0
    return r.stderr


def test_the_failure_names_the_rank_that_raised_and_its_own_error(tmp_path):
    pytest.importorskip("torch")
    err = _failed_job(tmp_path, 'raise ValueError("shard 3 is short by 12 bytes")')
    assert root_cause(err)[:2] == (1, 1)
    line = failure_line(err)
    assert line.startswith(": rank 1 failed first (exit code 1): ValueError: shard 3 is short by 12 bytes"), line
    assert "\n" not in line


def test_a_killed_rank_is_named_with_its_signal_before_its_peer_s_connection_error(tmp_path):
    pytest.importorskip("torch")
    err = _failed_job(tmp_path, "os.kill(os.getpid(), signal.SIGKILL)")
    assert root_cause(err) == (1, -9, "SIGKILL")
    line = failure_line(err)
    assert line.startswith(": rank 1 failed first (exit code -9, SIGKILL)"), line
    assert "[rank0]" in line                       # what its peer saw comes after, as the last error


def test_without_a_summary_the_last_error_line_stands_and_torchrun_s_own_never_counts():
    assert failure_line("") == ""
    assert failure_line("RuntimeError: a\nKeyError: b\nx.ChildFailedError: \n") == ": KeyError: b"
    assert root_cause("RuntimeError: a") is None
