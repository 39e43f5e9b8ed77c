"""Why a torchrun job failed, read from a real job's stderr: every failed rank with its own error, not only its
peers' echo."""
import subprocess
import sys
import textwrap

import pytest

from mlsysim.lab.distributed.failures import failed_ranks, failure_line
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
    code = next(c for r, c, _ in failed_ranks(err) if r == 1)    # 1, or -6 where its exit is aborted (SIGABRT)
    assert code != 0
    line = failure_line(err)
    assert f"rank 1 exited with {code}" in line and "ValueError: shard 3 is short by 12 bytes" in line, line
    assert "\n" not in line


def test_a_killed_rank_is_named_with_its_signal_whichever_torchrun_observed_first(tmp_path):
    """Rank 0 fails on the lost connection, or torchrun stops it: either way rank 1's SIGKILL is in the line."""
    pytest.importorskip("torch")
    err = _failed_job(tmp_path, "os.kill(os.getpid(), signal.SIGKILL)")
    assert (1, -9, "SIGKILL") in failed_ranks(err)
    assert "rank 1 exited with -9 (SIGKILL)" in failure_line(err)


def test_without_a_summary_the_last_error_line_stands_and_torchrun_s_own_never_counts():
    assert failure_line("") == "" and failed_ranks("RuntimeError: a") == []
    assert failure_line("RuntimeError: a\nKeyError: b\nx.ChildFailedError: \n") == ": KeyError: b"


def test_a_rank_torchrun_stopped_is_left_out_unless_it_printed_an_error():
    summary = ("Failures:\n[1]:\n  rank      : 0 (local_rank: 0)\n  exitcode  : -15 (pid: 41)  (SIGTERM)\n"
               "Root Cause (first observed failure):\n[0]:\n  rank      : 1 (local_rank: 1)\n"
               "  exitcode  : 1 (pid: 42)\n")
    assert failure_line(summary) == ": rank 1 exited with 1"
    assert failure_line("[rank0]: RuntimeError: gone\n" + summary) == \
        ": rank 1 exited with 1; rank 0 exited with -15 (SIGTERM): RuntimeError: gone"
