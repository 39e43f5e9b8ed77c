"""What :func:`mlsysim.checkpoint` predicts for the distributed lab's job on this machine.

No PyTorch here. The machine is described as in :mod:`mlsysim.lab.predict`, with one
change: the job's ``world`` ranks are the "accelerators" of a one-node cluster, and they
share one disk. The disk is therefore a ``"shared"`` :class:`~mlsysim.checkpoint.StorageTier`
whose aggregate rates (write + ``fsync``, read) all ranks divide, and whose per-node client
link is the disk itself, so a tier time is ``total bytes / rate`` whoever writes them
(``StorageTier.write_s`` = max(total / aggregate, node bytes / client) = total / rate on one node).
The "host link" of each rank is the memory copy; the scale-out link of each rank, which
carries the broadcast, is ``link_Bps`` (the TCP loopback that gloo uses, or, when not
measured, the memory copy rate as in :func:`mlsysim.lab.predict.machine_from`).

State: fp32 weights and AdamW's m and v, 12 B per parameter (no master copy), plus
``EXTRAS_PER_RANK_B`` = 16 kB (16,000 B) per rank of schedule, sampler and random state. FSDP is
``zero_stage=3`` (every rank holds S/N of the state); DDP is ``zero_stage=0`` (replicated:
rank 0 writes all of it, so it is the busiest rank).

**Restore schemes** (S: state bytes, E: extras per rank, N: ranks, r: read rate, c: copy
rate, b: link rate):

* ``sharded`` (FSDP): each owner reads its own shard once: S/N + E per rank, S + N E in
  all; time = (S + N E) / r + (S/N + E) / c. This is ``ms.checkpoint``'s restore at ZeRO-3.
* ``broadcast`` (DDP, as MegaScale does): rank 0 reads the replicated state once and
  broadcasts it; the other ranks read only their own E. Bytes: S + E, then E per other
  rank; time = (S + N E) / r + (S + E) / c + broadcast(S, N, b), where broadcast =
  S / b (pipelined, :func:`mlsysim.collectives.broadcast_time`). This is ``ms.checkpoint``'s
  restore at ZeRO-0.
* ``replicated`` (DDP, every rank reads the state itself): rank 0 reads S + E, every other
  rank S + E of rank 0's file and its own E: N S + (2N − 1) E in all, N times the state
  (load amplification). ``ms.checkpoint`` cannot express it (its restore reads one copy per
  data-parallel group), so it is computed here from its fields: the shared tier's read time
  of those bytes, plus the copy of the busiest rank's ``rank_B``. On one machine the page
  cache may serve every reader after the first; ``restore_cached_s`` is that bound (one
  read from the disk, then copies).

Not modelled: the CRC-32 of every file (overlapped with the read), the JSON header of each
file and the alignment of its arrays (a few KB per file), the uneven ``ceil(rows / N)``
split of a tensor's rows, and the CPU contention of N ranks on fewer cores.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import asdict, dataclass

from ...checkpoint import EXTRAS_PER_RANK_B, StorageTier, checkpoint
from ...collectives import broadcast_time
from ...errors import MlsysimError, UnknownNameError, check_integer, check_positive
from ...systems import Cluster
from ..predict import machine_from, workload

SCHEMES = ("replicated", "sharded", "broadcast")
ZERO_STAGE = {"fsdp": 3, "ddp": 0}                         # the lab's modes as ZeRO stages
SCHEME_MODE = {"replicated": "ddp", "sharded": "fsdp", "broadcast": "ddp"}


@dataclass(frozen=True)
class DistMachine:
    """This machine's measured (or given) rates, bytes per second: memory copy, disk write with
    ``fsync`` and read (shared by all ranks), and the link that carries a broadcast."""

    copy_Bps: float
    write_Bps: float
    read_Bps: float
    link_Bps: float


def dist_machine(copy_Bps: float, write_Bps: float, read_Bps: float, link_Bps: float | None = None) -> DistMachine:
    """The rates of a machine; ``link_Bps`` defaults to the memory copy rate.

    >>> dist_machine(10e9, 1e9, 2e9).link_Bps
    10000000000.0
    """
    for k, v in (("copy_Bps", copy_Bps), ("write_Bps", write_Bps), ("read_Bps", read_Bps)):
        check_positive(k, v)
    if link_Bps is not None:
        check_positive("link_Bps", link_Bps)
    return DistMachine(float(copy_Bps), float(write_Bps), float(read_Bps),
                       float(copy_Bps if link_Bps is None else link_Bps))


def measure_dist_machine(directory=None, size_B: float = 64e6, repeats: int = 2) -> DistMachine:
    """Measure this machine: memory copy and disk write/read (:func:`mlsysim.lab.predict.measure_machine`,
    in ``directory``, ``size_B`` bytes) and the TCP loopback (:func:`loopback_Bps`)."""
    from ..predict import measure_machine
    m = measure_machine(directory, size_B=size_B, repeats=repeats)
    return dist_machine(m.copy_Bps, m.write_Bps, m.read_Bps, loopback_Bps(size_B))


def loopback_Bps(size_B: float = 64e6, timeout_s: float = 30.0) -> float:
    """Bytes per second of one TCP stream on 127.0.0.1 (what gloo's ranks on one machine send over):
    a thread sends ``size_B`` bytes in 1 MiB writes, this thread receives them; bytes / seconds."""
    import socket
    import threading
    import time
    check_positive("size_B", size_B)
    n, chunk = int(size_B), memoryview(bytes(1 << 20))
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(timeout_s)
        out = socket.create_connection(server.getsockname(), timeout=timeout_s)
        conn, _ = server.accept()

        def send():
            left = n
            try:
                while left > 0:
                    left -= out.send(chunk[:min(left, len(chunk))])
            except OSError:
                pass

        with out, conn:
            conn.settimeout(timeout_s)
            buf = bytearray(1 << 20)
            t0 = time.perf_counter()
            sender = threading.Thread(target=send, daemon=True)
            sender.start()
            got = 0
            while got < n:
                k = conn.recv_into(buf)
                if not k:
                    break
                got += k
            dt = time.perf_counter() - t0
            sender.join(timeout_s)
    if got < n:
        raise MlsysimError(f"the loopback test received {got} of {n} bytes")
    return got / dt


def records(machine: DistMachine, world: int) -> tuple[Cluster, StorageTier]:
    """The one-node cluster whose node has ``world`` "accelerators" (the ranks), each with the memory
    copy as its host link and ``link_Bps`` as its share of the scale-out link, and the disk as one
    shared tier (aggregate rate = client rate = the measured rate)."""
    check_integer("world", world)
    base = machine_from(machine.copy_Bps, machine.write_Bps, machine.read_Bps).cluster
    node = dataclasses.replace(base.node, accelerators=world, nics=world, nic_Bps=machine.link_Bps)
    fabric = dataclasses.replace(base.fabric, port_Bps=machine.link_Bps)
    cluster = dataclasses.replace(base, name=f"this machine, {world} ranks", node=node, fabric=fabric)
    tier = StorageTier(name="this machine's disk, shared by the ranks", kind="shared",
                       write_Bps=machine.write_Bps, read_Bps=machine.read_Bps,
                       client_write_Bps=machine.write_Bps, client_read_Bps=machine.read_Bps, durable=True,
                       source="measured with mlsysim.measure.disk_bandwidth", date=base.node.date)
    return cluster, tier


def _check(size_B, world, mode=None, scheme=None) -> None:
    check_positive("size_B", size_B)
    check_integer("world", world)
    if mode is not None and mode not in ZERO_STAGE:
        raise UnknownNameError("distributed lab mode", mode, tuple(ZERO_STAGE))
    if scheme is not None and scheme not in SCHEMES:
        raise UnknownNameError("restore scheme", scheme, SCHEMES)


def _model(size_B, world, mode, machine, strategy="sync", interval_s=1.0):
    cluster, tier = records(machine, world)
    return checkpoint(workload(size_B), cluster, optimizer="adamw", precision="fp32", tp=1, pp=1, dp=world,
                      zero_stage=ZERO_STAGE[mode], storage=tier, strategy=strategy, interval_s=interval_s,
                      restart_s=0.0)


@dataclass(frozen=True)
class JobPrediction:
    """``ms.checkpoint``'s numbers for one checkpoint of the distributed job. Bytes, seconds.

    ``checkpoint_B``: every byte written (state + extras); ``rank_B``: the busiest rank's;
    ``copy_s``: its snapshot copy; ``storage_write_s``: the shared disk's write of ``checkpoint_B``;
    ``sync_stall_s`` = copy + write; ``concurrent_stall_s``: two or more buffers, one writer per
    rank (:func:`mlsysim.lab.predict.predict`'s rule); ``durable_s``: until the checkpoint is on
    the disk; ``restore_s``: ``ms.checkpoint``'s restore (one read per data-parallel group, the
    copy, the broadcast of the replicated part)."""

    size_B: float
    world: int
    mode: str
    zero_stage: int
    interval_s: float
    checkpoint_B: float
    rank_B: float
    copy_s: float
    storage_write_s: float
    sync_stall_s: float
    concurrent_stall_s: float
    durable_s: float
    restore_s: float


def predict_job(size_B: float, world: int, mode: str, machine: DistMachine, interval_s: float,
                buffers: int = 2) -> JobPrediction:
    """Predict one checkpoint of a ``world``-rank job whose state is ``size_B`` bytes (12 B per
    parameter), taken every ``interval_s`` seconds of compute, in ``mode`` ``"fsdp"`` (ZeRO-3)
    or ``"ddp"`` (ZeRO-0), on ``machine``.

    sync stall = rank_B / copy + (S + N E) / write; concurrent stall = max(rank_B / copy,
    W − τ) with ``buffers`` ≥ 2 (W: the disk's write, τ: ``interval_s``), max(d, d + W − τ) with one.

    Worked number: 64 MB at 4 ranks, copy 10 GB/s, write 1 GB/s, read 2 GB/s. FSDP: the busiest
    rank writes 16 MB + 16 kB (1.6 ms of copy), the disk 64 MB + 4 × 16 kB (64.06 ms).

    >>> m = dist_machine(copy_Bps=10e9, write_Bps=1e9, read_Bps=2e9)
    >>> p = predict_job(64e6, 4, "fsdp", m, interval_s=1.0)
    >>> round(p.rank_B), round(p.copy_s * 1e3, 2), round(p.storage_write_s * 1e3, 2), round(p.sync_stall_s * 1e3, 2)
    (16016000, 1.6, 64.06, 65.67)
    >>> q = predict_job(64e6, 4, "ddp", m, interval_s=1.0)   # rank 0 writes it all: 6.4 ms of copy
    >>> round(q.rank_B), round(q.sync_stall_s * 1e3, 2), round(q.concurrent_stall_s * 1e3, 2)
    (64016000, 70.47, 6.4)
    """
    _check(size_B, world, mode)
    check_positive("interval_s", interval_s)
    if type(buffers) is not int or buffers < 1:
        raise MlsysimError(f"buffers must be a positive integer, got {buffers!r}")
    sync = _model(size_B, world, mode, machine, "sync", interval_s)
    # the async strategy needs interval >= persist; past that point the pool's back-pressure rules
    asyn = _model(size_B, world, mode, machine, "async", max(interval_s, sync.storage_write_s))
    period = asyn.storage_write_s if buffers >= 2 else asyn.d2h_s + asyn.storage_write_s
    return JobPrediction(size_B=float(size_B), world=world, mode=mode, zero_stage=ZERO_STAGE[mode],
                         interval_s=float(interval_s), checkpoint_B=sync.size_B, rank_B=sync.rank_B,
                         copy_s=sync.d2h_s, storage_write_s=sync.storage_write_s, sync_stall_s=sync.stall_s,
                         concurrent_stall_s=max(asyn.stall_s, period - interval_s), durable_s=sync.write_s,
                         restore_s=sync.restore_s)


def bytes_read(scheme: str, size_B: float, world: int) -> tuple[tuple, float]:
    """Bytes each rank reads from storage to restore a ``size_B``-byte state over ``world`` ranks
    with ``scheme``, and their total (see the module docstring; E = 16 kB of extras per rank):

    * sharded: S/N + E each, S + N E in all;
    * broadcast: S + E for rank 0, E for the others, S + N E in all;
    * replicated: S + E for rank 0, S + 2E for the others, N S + (2N − 1) E in all.

    >>> per, total = bytes_read("replicated", 64e6, 4)    # 4 x 64 MB: amplification
    >>> [round(b) for b in per], round(total)
    ([64016000, 64032000, 64032000, 64032000], 256112000)
    >>> bytes_read("broadcast", 64e6, 4)[1] == bytes_read("sharded", 64e6, 4)[1] == 64e6 + 4 * 16e3
    True
    """
    _check(size_B, world, scheme=scheme)
    s, e, n = float(size_B), float(EXTRAS_PER_RANK_B), world
    if scheme == "sharded":
        per = (s / n + e,) * n
    elif scheme == "broadcast":
        per = (s + e,) + (e,) * (n - 1)
    else:
        per = (s + e,) + (s + 2 * e,) * (n - 1)
    return per, math.fsum(per)


@dataclass(frozen=True)
class RestorePrediction:
    """One restore scheme's prediction. Bytes, seconds.

    ``read_s``: the shared disk's read of ``bytes_read_total``; ``copy_s``: the busiest rank's copy
    into its live tensors; ``broadcast_s``: rank 0's broadcast (broadcast scheme only);
    ``restore_s`` = read + copy + broadcast; ``restore_cached_s``: the same when the page cache
    serves every reader of a file after the first (differs for ``replicated`` only)."""

    scheme: str
    mode: str
    size_B: float
    world: int
    bytes_read_per_rank: tuple
    bytes_read_total: float
    read_s: float
    copy_s: float
    broadcast_s: float
    restore_s: float
    restore_cached_s: float


def predict_restore(scheme: str, size_B: float, world: int, machine: DistMachine) -> RestorePrediction:
    """Predict restoring a ``size_B``-byte state on ``world`` ranks with ``scheme``.

    sharded and broadcast: ``ms.checkpoint``'s ``restore_s`` (ZeRO-3 and ZeRO-0); replicated:
    read(N S + (2N − 1) E) + rank_B / copy, from ``ms.checkpoint``'s ``rank_B`` and tier.

    Worked number: 64 MB at 4 ranks, copy 10 GB/s, read 2 GB/s, link 1 GB/s. Sharded:
    64.07 MB / 2 GB/s + 16.02 MB / 10 GB/s = 33.6 ms; broadcast: 32.0 + 6.4 + 64 (the broadcast)
    = 102.4 ms; replicated: 256.1 MB / 2 GB/s + 6.4 ms = 134.5 ms, or 38.4 ms from a warm cache.

    >>> m = dist_machine(copy_Bps=10e9, write_Bps=1e9, read_Bps=2e9, link_Bps=1e9)
    >>> [round(predict_restore(s, 64e6, 4, m).restore_s * 1e3, 1) for s in SCHEMES]
    [134.5, 33.6, 102.4]
    >>> round(predict_restore("replicated", 64e6, 4, m).restore_cached_s * 1e3, 1)
    38.4
    """
    _check(size_B, world, scheme=scheme)
    mode = SCHEME_MODE[scheme]
    ck = _model(size_B, world, mode, machine)
    _, tier = records(machine, world)
    per, total = bytes_read(scheme, size_B, world)
    copy = ck.rank_B / machine.copy_Bps
    once = tier.read_s(ck.size_B, ck.node_B)                 # one copy of everything from the disk
    if scheme == "replicated":
        read, bcast = tier.read_s(total, total), 0.0          # one node: it reads every byte
        restore, cached = read + copy, once + copy
    else:
        replicated = ck.weights_B + ck.master_B + ck.optimizer_B if ck.zero_stage == 0 else 0.0
        read = once
        bcast = broadcast_time(replicated, float(world), machine.link_Bps) if replicated else 0.0
        restore = cached = ck.restore_s
    return RestorePrediction(scheme=scheme, mode=mode, size_B=float(size_B), world=world, bytes_read_per_rank=per,
                             bytes_read_total=total, read_s=read, copy_s=copy, broadcast_s=bcast,
                             restore_s=restore, restore_cached_s=cached)


@dataclass(frozen=True)
class RecoveryPrediction:
    """Where a lost state comes back from, and how long the model says each tier takes. Bytes, seconds.

    ``rank_B``: the busiest rank's shard; ``node_B``: a node's shards (``rank_B`` x ranks per node);
    ``memory_s``: a restarted rank copies its shard back from its own node's memory,
    ``rank_B / copy``; ``peer_memory_s``: a replacement node receives the lost node's shards from
    the peer holding their replica, then copies its shard into place, ``node_B / link +
    rank_B / copy`` (``ms.checkpoint``'s in-memory restore with the loopback as the NIC);
    ``storage_s``: every rank reads its shard from the shared disk, the sharded restore."""

    size_B: float
    world: int
    nodes: int
    rank_B: float
    node_B: float
    memory_s: float
    peer_memory_s: float
    storage_s: float


def predict_recovery(size_B: float, world: int, nodes: int, machine: DistMachine) -> RecoveryPrediction:
    """Predict recovering a ``size_B``-byte FSDP state of ``world`` ranks on ``nodes`` nodes from each
    tier (see :class:`RecoveryPrediction`). The ranks of every node share the one machine.

    Worked number: 64 MB on 2 nodes of 1 rank, copy 10 GB/s, read 2 GB/s, link 1 GB/s: each rank's
    shard is 32.016 MB; own memory 3.2 ms, peer memory 32.0 + 3.2 = 35.2 ms, storage
    32.0 + 3.2 = 35.2 ms: on one machine the loopback is no faster than the disk's reads.

    >>> m = dist_machine(copy_Bps=10e9, write_Bps=1e9, read_Bps=2e9, link_Bps=1e9)
    >>> p = predict_recovery(64e6, 2, 2, m)
    >>> round(p.rank_B), [round(t * 1e3, 1) for t in (p.memory_s, p.peer_memory_s, p.storage_s)]
    (32016000, [3.2, 35.2, 35.2])
    """
    _check(size_B, world)
    check_integer("nodes", nodes)
    if world % nodes:
        raise MlsysimError(f"world of {world} ranks does not split over {nodes} nodes")
    ck = _model(size_B, world, "fsdp", machine)
    node_B = ck.rank_B * (world // nodes)
    copy = ck.rank_B / machine.copy_Bps
    return RecoveryPrediction(size_B=float(size_B), world=world, nodes=nodes, rank_B=ck.rank_B, node_B=node_B,
                              memory_s=copy, peer_memory_s=node_B / machine.link_Bps + copy,
                              storage_s=predict_restore("sharded", size_B, world, machine).restore_s)


def job_prediction(events, job: dict, directory) -> dict:
    """:func:`mlsysim.lab.distributed.predict.predict_job` (the first prediction) for a job's state (12 B
    per parameter, from its events) on this machine (measured in ``directory``); ``job``: the run's
    ``world_size``, ``mode``, ``every`` (checkpoints every that many steps of the job's median step time),
    ``engine``, and optionally ``nodes``, ``memory`` (the memory tiers) and ``kill``. With ``overhead_s``,
    what the first model says a checkpoint costs the training: the engine's stall (the copy for one that
    persists in the background, :data:`mlsysim.lab.pytorch.results.ASYNC`, else the copy and the write).
    With the memory tiers, ``memory_stall_s`` (the copy; for ``sync`` the copy and the write into the tier,
    a file in memory, at the copy rate) and ``memory_s`` (until the tiers hold it: the copy, the write into
    the tier and, on two nodes, the shard sent to the peer over the link). With a node lost (``kill`` of
    ``"node"``), ``recovery_s`` and ``recovery_storage_s``: the recovery from the peer's memory and from
    durable storage (:func:`mlsysim.lab.distributed.predict.predict_recovery`)."""
    from ..pytorch.results import ASYNC
    params = next(e["params"] for e in events if "params" in e)
    step_s = statistics.median([e["step_s"] for e in events if "loss" in e and e.get("step_s") is not None])
    machine = measure_dist_machine(directory, size_B=16e6)
    p = asdict(predict_job(12.0 * params, job["world_size"], job["mode"], machine, interval_s=job["every"] * step_s))
    p["overhead_s"] = p["concurrent_stall_s"] if job["engine"] in ASYNC else p["sync_stall_s"]
    nodes = job.get("nodes", 1)
    if job.get("memory"):
        copy, peer = p["copy_s"], p["rank_B"] / machine.link_Bps if nodes > 1 else 0.0
        p["memory_stall_s"] = copy if job["engine"] in ASYNC else 2 * copy
        p["memory_s"] = 2 * copy + peer
    if job.get("kill") == "node":
        rec = predict_recovery(12.0 * params, job["world_size"], nodes, machine)
        p["recovery_s"], p["recovery_storage_s"] = rec.peer_memory_s, rec.storage_s
    return p
