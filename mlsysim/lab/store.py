"""The checkpoint files: layout, checksums, atomic commit, pruning and :func:`load_latest`.

A checkpoint of step *s* is two files in one directory:

* ``ckpt-<s>.data`` — an 8-byte magic, the header length, a JSON header (the state's
  structure, every scalar exactly, and each array's dtype, shape and offset), then the
  arrays' bytes, each aligned to 64 bytes;
* ``ckpt-<s>.commit`` — a small JSON record: step, data file name, size and CRC-32 of
  the whole data file.

Each is written to ``<name>.tmp``, flushed with ``fsync``, renamed over its final name
and made durable with an ``fsync`` of the directory (the rename is atomic on POSIX
file systems). While a file is written, at most 64 MiB of it stays in the page cache
(:func:`write_chunks`). The data file is renamed first and the commit record last: a
checkpoint exists only once its commit record is durable, so a crash at any moment
leaves either a committed, complete checkpoint or one that :func:`load_latest`
ignores. Older checkpoints are deleted (commit record first) only after a newer
commit, and the newest ``keep`` committed ones are never deleted.

A state is a mapping of NumPy arrays (or PyTorch tensors, when ``torch`` is
installed) and scalars, nested in dicts and lists, as ``model.state_dict()`` and
``optimizer.state_dict()`` are. Floats are stored exactly (``float.hex``).
"""
from __future__ import annotations

import errno
import json
import math
import os
import queue
import re
import struct
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import check_integer, check_positive
from .checksum import crc32

MAGIC = b"MLSYSCK1"
FORMAT = "mlsysim-lab-checkpoint/1"
ALIGN = 64
CHUNK_B = 16 * 2 ** 20
SMALL_B = 2 ** 20             # pieces smaller than this are gathered into one write (chunks_of)
PAGE_B = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096   # the page cache's unit
NAME = re.compile(r"^ckpt-(\d{9})\.(data|commit)$")


class CheckpointError(OSError):
    """A checkpoint could not be written or none could be loaded; the message says why and
    which files are affected. ``errno`` is the operating system's (ENOSPC for a full disk)."""


class CheckpointWarning(UserWarning):
    """A checkpoint file was skipped (torn, corrupt or uncommitted); the message names it."""


def data_name(step: int) -> str:
    return f"ckpt-{step:09d}.data"


def commit_name(step: int) -> str:
    return f"ckpt-{step:09d}.commit"


# --- encoding a state ----------------------------------------------------------------------
def _torch_tensor(x) -> bool:
    t = sys.modules.get("torch")  # never import torch here: a tensor exists only if torch is loaded
    return t is not None and isinstance(x, t.Tensor)


