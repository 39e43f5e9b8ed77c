"""Where the distributed lab keeps its checkpoints: memory, peer memory, durable storage.

No PyTorch here (paths, placement and the choice of a source): the torchrun worker
(:mod:`mlsysim.lab.distributed.worker`) calls these functions, and so can a test without processes.

**Three tiers**, as in Gemini (Wang et al., SOSP'23) with CheckFreq's snapshot:

* *memory* — at every checkpoint each rank writes its shard into its node's host memory
  (with an engine of the run's kind: ``concurrent`` copies it in the training loop and writes
  it in the background): files under ``/dev/shm/<run>/<node>/`` (a tmpfs, so RAM that
  outlives the worker processes but not the machine; a temporary directory where there is no
  ``/dev/shm``), in the format of :mod:`mlsysim.lab.store` (CRC-32, commit record) with a
  global record per node (:mod:`mlsysim.lab.distributed.shards`). A node keeps its newest complete
  checkpoint only.
* *peer memory* — each rank also sends its shard to its counterpart on the next node (the
  same local rank, nodes in a ring; with two nodes, each other's), point to point on the
  checkpoint's own process group, and that rank writes it into *its* node's memory tier. On
  one machine a rank could simply read the other node's directory; it never does, because on
  two machines it could not: the transfer is what crosses the network there. After losing one
  node the survivors still hold every shard between them (:func:`peer`, :func:`replica_source`).
* *durable storage* — every ``k``-th checkpoint is also persisted by the lab's engines into
  the run directory under a global commit, in the background (the concurrent engine).

**A node's identity** is its agent's, not the group rank the rendezvous hands out (which can
change after a restart): ``$MLSYSIM_NODE``, set per agent, else the host name (:func:`node_name`).

**Recovery** (:func:`memory_candidates`, :func:`plan_recovery`): the newest memory checkpoint
whose every shard some live node holds (its own or a replica), and that is not older than
the newest durable global commit; each rank reads what it needs from its own node's memory,
and a shard that its node lacks is sent by a rank of a node that holds it. The source is
``"memory"`` when every shard comes from the memory of the node that wrote it, and
``"peer-memory"`` when some shard comes from a replica or crosses to another node. With no
such checkpoint (both copies lost, or memory older than storage) the job reads durable
storage, and with none there it starts from scratch.
"""
from __future__ import annotations

import os
import re
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ...errors import MlsysimError
from .. import store
from . import shards

NODE_ENV = "MLSYSIM_NODE"
SOURCES = ("memory", "peer-memory", "storage")
SHM = Path("/dev/shm")
ROOT_PREFIX = "mlsysim-tiers-"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


# --- paths -------------------------------------------------------------------------------------------
def node_name(environ=None) -> str:
    """This agent's node: ``$MLSYSIM_NODE`` (set per agent), else the host name.

    >>> node_name({"MLSYSIM_NODE": "node-1"})
    'node-1'
    """
    env = os.environ if environ is None else environ
    name = env.get(NODE_ENV) or socket.gethostname()
    if not _NAME.match(name):
        raise MlsysimError(f"{NODE_ENV} must be 1 to 64 letters, digits, '.', '_' or '-' (a directory name), "
                           f"got {name!r}")
    return name


def memory_base() -> Path:
    """Where memory tiers go: ``/dev/shm`` (a tmpfs) where it is a writable directory, else the
    temporary directory (a disk: still correct, no longer memory)."""
    if SHM.is_dir() and os.access(SHM, os.W_OK | os.X_OK):
        return SHM
    return Path(tempfile.gettempdir())


def make_memory_root(base=None) -> Path:
    """A new directory, unique to one run, that holds every node's memory tier (removed by the run)."""
    return Path(tempfile.mkdtemp(prefix=ROOT_PREFIX, dir=base or memory_base()))


