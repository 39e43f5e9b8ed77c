"""Sharded checkpoints of a distributed job: partition metadata, shard records, the global commit.

No PyTorch here (pure functions and files): the torchrun worker
(:mod:`mlsysim.lab.distributed.worker`) calls them, and so can a test without processes.

**Partition.** A sharded tensor is split along dimension 0 as ``torch.chunk`` and FSDP2's
``fully_shard`` split it: with ``n`` rows over ``W`` ranks each rank holds
``c = ceil(n / W)`` rows, rank ``r`` the rows ``[min(r c, n), min((r + 1) c, n))`` (the last
ranks may hold fewer, or none). A replicated tensor (DDP) is stored whole by rank 0; a 0-d value
(AdamW's step counters) by every rank. Each piece is described by a :class:`ShardSpec`: the global
shape, the offset of the piece in every dimension, its local shape and its placement (``"Shard(0)"``
or ``"Replicate()"``).

**Files of a run** (in ``directory``)::

    run.json                          the run's identity (model, mode, seed): another run's is refused
    rank-<r>/ckpt-<s>.data, .commit   rank r's shard of checkpoint s, written by a lab engine
                                      (the format, CRC-32 and atomic commit of mlsysim.lab.store)
    global-<s>.commit                 the global commit record: every rank's shard record

A node's memory tier (:mod:`mlsysim.lab.distributed.tiers`) has the same layout, with the shards the
node wrote and those it holds as replicas, and a global record that also names them.

**Global commit.** Checkpoint *s* exists only once ``global-<s>.commit`` is durable, and rank 0
writes it only after gathering the shard record of every rank, each sent after that rank's
shard was durable (its own commit record written). A crash of any rank at any moment
therefore leaves either a complete global checkpoint or files that :func:`read_for_rank`'s
callers skip. Old checkpoints are pruned (:func:`prune`) only right after a newer global
commit: the global record first, then its shard files.
"""
from __future__ import annotations

import errno
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import store

SHARD_FORMAT = "mlsysim-lab-shard/1"
GLOBAL_FORMAT = "mlsysim-lab-global-commit/1"
RUN_FILE = "run.json"
SHARD, REPLICATE = "Shard(0)", "Replicate()"
_GLOBAL = re.compile(r"^global-(\d{9})\.commit$")
_RANK = re.compile(r"^rank-(\d{5})$")


def global_name(step: int) -> str:
    return f"global-{step:09d}.commit"


def rank_dir(directory, rank: int) -> Path:
    """Rank ``rank``'s shard directory (one lab engine writes there)."""
    return Path(directory) / f"rank-{rank:05d}"


# --- partition metadata (pure) -------------------------------------------------------------------
@dataclass(frozen=True)
class ShardSpec:
    """Where one rank's piece sits in a tensor: ``offset`` and ``local_shape`` per dimension,
    inside ``global_shape``; ``placement`` is ``"Shard(0)"`` or ``"Replicate()"``."""

    global_shape: tuple
    offset: tuple
    local_shape: tuple
    placement: str

    def rows(self) -> tuple[int, int]:
        """The piece's rows of dimension 0, ``[start, stop)`` (all rows for a 0-d tensor)."""
        if not self.global_shape:
            return 0, 1
        return self.offset[0], self.offset[0] + self.local_shape[0]

    def to_json(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, d: dict) -> "ShardSpec":
        return cls(tuple(d["global_shape"]), tuple(d["offset"]), tuple(d["local_shape"]), d["placement"])