def _encode(obj, arrays: list):
    if isinstance(obj, np.ndarray) or _torch_tensor(obj):
        arrays.append(obj)
        return {"__array__": len(arrays) - 1}
    if isinstance(obj, dict):
        return {"__map__": [[_encode(k, arrays), _encode(v, arrays)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return {"__list__": [_encode(v, arrays) for v in obj], "tuple": isinstance(obj, tuple)}
    if isinstance(obj, np.generic):
        return {"__np__": obj.dtype.str, "hex": obj.tobytes().hex()}
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return {"__float__": obj.hex()}
    if _torch_dtype(obj):
        return {"__torch_dtype__": str(obj).removeprefix("torch.")}
    raise TypeError(f"cannot checkpoint a value of type {type(obj).__name__}: use arrays, tensors, "
                    f"numbers, strings, None, and dicts or lists of them")


def _torch_dtype(obj) -> bool:
    t = sys.modules.get("torch")
    return t is not None and isinstance(obj, t.dtype)


def _decode(obj, arrays: list):
    if isinstance(obj, dict):
        if "__array__" in obj:
            return arrays[obj["__array__"]]
        if "__map__" in obj:
            return {_decode(k, arrays): _decode(v, arrays) for k, v in obj["__map__"]}
        if "__list__" in obj:
            items = [_decode(v, arrays) for v in obj["__list__"]]
            return tuple(items) if obj["tuple"] else items
        if "__float__" in obj:
            return float.fromhex(obj["__float__"])
        if "__np__" in obj:
            return np.frombuffer(bytes.fromhex(obj["hex"]), dtype=np.dtype(obj["__np__"]))[0]
        if "__torch_dtype__" in obj:
            import torch
            return getattr(torch, obj["__torch_dtype__"])
    return obj


def _as_numpy(a) -> tuple[np.ndarray, dict]:
    """A C-contiguous NumPy view (no copy when possible) and how to rebuild the original."""
    if isinstance(a, np.ndarray):
        return (a if a.flags.c_contiguous else np.ascontiguousarray(a)), {"kind": "numpy"}  # keeps a 0-d array 0-d
    import torch
    t = a.detach().cpu()
    dtype = str(t.dtype).removeprefix("torch.")
    if t.is_quantized:
        raise TypeError(f"cannot checkpoint a quantized tensor (torch.{dtype}): its scale and zero point "
                        f"would be lost; store tensor.int_repr() and the quantizer's parameters, or dequantize()")
    t = t.resolve_conj().resolve_neg().contiguous()
    try:
        return t.numpy(), {"kind": "torch", "torch_dtype": dtype}
    except TypeError:  # a dtype NumPy lacks (bfloat16, float8, complex32, ...): keep its bits
        bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
        return t.view(bits).numpy(), {"kind": "torch", "torch_dtype": dtype}


def _from_numpy(a: np.ndarray, how: dict):
    if how["kind"] == "numpy":
        return a
    import torch
    t, dtype = torch.from_numpy(a), getattr(torch, how["torch_dtype"])
    return t if t.dtype == dtype else t.view(dtype)


@dataclass(frozen=True)
class Layout:
    """Where everything goes in a data file: the header bytes, and each array's offset."""

    header: bytes
    arrays: tuple          # C-contiguous NumPy arrays (views of the state's arrays)
    offsets: tuple
    size_B: int


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def layout(state, step: int) -> Layout:
    """Plan the data file of ``state`` at ``step`` (no copy of the arrays)."""
    items: list = []
    skeleton = _encode(state, items)
    arrays, specs = [], []
    for a in items:
        npa, how = _as_numpy(a)
        arrays.append(npa)
        specs.append({"dtype": npa.dtype.str, "shape": list(npa.shape), "nbytes": int(npa.nbytes), **how})
    # offsets depend on the header length, which depends on the offsets: fix the header size first
    body = {"format": FORMAT, "step": int(step), "state": skeleton, "arrays": specs}
    probe = json.dumps({**body, "arrays": [{**s, "offset": 2 ** 62} for s in specs]}).encode()
    start = _align(len(MAGIC) + 8 + len(probe) + 64)
    offset = start
    for s in specs:
        s["offset"] = offset
        offset = _align(offset + s["nbytes"])
    text = json.dumps({**body, "arrays": specs}).encode()
    header = MAGIC + struct.pack("<Q", len(text)) + text
    header += b"\0" * (start - len(header))
    size = max(start, specs[-1]["offset"] + specs[-1]["nbytes"]) if specs else start
    return Layout(header=header, arrays=tuple(arrays), offsets=tuple(s["offset"] for s in specs), size_B=size)


def _bytes(a: np.ndarray) -> memoryview:
    return memoryview(a.reshape(-1).view(np.uint8)) if a.size else memoryview(b"")


def _pieces(lay: Layout):
    """The data file's bytes in order: the header, then each array with the padding before it."""
    yield memoryview(lay.header)
    pos = len(lay.header)
    for a, off in zip(lay.arrays, lay.offsets):
        if off > pos:
            yield memoryview(bytes(off - pos))
        mv = _bytes(a)
        yield mv
        pos = off + len(mv)


def chunks_of(lay: Layout, chunk_B: int = CHUNK_B, small_B: int = SMALL_B):
    """The data file's bytes in chunks of at most ``chunk_B``: pieces of ``small_B`` or more read
    straight from the state, smaller ones (header, padding, norms, counters) gathered into one
    chunk first, so that a state of many small tensors costs a few large writes rather than one
    small write each, and a large tensor is never copied on its way to the file."""
    small = bytearray()
    for mv in _pieces(lay):
        if len(mv) < small_B:
            if len(small) + len(mv) > chunk_B:
                yield small
                small = bytearray()
            small += mv
            continue
        if small:
            yield small
            small = bytearray()
        for i in range(0, len(mv), chunk_B):
            yield mv[i:i + chunk_B]
    if small:
        yield small


def fill(buffer: np.ndarray, lay: Layout, midway=None) -> None:
    """Copy the data file's bytes into ``buffer`` (uint8, at least ``lay.size_B`` long).
    ``midway()`` is called once half of the arrays have been copied."""
    buffer[:len(lay.header)] = np.frombuffer(lay.header, dtype=np.uint8)
    half = len(lay.arrays) // 2
    for i, (a, off) in enumerate(zip(lay.arrays, lay.offsets)):
        if i == half and midway is not None:
            midway()
        if a.size:
            np.copyto(buffer[off:off + a.nbytes], a.reshape(-1).view(np.uint8))


# --- durable files ---------------------------------------------------------------------------
def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _dont_need(fd: int, offset: int, length: int) -> None:
    """``POSIX_FADV_DONTNEED`` on these bytes. Linux starts writing the range's dirty pages to the
    device at once, instead of at the final ``fsync`` (the device writes while the next chunks are
    checksummed and copied; the kernel's own writeback would start only past
    ``dirty_background_ratio`` of memory, which a checkpoint of a few GB on a large host never
    reaches), and drops its clean pages from the page cache. A no-op where the call does not exist."""
    if hasattr(os, "posix_fadvise") and length:
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)


WINDOW_B = 4 * CHUNK_B       # what stays cached after each retire (up to 96 MiB between two retires)
_WAIT_WRITE_WAIT = 1 | 2 | 4  # SYNC_FILE_RANGE_WAIT_BEFORE | _WRITE | _WAIT_AFTER (linux/fs.h)
_sync_file_range = None


def _retire(fd: int, offset: int, length: int) -> None:
    """Wait until these bytes are on the device (Linux ``sync_file_range``), then drop them from
    the page cache. A file written this way holds at most :data:`WINDOW_B` + 2 ``CHUNK_B`` (96 MiB)
    of the cache, :data:`WINDOW_B` after each retire: each new chunk lands in pages that a chunk
    64 MiB behind has just given back, instead of in memory the cache has not used lately. That
    matters wherever fresh memory is dear (on a virtual machine that hands free pages back to its
    host, measured here: a 1 GB write + ``fsync`` took 0.27 to 0.51 s this way and 0.26 to 2.3 s
    with the whole file cached). Where ``sync_file_range`` is missing, the drop alone (pages still
    being written stay cached)."""
    global _sync_file_range
    if _sync_file_range is None:
        _sync_file_range = _libc_sync_file_range()
    if _sync_file_range is not False:
        _sync_file_range(fd, offset, length, _WAIT_WRITE_WAIT)   # an error leaves the pages cached
    _dont_need(fd, offset, length)


def _libc_sync_file_range():
    """``sync_file_range`` from the C library (Linux), or False."""
    try:
        import ctypes
        f = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError, ImportError):
        return False
    f.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    f.restype = ctypes.c_int
    return f


def write_chunks(fd: int, chunks, crc: int = 0, after_first=None, checksum: bool = True) -> tuple[int, int]:
    """Write ``chunks`` to ``fd`` from its current offset in pieces of at most ``CHUNK_B`` (16 MiB);
    start each piece's writeback at once (``_dont_need``) and retire (``_retire``) what lies more
    than ``WINDOW_B`` (64 MiB) behind. Returns (bytes, CRC-32 continued from ``crc``; ``crc`` itself
    with ``checksum=False``, as the write floor times the write alone);
    ``after_first()`` is called once the first chunk is written. The CRC-32 runs in a second thread
    while this one writes: both release the GIL, so it hides behind the writes.

    Only whole pages are handed to the kernel: a piece that ends inside a page leaves that page
    cached, so that the next piece completes it in memory. Dropped, the page would have to be read
    back from the device before the next write could finish it (a tensor's bytes end on a 64-byte
    boundary, not a page's: measured here, writing a 1 GB state in its tensors' pieces took
    0.46 s that way against 0.31 s in 16 MiB pieces)."""
    size, started, behind = 0, 0, 0     # started: writeback started below; behind: retired below
    check = _Checksum(crc) if checksum else None
    try:
        for i, chunk in enumerate(chunks):
            whole = memoryview(chunk).cast("B")
            for j in range(0, len(whole), CHUNK_B):
                piece = whole[j:j + CHUNK_B]
                if check is not None:
                    check.add(piece)
                mv = piece
                while len(mv):
                    mv = mv[os.write(fd, mv):]
                size += len(piece)
                full = size - size % PAGE_B
                if full > started:
                    _dont_need(fd, started, full - started)
                    started = full
                if started - behind > WINDOW_B + CHUNK_B:
                    end = started - WINDOW_B
                    _retire(fd, behind, end - behind)
                    behind = end
            if i == 0 and after_first is not None:
                after_first()
    finally:
        crc = crc if check is None else check.result()
    return size, crc


class _Checksum:
    """A CRC-32 continued over the pieces given to :meth:`add`, in order: inline while they are small,
    in a thread of its own from the first piece of :data:`SMALL_B` or more (the caller must not change
    a piece until :meth:`result` returns)."""

    def __init__(self, crc: int = 0):
        self.crc, self.queue, self.thread = crc, None, None

    def add(self, piece) -> None:
        if self.thread is None and len(piece) < SMALL_B:
            self.crc = crc32(piece, self.crc)
            return
        if self.thread is None:
            self.queue = queue.Queue()
            self.thread = threading.Thread(target=self._run, name="checkpoint-crc", daemon=True)
            self.thread.start()
        self.queue.put(piece)

    def _run(self) -> None:
        while (piece := self.queue.get()) is not None:
            self.crc = crc32(piece, self.crc)

    def result(self) -> int:
        if self.thread is not None:
            self.queue.put(None)
            self.thread.join()
            self.thread = None
        return self.crc


def pipelined_s(cpu_s: float, write_s: float, size_B: float, chunk_B: int = CHUNK_B) -> float:
    """Seconds :func:`write_chunks` takes to make ``size_B`` bytes durable when its pieces' CPU work (the copy
    into the page cache and the CRC-32 beside it) takes ``cpu_s`` in all and their writeback to the device
    ``write_s``: a two-stage pipeline over m = ceil(size_B / chunk_B) pieces. Each piece's writeback starts
    once it is copied, so the stages overlap, except that the device waits for the first piece's copy and the
    last piece's writeback follows every copy:

        T = max(cpu_s, write_s) + min(cpu_s, write_s) / m

    (a flow shop of m equal pieces: a + b + (m − 1) max(a, b) with a = cpu_s / m, b = write_s / m). Assumes
    pieces of equal cost and writeback that keeps up piece by piece (the window of :func:`write_chunks` never
    holds the copies back while the device is idle). A state of ``chunk_B`` or less is one piece: the two
    stages run in turn. Where several writers run at once, ``cpu_s`` and ``write_s`` are the times they take together
    and m one writer's pieces.

    >>> round(pipelined_s(0.12, 0.16, 64e6), 3)       # 4 pieces: a quarter of the shorter stage is added
    0.19
    >>> round(pipelined_s(0.035, 0.035, 15e6), 3)     # one piece: the stages in turn
    0.07
    """
    check_positive("cpu_s", cpu_s, allow_zero=True)
    check_positive("write_s", write_s, allow_zero=True)
    check_positive("size_B", size_B)
    check_integer("chunk_B", chunk_B)
    pieces = math.ceil(size_B / chunk_B)
    return max(cpu_s, write_s) + min(cpu_s, write_s) / pieces


def write_durable(path: Path, chunks, after_first=None) -> tuple[int, int]:
    """Write ``chunks`` to ``path.tmp`` (:func:`write_chunks`: a few chunks of it
    cached while it is written, none once it is durable: the next file's pages are the ones this one
    freed), fsync, rename to ``path``, fsync the directory. Returns (bytes, CRC-32). On an
    error the temporary file is removed and :class:`CheckpointError` names the file and the cause."""
    tmp = path.with_name(path.name + ".tmp")
    fd = None
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        size, crc = write_chunks(fd, chunks, after_first=after_first)
        os.fsync(fd)
        _dont_need(fd, 0, size)        # clean now: the file keeps none of the cache once durable
        os.close(fd)
        fd = None
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except BaseException as e:         # an OSError, or a hook's exception: no descriptor or torn file left
        if fd is not None:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise _write_error(e, tmp) from e
        raise
    return size, crc


def _write_error(e: OSError, path: Path) -> CheckpointError:
    if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        why = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
               errno.EFBIG: "file size limit exceeded"}[e.errno]
        msg = (f"cannot write checkpoint {path}: {why}; the partial file was removed and the "
               f"previous checkpoints are kept")
    else:
        msg = f"cannot write checkpoint {path}: {e.strerror or e}"
    return CheckpointError(e.errno, msg)