def node_dir(root, node: str) -> Path:
    """Node ``node``'s memory tier under a run's ``root``.

    >>> node_dir("/dev/shm/mlsysim-tiers-x", "node-0").as_posix()
    '/dev/shm/mlsysim-tiers-x/node-0'
    """
    if not _NAME.match(node):
        raise MlsysimError(f"node name must be 1 to 64 letters, digits, '.', '_' or '-', got {node!r}")
    return Path(root) / node


# --- placement ---------------------------------------------------------------------------------------
def node_ranks(layout) -> dict:
    """{node: its ranks} from ``layout`` (the node of every global rank), nodes in order of their
    first rank; every node must hold as many ranks as the others.

    >>> node_ranks(("a", "a", "b", "b"))
    {'a': (0, 1), 'b': (2, 3)}
    """
    out: dict = {}
    for r, n in enumerate(layout):
        out.setdefault(n, []).append(r)
    sizes = {len(v) for v in out.values()}
    if len(sizes) > 1:
        raise MlsysimError(f"every node must run as many ranks as the others, got {dict(out)}")
    return {n: tuple(v) for n, v in out.items()}


def _ring(layout, rank: int, shift: int) -> int | None:
    by = node_ranks(layout)
    nodes = list(by)
    if len(nodes) < 2:
        return None
    mine = by[layout[rank]]
    other = by[nodes[(nodes.index(layout[rank]) + shift) % len(nodes)]]
    return other[mine.index(rank)]


def peer(layout, rank: int) -> int | None:
    """The rank that holds ``rank``'s replica: the same local rank on the next node (a ring over
    the nodes); None on one node.

    >>> [peer(("a", "a", "b", "b"), r) for r in range(4)], peer(("a", "a"), 0)
    ([2, 3, 0, 1], None)
    """
    return _ring(layout, rank, 1)


def replica_source(layout, rank: int) -> int | None:
    """The rank whose replica ``rank`` holds: the same local rank on the previous node.

    >>> [replica_source(("a", "b", "c"), r) for r in range(3)]
    [2, 0, 1]
    """
    return _ring(layout, rank, -1)


# --- what a node holds ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Holding:
    """One memory checkpoint on one node: its ``step`` and ``world`` size, the ranks whose shards
    this node wrote (``own``) and those it holds as replicas, counting only the shards whose data
    file and commit record are both there."""

    node: str
    step: int
    world: int
    own: tuple
    replicas: tuple

    def ranks(self) -> frozenset:
        return frozenset(self.own) | frozenset(self.replicas)


def node_record(node: str, own, replicas) -> dict:
    """What a node's memory global record adds to :func:`~mlsysim.lab.distributed.shards.write_global_commit`'s:
    the node, the ranks whose shards it wrote and those it holds as replicas.

    >>> node_record("node-0", (1, 0), (3, 2))
    {'node': 'node-0', 'own': [0, 1], 'replicas': [2, 3]}
    """
    return {"node": node, "own": sorted(int(r) for r in own), "replicas": sorted(int(r) for r in replicas)}


def survey(directory) -> list:
    """The memory checkpoints in a node's ``directory``, newest first, as ``(Holding, record)``
    pairs: for each global record there, the shards whose files are present (not verified:
    the loader checks their size and CRC-32)."""
    d = Path(directory)
    out = []
    for step in reversed(shards.global_steps(d)):
        try:
            rec = shards.read_global(d, step)
        except store.CheckpointError:
            continue
        present = set()
        for shard in rec["shards"]:
            data = d / shard["file"]
            if data.is_file() and (data.parent / store.commit_name(step)).is_file():
                present.add(int(shard["rank"]))
        own = tuple(sorted(present & set(rec.get("own", ()))))
        rep = tuple(sorted(present - set(own)))
        out.append((Holding(str(rec.get("node", d.name)), int(step), int(rec["world_size"]), own, rep), rec))
    return out