def chunk_rows(n: int, world: int, rank: int) -> tuple[int, int]:
    """Rows ``[start, stop)`` of ``n`` that rank ``rank`` of ``world`` holds: chunks of
    ``ceil(n / world)`` rows, as ``torch.chunk`` and FSDP2 cut them.

    >>> [chunk_rows(10, 4, r) for r in range(4)]
    [(0, 3), (3, 6), (6, 9), (9, 10)]
    >>> [chunk_rows(5, 4, r) for r in range(4)]      # the last rank holds nothing
    [(0, 2), (2, 4), (4, 5), (5, 5)]
    """
    if world < 1 or not 0 <= rank < world or n < 0:
        raise ValueError(f"need 0 <= rank < world and n >= 0, got n={n}, world={world}, rank={rank}")
    c = -(-n // world)
    start = min(rank * c, n)
    return start, min(start + c, n)


def partition(global_shape, world: int, placement: str = SHARD) -> tuple[ShardSpec, ...]:
    """Every rank's :class:`ShardSpec` of a tensor of ``global_shape`` over ``world`` ranks.
    A 0-d tensor, or ``placement="Replicate()"``, is replicated: rank 0's spec holds it all and
    the other ranks' specs are empty (they store nothing of it), but for a 0-d tensor, whose piece
    cannot be empty: every rank's spec is rank 0's, and the worker stores such a value (AdamW's step
    counters) on every rank."""
    shape = tuple(int(s) for s in global_shape)
    zeros = (0,) * len(shape)
    if placement == REPLICATE or not shape:
        empty = (0,) * len(shape) if shape else ()
        return tuple(ShardSpec(shape, zeros, shape if r == 0 else empty, REPLICATE) for r in range(world))
    if placement != SHARD:
        raise ValueError(f"unknown placement {placement!r}: {SHARD} or {REPLICATE}")
    out = []
    for r in range(world):
        a, b = chunk_rows(shape[0], world, r)
        out.append(ShardSpec(shape, (a,) + zeros[1:], (b - a,) + shape[1:], SHARD))
    return tuple(out)


def split(array, world: int, placement: str = SHARD) -> list:
    """The pieces of ``array`` (NumPy array or tensor) that each rank of ``world`` stores."""
    specs = partition(array.shape, world, placement)
    if not array.shape:
        return [array if s.local_shape == () and r == 0 else None for r, s in enumerate(specs)]
    return [array[s.rows()[0]:s.rows()[1]] for s in specs]


def assemble(global_shape, rows: tuple[int, int], pieces, empty):
    """Rows ``rows`` of a tensor of ``global_shape``, copied from ``pieces``: ``(spec, array)``
    pairs whose rows together cover them. ``empty(shape)`` makes the output (``np.empty`` or
    ``torch.empty`` with the dtype); a piece that is exactly these rows is returned itself.
    The identity when ``rows`` are all rows and the pieces are :func:`split`'s."""
    shape = tuple(global_shape)
    if not shape:
        for spec, a in pieces:
            if spec.local_shape == ():
                return a
        raise ValueError("no piece holds this 0-d tensor")
    a0, b0 = rows
    for spec, piece in pieces:
        if spec.rows() == tuple(rows) and tuple(piece.shape) == (b0 - a0,) + shape[1:]:
            return piece                          # one piece is exactly these rows: no copy
    out = empty((b0 - a0,) + shape[1:])
    covered = 0
    for spec, piece in pieces:
        s0, s1 = spec.rows()
        lo, hi = max(a0, s0), min(b0, s1)
        if lo < hi:
            out[lo - a0:hi - a0] = piece[lo - s0:hi - s0]
            covered += hi - lo
    if covered != b0 - a0:
        raise ValueError(f"the pieces cover {covered} of the {b0 - a0} rows {rows}")
    return out


def gather(pieces, specs, empty):
    """The whole tensor from every rank's piece (the inverse of :func:`split`)."""
    spec0 = specs[0]
    n = spec0.global_shape[0] if spec0.global_shape else 1
    return assemble(spec0.global_shape, (0, n), [(s, p) for s, p in zip(specs, pieces) if p is not None], empty)


# --- shard records and the global commit ----------------------------------------------------------
def mesh_json(world: int) -> dict:
    """The 1-D device mesh of a data-parallel job (FSDP2's and DDP's)."""
    return {"shape": [world], "dim_names": ["dp"], "device_type": "cpu"}


def shard_record(directory, step: int, rank: int, world: int, mode: str, specs: dict) -> dict:
    """Rank ``rank``'s shard record of checkpoint ``step``: its file, that file's size and CRC-32
    (from the commit record its engine wrote durably), world size, mesh and every tensor's
    :class:`ShardSpec` (by key)."""
    d = rank_dir(directory, rank)
    commit = json.loads((d / store.commit_name(step)).read_text())
    return {"format": SHARD_FORMAT, "step": int(step), "rank": int(rank), "world_size": int(world),
            "mesh": mesh_json(world), "mode": mode,
            "file": f"{d.name}/{store.data_name(step)}", "size_B": int(commit["size_B"]),
            "crc32": int(commit["crc32"]), "tensors": {k: s.to_json() for k, s in specs.items()}}


def write_global_commit(directory, step: int, records: list, run: str, extra: dict | None = None) -> dict:
    """Rank 0, once it holds every rank's shard record of ``step``: write the global commit
    record durably (temporary file, fsync, atomic rename, directory fsync). From then on,
    checkpoint ``step`` exists. ``extra``: more keys for the record (a memory tier's node and
    the shards it holds, :func:`mlsysim.lab.distributed.tiers.node_record`)."""
    records = sorted(records, key=lambda r: r["rank"])
    world = records[0]["world_size"]
    if [r["rank"] for r in records] != list(range(world)) or any(r["step"] != step for r in records):
        raise store.CheckpointError(errno.EINVAL, f"global commit {step}: shard records of ranks "
                                                  f"{[r['rank'] for r in records]} for world size {world}")
    rec = {**(extra or {}), "format": GLOBAL_FORMAT, "run": run, "step": int(step), "world_size": world,
           "mesh": records[0]["mesh"], "mode": records[0]["mode"], "shards": records}
    store.write_durable(Path(directory) / global_name(step), [json.dumps(rec).encode()])
    return rec


def global_steps(directory) -> list[int]:
    """Steps with a global commit record, oldest first (not verified)."""
    d = Path(directory)
    if not d.is_dir():
        return []
    return sorted(int(m.group(1)) for p in d.iterdir() if (m := _GLOBAL.match(p.name)))


def read_global(directory, step: int) -> dict:
    """Checkpoint ``step``'s global commit record; :class:`~mlsysim.lab.store.CheckpointError` if unreadable."""
    path = Path(directory) / global_name(step)
    try:
        rec = json.loads(path.read_text())
        if rec["format"] != GLOBAL_FORMAT or len(rec["shards"]) != rec["world_size"]:
            raise ValueError("not a complete global commit record")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise store.CheckpointError(errno.EIO, f"{path}: unreadable global commit record ({e})") from None
    return rec


def prune(directory, keep: int) -> list[int]:
    """Rank 0, right after a global commit: delete all but the newest ``keep`` global checkpoints,
    each global record first and then the shard files it lists, and any shard file of this
    run's rank directories older than the oldest one kept (a shard that never reached a global
    commit). Returns the steps deleted."""
    d = Path(directory)
    steps = global_steps(d)
    if len(steps) <= keep:
        return []
    gone, oldest = steps[:-keep], steps[-keep]
    for s in gone:
        try:
            rec = read_global(d, s)
        except store.CheckpointError:
            rec = {"shards": []}
        (d / global_name(s)).unlink(missing_ok=True)
        store.fsync_dir(d)
        for shard in rec["shards"]:
            data = d / shard["file"]
            (data.parent / store.commit_name(s)).unlink(missing_ok=True)
            data.unlink(missing_ok=True)
    for rd in d.iterdir():
        if _RANK.match(rd.name) and rd.is_dir():
            for p in rd.iterdir():
                m = store.NAME.match(p.name)
                if m and int(m.group(1)) < oldest:
                    p.unlink(missing_ok=True)
    return gone


# --- loading: what a rank reads ------------------------------------------------------------------
def specs_of(record: dict) -> dict:
    """{key: [(old rank, ShardSpec), ...]} over every shard of a global commit record."""
    out: dict = {}
    for shard in record["shards"]:
        for key, s in shard["tensors"].items():
            out.setdefault(key, []).append((shard["rank"], ShardSpec.from_json(s)))
    return out


def files_for(record: dict, world: int, rank: int) -> list[int]:
    """The old ranks whose shard files new rank ``rank`` of ``world`` reads: those holding rows
    of its new partition of some tensor, the one holding a replicated tensor whole (old rank 0:
    with replicated state every rank reads that file), and its own old shard at the same world
    size (its random state). A file no rank needs (a shard of no rows) is read by new rank
    ``o % world``, so that every file is verified by some rank. Every file also holds the
    shared values (step, schedule, sampler).

    >>> rec = {"world_size": 4, "shards": [{"rank": o, "tensors": {"w": partition((10, 2), 4)[o].to_json()}}
    ...                                    for o in range(4)]}
    >>> files_for(rec, 2, 0), files_for(rec, 2, 1), files_for(rec, 4, 3)
    ([0, 1], [1, 2, 3], [3])
    """
    need = [_needed(record, world, r) for r in range(world)]
    spare = set(range(record["world_size"])).difference(*need)
    return sorted(need[rank] | {o for o in spare if o % world == rank})


def _needed(record: dict, world: int, rank: int) -> set:
    need = {rank} if record["world_size"] == world else set()
    whole = []
    for key, pieces in specs_of(record).items():
        shape = pieces[0][1].global_shape
        if not shape or pieces[0][1].placement == REPLICATE:
            whole.append({o for o, s in pieces if s.local_shape == shape})
            continue
        a, b = chunk_rows(shape[0], world, rank)
        for o, s in pieces:
            s0, s1 = s.rows()
            if max(a, s0) < min(b, s1):
                need.add(o)
    for holders in whole:              # a replicated value: from a file read anyway, else its first holder
        if not need & holders:
            need.add(min(holders))
    if not need:
        need.add(rank % record["world_size"])   # a rank of no rows still needs the shared values
    return need


def _drop_cached(path: Path) -> None:
    if hasattr(os, "posix_fadvise"):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return                      # missing: the read below names it
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


@dataclass(frozen=True)
class RankLoad:
    """What one rank read of a global checkpoint: its pieces of every tensor (by key, rows of
    its new partition; replicated tensors whole), the shared values and, at the same world
    size, its own per-rank state; the files and bytes it read."""

    step: int
    tensors: dict
    shared: dict
    rank_state: dict | None
    files: tuple
    bytes_read: int


def read_for_rank(directory, record: dict, world: int, rank: int, empty, cold: bool = False,
                  mapped: bool = False) -> RankLoad:
    """Read and verify (size and CRC-32 against the global record) the shard files rank ``rank``
    of ``world`` needs from checkpoint ``record``, and cut its pieces from them. A shard that is
    missing, truncated or corrupt raises :class:`~mlsysim.lab.store.CheckpointError` naming it.
    ``empty(shape, like)`` makes an output array of ``like``'s dtype and kind. ``cold``: first
    ask the kernel to drop each file's cached pages (``posix_fadvise``), so that the read comes
    from the device, as on a machine that never held the file. ``mapped``: map the files in
    place instead of reading them (files in memory, :func:`mlsysim.lab.store.read_checkpoint`)."""
    d = Path(directory)
    step, old_world = record["step"], record["world_size"]
    states, files, nbytes = {}, [], 0
    for o in files_for(record, world, rank):
        shard = record["shards"][o]
        path = d / shard["file"]
        if cold:
            _drop_cached(path)
        try:
            state, _, size = store.read_checkpoint(path.parent, step, mapped=mapped)
        except store.CheckpointError as e:
            raise store.CheckpointError(e.errno, f"shard of rank {o} of {old_world}: {e}") from None
        crc = json.loads((path.parent / store.commit_name(step)).read_text())["crc32"]
        if size != shard["size_B"] or crc != shard["crc32"]:
            raise store.CheckpointError(errno.EIO, f"shard of rank {o} of {old_world}: {path}: not the file the "
                                                   f"global commit names ({size} B, CRC {crc})")
        states[o], nbytes = state, nbytes + size
        files.append(str(path))
    tensors = {}
    for key, pieces in specs_of(record).items():
        spec = pieces[0][1]
        have = [(s, states[o]["tensors"][key]) for o, s in pieces if o in states and key in states[o]["tensors"]]
        if not spec.global_shape or spec.placement == REPLICATE:
            tensors[key] = next(p for s, p in have if s.local_shape == spec.global_shape)
            continue
        like = have[0][1]
        tensors[key] = assemble(spec.global_shape, chunk_rows(spec.global_shape[0], world, rank), have,
                                lambda shape, like=like: empty(shape, like))
    return RankLoad(step=step, tensors=tensors, shared=states[min(states)]["shared"],
                    rank_state=states[rank]["rank_state"] if old_world == world else None,
                    files=tuple(files), bytes_read=nbytes)


# --- the run's identity -----------------------------------------------------------------------------
def claim(directory, identity: dict) -> Path:
    """Make ``directory`` this run's: create it with ``run.json`` holding ``identity``, or accept
    it if its ``run.json`` holds the same identity. A directory holding another run's
    checkpoints, or files of something else, raises :class:`~mlsysim.lab.store.CheckpointError`
    (nothing is deleted)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    path = d / RUN_FILE
    if path.exists():
        try:
            theirs = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise store.CheckpointError(errno.EEXIST, f"{d} holds an unreadable {RUN_FILE} ({e})") from None
        if theirs != identity:
            diff = sorted(k for k in set(theirs) | set(identity) if theirs.get(k) != identity.get(k))
            raise store.CheckpointError(errno.EEXIST, f"{d} holds another run's checkpoints (its {RUN_FILE} "
                                                      f"differs in {', '.join(diff)}); use another directory")
        return d
    others = sorted(p.name for p in d.iterdir())
    if others:
        raise store.CheckpointError(errno.EEXIST, f"{d} is not empty and holds no {RUN_FILE} "
                                                  f"({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}); "
                                                  f"use an empty or new directory")
    tmp = path.with_name(RUN_FILE + ".tmp")
    tmp.write_text(json.dumps(identity, sort_keys=True))
    os.replace(tmp, path)
    store.fsync_dir(d)
    return d