def check_directory(directory) -> Path:
    """Create ``directory`` if needed and prove that it is writable (a probe file), or raise."""
    d = Path(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
        probe = d / ".write-probe.tmp"
        with open(probe, "wb") as f:
            f.write(b"ok")
        probe.unlink()
    except OSError as e:
        raise CheckpointError(e.errno, f"checkpoint directory {d} is not writable: {e.strerror or e}") from e
    for stale in d.glob("ckpt-*.tmp"):  # torn writes of a crashed run: never committed
        stale.unlink(missing_ok=True)
    return d


def commit(directory: Path, step: int, size_B: int, crc: int) -> None:
    """Make checkpoint ``step`` exist: write its commit record durably."""
    record = {"format": FORMAT, "step": step, "data": data_name(step), "size_B": size_B, "crc32": crc}
    write_durable(directory / commit_name(step), [json.dumps(record).encode()])


def committed_steps(directory) -> list[int]:
    """Steps with a commit record, oldest first (not verified)."""
    out = []
    for p in Path(directory).iterdir():
        m = NAME.match(p.name)
        if m and m.group(2) == "commit":
            out.append(int(m.group(1)))
    return sorted(out)


def prune(directory: Path, keep: int) -> list[int]:
    """Delete all but the newest ``keep`` committed checkpoints (commit record first)."""
    steps = committed_steps(directory)
    gone = steps[:-keep] if keep < len(steps) else []
    for s in gone:
        (directory / commit_name(s)).unlink(missing_ok=True)
        (directory / data_name(s)).unlink(missing_ok=True)
    if gone:
        fsync_dir(directory)
    return gone


# --- loading -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Loaded:
    """Result of :func:`load_latest`: the state, its step and file, and how long the read took."""

    step: int
    state: object
    path: str
    size_B: int
    read_s: float
    skipped: tuple = ()


def read_checkpoint(directory, step: int, mapped: bool = False, drop_behind: bool = False):
    """Read and verify checkpoint ``step``; raises :class:`CheckpointError` naming the bad file.

    Each array of :data:`SMALL_B` or more is read straight into memory of its own, allocated as what
    it is returned as (a PyTorch tensor through PyTorch's allocator, as ``torch.load`` allocates, or a
    NumPy array), so that a freed state's memory is reused and no array keeps another alive; the
    smaller pieces (header, padding, small arrays) are read together and the small arrays copied out.
    ``drop_behind``: drop each chunk from the page cache once read (:func:`read_into_with_crc`; for
    the file's only reader: other readers of the same file would read it from the device again).
    ``mapped``: map the file instead of copying it (a file in memory, as on ``/dev/shm``: its
    pages are used in place, no new buffer is filled); the arrays are then views of the
    mapping (copy-on-write: writing to one never changes the file)."""
    d = Path(directory)
    cpath, dpath = d / commit_name(step), d / data_name(step)
    try:
        record = json.loads(cpath.read_text())
        size, crc = int(record["size_B"]), int(record["crc32"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(errno.EIO, f"{cpath}: unreadable commit record ({e})") from None
    try:
        actual = dpath.stat().st_size
    except OSError:
        raise CheckpointError(errno.ENOENT, f"{dpath}: data file missing (committed at step {step})") from None
    if actual != size:
        raise CheckpointError(errno.EIO, f"{dpath}: truncated or torn ({actual} B on disk, {size} B committed)")
    peeked = None if mapped else _peek_header(dpath, size)
    if peeked is None:              # mapped, or a header that does not parse: the whole file, then the verdict
        buf = map_file(dpath, size) if mapped else np.empty(size, dtype=np.uint8)
        got, actual_crc = (size, crc32(buf)) if mapped else read_with_crc(dpath, buf, drop_behind=drop_behind)
        _verify(dpath, got, actual_crc, size, crc)
        header = _parse_header(buf, dpath)
        arrays = [_from_numpy(buf[s["offset"]:s["offset"] + s["nbytes"]].view(np.dtype(s["dtype"]))
                              .reshape(s["shape"]), s) for s in header["arrays"]]
    else:
        header, head = peeked
        segments, finish = _plan_read(header["arrays"], size)
        got, actual_crc = read_into_with_crc(dpath, segments, drop_behind=drop_behind)
        _verify(dpath, got, actual_crc, size, crc)
        if bytes(segments[0][:len(head)]) != head:   # the header parsed is the one the checksum verified
            raise CheckpointError(errno.EIO, f"{dpath}: changed while it was read")
        arrays = finish()
    return _decode(header["state"], arrays), str(dpath), size


def _verify(path, got: int, actual_crc: int, size: int, crc: int) -> None:
    if got != size or actual_crc != crc:
        raise CheckpointError(errno.EIO, f"{path}: checksum mismatch (corrupt)")


def _parse_header(buf: np.ndarray, path) -> dict:
    """The JSON header at the start of a data file's bytes; :class:`CheckpointError` if it is not one."""
    if bytes(buf[:8]) != MAGIC:
        raise CheckpointError(errno.EIO, f"{path}: not a checkpoint file")
    (n,) = struct.unpack("<Q", bytes(buf[8:16]))
    try:
        return json.loads(bytes(buf[16:16 + n]))
    except ValueError:
        raise CheckpointError(errno.EIO, f"{path}: not a checkpoint file (unreadable header)") from None


def _peek_header(path, size: int):
    """(header, its bytes) read from the start of ``path`` before the file is verified, or None
    where it does not parse or its arrays do not lie in order inside ``size`` bytes (the caller then
    reads the whole file and lets the checksum speak)."""
    try:
        with open(path, "rb", buffering=0) as f:
            head = f.read(16)
            if len(head) < 16 or head[:8] != MAGIC:
                return None
            (n,) = struct.unpack("<Q", head[8:16])
            if not 0 < n <= size - 16:
                return None
            text = f.read(n)
            header = json.loads(text)
        pos = 16 + n
        for a in header["arrays"]:
            off, nbytes = int(a["offset"]), int(a["nbytes"])
            if off < pos or nbytes < 0 or off + nbytes > size:
                return None
            pos = off + nbytes
        return header, head + text
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _plan_read(specs: list, size: int):
    """The file's bytes as segments in order (writable byte views covering [0, size)): each array of
    :data:`SMALL_B` or more in memory of its own, the pieces between in one buffer per run; and a
    function that returns the arrays once the segments are filled."""
    if any(s.get("kind") == "torch" for s in specs):
        import torch
    segments, own, runs = [], {}, []
    pos = 0

    def run_to(end):
        nonlocal pos
        if end > pos:
            runs.append((pos, np.empty(end - pos, dtype=np.uint8)))
            segments.append(memoryview(runs[-1][1]))
            pos = end

    for i, s in enumerate(specs):
        if s["nbytes"] < SMALL_B:
            continue
        run_to(s["offset"])
        own[i] = (torch.empty(s["nbytes"], dtype=torch.uint8).numpy() if s.get("kind") == "torch"
                  else np.empty(s["nbytes"], dtype=np.uint8))      # a tensor's storage, PyTorch's allocator
        segments.append(memoryview(own[i]))
        pos = s["offset"] + s["nbytes"]
    run_to(size)

    def small(s):                       # a copy of the array's bytes out of the run that holds them
        start, buf = next((a, b) for a, b in reversed(runs) if a <= s["offset"])
        return buf[s["offset"] - start:s["offset"] - start + s["nbytes"]].copy()

    def finish():
        return [_from_numpy((own[i] if i in own else small(s)).view(np.dtype(s["dtype"])).reshape(s["shape"]), s)
                for i, s in enumerate(specs)]
    return segments, finish


def map_file(path, size: int) -> np.ndarray:
    """The first ``size`` bytes of ``path`` as a copy-on-write mapping (a writable uint8 array
    whose writes never reach the file); :class:`CheckpointError` if it cannot be mapped."""
    import mmap
    try:
        with open(path, "rb") as f:
            m = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
    except (OSError, ValueError) as e:
        raise CheckpointError(errno.EIO, f"{path}: cannot map ({e})") from None
    return np.frombuffer(m, dtype=np.uint8)


def read_with_crc(path, buf: np.ndarray, chunk_B: int = CHUNK_B, drop_behind: bool = False) -> tuple[int, int]:
    """Read ``path`` into ``buf`` (:func:`read_into_with_crc` with one segment); (bytes read, CRC-32)."""
    return read_into_with_crc(path, [memoryview(buf).cast("B")], chunk_B, drop_behind)


def read_into_with_crc(path, segments, chunk_B: int = CHUNK_B, drop_behind: bool = False) -> tuple[int, int]:
    """Read ``path`` from its start into ``segments`` (writable byte views, filled in order) and return
    (bytes read, CRC-32 of them). A reader thread fills the segments chunk by chunk while this thread
    checksums the chunks already in; both release the GIL, so the checksum hides behind the read
    instead of following it. ``drop_behind``: each chunk is dropped from the page cache once it is in
    memory (the bytes are in the caller's memory now), so that the read-ahead of the next chunks
    reuses those pages, as :func:`write_chunks` does for a write."""
    ready: queue.Queue = queue.Queue()

    def reader():
        try:
            with open(path, "rb", buffering=0) as f:
                pos = dropped = 0
                for seg in segments:
                    i = 0
                    while i < len(seg):
                        n = f.readinto(seg[i:i + chunk_B])
                        if not n:
                            return
                        ready.put(seg[i:i + n])
                        i, pos = i + n, pos + n
                        full = pos - pos % PAGE_B       # whole pages only: the next segment reads the rest
                        if drop_behind and full > dropped:
                            _dont_need(f.fileno(), dropped, full - dropped)     # clean pages: dropped
                            dropped = full
        except OSError as e:
            ready.put(e)
        finally:
            ready.put(None)

    t = threading.Thread(target=reader, name="checkpoint-reader", daemon=True)
    t.start()
    got, crc, error = 0, 0, None
    while (item := ready.get()) is not None:
        if isinstance(item, OSError):
            error = item
            continue
        crc = crc32(item, crc)
        got += len(item)
    t.join()
    if error is not None:
        raise CheckpointError(error.errno, f"{path}: cannot read ({error.strerror or error})")
    return got, crc


def load_latest(directory) -> Loaded:
    """The newest committed checkpoint whose size and CRC-32 verify.

    Newer files that are torn, corrupt or uncommitted are skipped with a
    :class:`CheckpointWarning` naming each; if nothing valid exists,
    :class:`CheckpointError` says what was found. A resuming process is its checkpoint's only
    reader: the file leaves the page cache behind the read (``drop_behind``).
    """
    d = Path(directory)
    if not d.is_dir():
        raise CheckpointError(errno.ENOENT, f"no checkpoint directory {d}")
    committed = committed_steps(d)
    skipped = []
    t0 = time.perf_counter()
    for step in reversed(committed):
        try:
            state, path, size = read_checkpoint(d, step, drop_behind=True)
        except CheckpointError as e:
            skipped.append(str(e))
            warnings.warn(f"skipping checkpoint: {e}", CheckpointWarning, stacklevel=2)
            continue
        newer = [p for p in sorted(d.glob("ckpt-*")) if _step_of(p) > step and not p.name.endswith(".commit")
                 and _step_of(p) not in committed]
        for p in newer:
            skipped.append(f"{p}: uncommitted")
            warnings.warn(f"skipping checkpoint: {p}: uncommitted (no commit record)", CheckpointWarning,
                          stacklevel=2)
        return Loaded(step=step, state=state, path=path, size_B=size, read_s=time.perf_counter() - t0,
                      skipped=tuple(skipped))
    files = sorted(p.name for p in d.glob("ckpt-*"))
    raise CheckpointError(errno.ENOENT, f"no valid committed checkpoint in {d}"
                          + (f" (found {', '.join(files)}; {'; '.join(skipped)})" if files else " (it is empty)"))


def _step_of(p: Path) -> int:
    m = re.match(r"^ckpt-(\d{9})\.", p.name)
    return int(m.group(1)) if m else -1