def memory_candidates(holdings, storage_step: int | None) -> list[int]:
    """Steps of the memory checkpoints the live nodes hold completely (every rank's shard on some
    node, every node agreeing on the world size), newest first, none older than the newest durable
    global commit ``storage_step`` (storage is then at least as new).

    >>> a = Holding("a", 4, 2, own=(0,), replicas=(1,))
    >>> memory_candidates([a], None), memory_candidates([a], 6)
    ([4], [])
    >>> memory_candidates([Holding("a", 4, 2, own=(0,), replicas=())], None)    # shard 1 is lost
    []
    """
    by_step: dict = {}
    for h in holdings:
        by_step.setdefault(h.step, []).append(h)
    out = []
    for step, hs in by_step.items():
        worlds = {h.world for h in hs}
        if len(worlds) != 1:
            continue
        (world,) = worlds
        if frozenset().union(*(h.ranks() for h in hs)) >= frozenset(range(world)):
            if storage_step is None or step >= storage_step:
                out.append(step)
    return sorted(out, reverse=True)


@dataclass(frozen=True)
class Transfer:
    """Old rank ``shard``'s file of the checkpoint, sent by new rank ``src`` to new rank ``dst``."""

    shard: int
    src: int
    dst: int


@dataclass(frozen=True)
class RecoveryPlan:
    """How the ranks of a (re)started job load memory checkpoint ``step``: ``reads[r]``, the old
    shards new rank ``r`` reads from its own node's memory tier once ``transfers`` (run by every
    rank in this order) have put there those its node lacked; ``source``: ``"memory"`` or
    ``"peer-memory"``."""

    step: int
    source: str
    reads: tuple
    transfers: tuple


def plan_recovery(step: int, needs, layout, holdings) -> RecoveryPlan:
    """Plan the load of memory checkpoint ``step``: ``needs[r]`` are the old ranks whose shards new
    rank ``r`` reads (:func:`~mlsysim.lab.distributed.shards.files_for`), ``layout`` the node of every new
    rank, ``holdings`` what the live nodes hold (:func:`survey`). Each node receives each missing
    shard once (by its lowest rank that needs it), from the first node in ``layout`` order that
    holds it, sent by that node's rank ``shard mod ranks per node`` (the senders take turns).

    A node lost and replaced (``"c"`` joins with an empty memory tier): the survivor holds its own
    shard 0 and the replica of shard 1, and sends shard 1 over:

    >>> a = Holding("a", 4, 2, own=(0,), replicas=(1,))
    >>> p = plan_recovery(4, [{0}, {1}], ("a", "c"), [a])
    >>> p.source, p.transfers, p.reads
    ('peer-memory', (Transfer(shard=1, src=0, dst=1),), ((0,), (1,)))

    The survivor alone at the smaller world size (elastic) reads both from its own memory, and a
    restart with both nodes intact reads every shard where it was written:

    >>> plan_recovery(4, [{0, 1}], ("a",), [a]).transfers
    ()
    >>> b = Holding("b", 4, 2, own=(1,), replicas=(0,))
    >>> plan_recovery(4, [{0}, {1}], ("a", "b"), [a, b]).source
    'memory'
    """
    by_node = node_ranks(layout)
    held: dict = {}
    for h in holdings:
        if h.step == step and h.node in by_node:
            kinds = held.setdefault(h.node, {})
            for r in h.replicas:
                kinds.setdefault(r, "replica")
            for r in h.own:
                kinds[r] = "own"
    used, transfers = set(), []
    for node, ranks in by_node.items():
        have = held.get(node, {})
        for shard in sorted(set().union(*(set(needs[r]) for r in ranks))):
            if shard in have:
                used.add(have[shard])
                continue
            holders = [n for n in by_node if shard in held.get(n, {})]
            if not holders:
                raise MlsysimError(f"memory checkpoint {step}: no live node holds the shard of rank {shard}")
            senders = by_node[holders[0]]
            dst = min(r for r in ranks if shard in needs[r])
            transfers.append(Transfer(shard, senders[shard % len(senders)], dst))
            used.add("sent")
    source = "memory" if used <= {"own"} else "peer-memory"
    reads = tuple(tuple(sorted(needs[r])) for r in range(len(layout)))
    return RecoveryPlan(step=step, source=source, reads=reads, transfers=tuple(sorted(transfers, key=lambda t: (
        t.shard, t.dst))))
