"""One line that says why a ``torchrun`` job failed, read from its agents' stderr (no PyTorch).

When one rank fails, the others fail after it: their next collective finds the peer gone ("Connection closed by
peer") and torchrun stops them. The last error printed is then a consequence, not the cause. torchrun's summary
names the rank that failed first (its *Root Cause* block: rank and exit code, with the signal where a signal
ended it), and PyTorch prefixes each line a rank prints to stderr with ``[rankK]:``; :func:`failure_line` puts
that rank's own last error line first.
"""
from __future__ import annotations

import re

_ROOT = re.compile(r"Root Cause \(first observed failure\):.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)"
                   r"[^\n]*?(?:\((SIG\w+)\))?\s*$", re.S | re.M)


def _is_error(line: str) -> bool:
    return ("Error" in line or "error:" in line) and "ChildFailedError" not in line


def root_cause(stderr: str) -> tuple[int, int, str] | None:
    """(rank, exit code, signal name or "") of the first failure torchrun's summary names; None where none.

    >>> root_cause("Root Cause (first observed failure):\\n[0]:\\n  rank      : 1 (local_rank: 1)\\n"
    ...            "  exitcode  : -9 (pid: 42)  (SIGKILL)\\n  error_file: <N/A>\\n")
    (1, -9, 'SIGKILL')
    """
    m = _ROOT.search(stderr)
    return None if m is None else (int(m.group(1)), int(m.group(2)), m.group(3) or "")


def failure_line(stderr: str) -> str:
    """": " and why the job failed, in one line ("" where the stderr names nothing): the rank that failed first
    (torchrun's root cause) with its exit code and its own last error line, then the last error line any process
    printed where it is another; without a root cause, that last error line alone (torchrun's closing
    ChildFailedError never counts).

    >>> err = ("[rank1]: ValueError: bad shard\\n[rank0]: RuntimeError: Connection closed by peer\\n"
    ...        "Root Cause (first observed failure):\\n[0]:\\n  rank      : 1 (local_rank: 1)\\n"
    ...        "  exitcode  : 1 (pid: 42)\\n")
    >>> failure_line(err)
    ': rank 1 failed first (exit code 1): ValueError: bad shard; last error: [rank0]: RuntimeError: Connection closed by peer'
    >>> failure_line("RuntimeError: no rendezvous\\n")
    ': RuntimeError: no rendezvous'
    """
    lines = [ln.strip() for ln in stderr.splitlines()]
    errors = [ln for ln in lines if _is_error(ln)]
    last = errors[-1] if errors else ""
    root = root_cause(stderr)
    if root is None:
        return f": {last}" if last else ""
    rank, code, sig = root
    prefix = f"[rank{rank}]:"
    own = [ln[len(prefix):].strip() for ln in errors if ln.startswith(prefix)]
    head = f": rank {rank} failed first (exit code {code}{', ' + sig if sig else ''})"
    if own:
        head += f": {own[-1]}"
    elif not sig:
        head += ", no error line of its own"
    return head + (f"; last error: {last}" if last and not (own and last == prefix + " " + own[-1]) else "")
