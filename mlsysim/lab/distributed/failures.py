"""One line that says why a ``torchrun`` job failed, read from its agents' stderr (no PyTorch).

When one rank fails, the others fail after it: their next collective finds the peer gone ("Connection closed by
peer") and torchrun stops the rest (SIGTERM). The last error printed is then often a consequence, not the cause.
torchrun's closing summary lists every rank that failed, with its exit code and the signal where a signal ended
it, its *first observed failure* (the root cause) apart; PyTorch prefixes each line a rank prints to stderr with
``[rankK]:``. Two ranks that end within one of torchrun's polls are observed at the same second, and the summary
then names the lower rank as the root cause, so :func:`failure_line` gives every failed rank, each with its own
last error line, not the root cause alone.
"""
from __future__ import annotations

import re

_FAILED = re.compile(r"^\s*rank\s*:\s*(\d+)[^\n]*\n\s*exitcode\s*:\s*(-?\d+)[^\n]*?(?:\((SIG\w+)\))?[ \t]*$", re.M)
_ROOT = "Root Cause (first observed failure):"
_RANK_LINE = re.compile(r"^\[rank(\d+)\]:\s*(.*)$")


def _is_error(line: str) -> bool:
    return ("Error" in line or "error:" in line) and "ChildFailedError" not in line


def failed_ranks(stderr: str) -> list[tuple[int, int, str]]:
    """(rank, exit code, signal name or "") of each rank torchrun's summaries list as failed, the root cause of
    each summary first, every rank once.

    >>> failed_ranks("Failures:\\n[1]:\\n  rank      : 0 (local_rank: 0)\\n  exitcode  : -15 (pid: 41)  (SIGTERM)\\n"
    ...              "Root Cause (first observed failure):\\n[0]:\\n  rank      : 1 (local_rank: 1)\\n"
    ...              "  exitcode  : -9 (pid: 42)  (SIGKILL)\\n  error_file: <N/A>\\n")
    [(1, -9, 'SIGKILL'), (0, -15, 'SIGTERM')]
    """
    out: list = []
    for summary in stderr.split("Failures:")[1:]:
        others, _, root = summary.partition(_ROOT)          # no root cause: all of it the others
        for m in [*_FAILED.finditer(root), *_FAILED.finditer(others)]:
            rank = int(m.group(1))
            if all(rank != r for r, _, _ in out):
                out.append((rank, int(m.group(2)), m.group(3) or ""))
    return out


def failure_line(stderr: str) -> str:
    """": " and why the job failed, in one line ("" where the stderr names nothing): each rank torchrun lists as
    failed (:func:`failed_ranks`: its root cause first), with its exit code, its signal and its own last error
    line, then any rank that printed an error and is not listed; a rank that torchrun stopped (SIGTERM) and that
    printed nothing is left out. Without a summary, the last error line printed (torchrun's closing
    ChildFailedError never counts).

    >>> err = ("[rank1]: ValueError: bad shard\\n[rank0]: RuntimeError: Connection closed by peer\\nFailures:\\n"
    ...        "  <NO_OTHER_FAILURES>\\nRoot Cause (first observed failure):\\n[0]:\\n"
    ...        "  rank      : 0 (local_rank: 0)\\n  exitcode  : 1 (pid: 41)\\n")
    >>> failure_line(err)
    ': rank 0 exited with 1: RuntimeError: Connection closed by peer; rank 1: ValueError: bad shard'
    >>> failure_line("RuntimeError: no rendezvous\\n")
    ': RuntimeError: no rendezvous'
    """
    errors = [ln.strip() for ln in stderr.splitlines() if _is_error(ln)]
    own: dict = {}
    for ln in errors:
        m = _RANK_LINE.match(ln)
        if m:
            own[int(m.group(1))] = m.group(2)
    parts = []
    for rank, code, sig in failed_ranks(stderr):
        if sig == "SIGTERM" and rank not in own:
            continue
        parts.append(f"rank {rank} exited with {code}" + (f" ({sig})" if sig else "")
                     + (f": {own.pop(rank)}" if rank in own else ""))
    parts += [f"rank {rank}: {line}" for rank, line in own.items()]
    if not parts:
        return f": {errors[-1]}" if errors else ""
    return ": " + "; ".join(parts)
