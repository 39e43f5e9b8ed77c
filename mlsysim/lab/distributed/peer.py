"""A shard sent from one node's memory tier to another's (gloo point to point), and the probe that times it in
the job (needs PyTorch, imported by the worker that calls it).

The sender maps the file (no copy) and sends it in ``store.CHUNK_B`` chunks, its CRC-32 computed chunk by chunk on
the way (:func:`send_file`); the receiver takes the chunks into two buffers, the next arriving while the one before
is written into its node's memory tier (:func:`receive_file`, :func:`mlsysim.lab.store.write_durable`). A
recovery from peer memory sends the lost node's shards this way, one pair per lost rank, all pairs at once.

:func:`probe_transfer` times that transfer in the uninterrupted job, once its last memory checkpoint is complete on
every node: the shards of the last node's ranks (the node the lab loses) sent from the first node's replicas, as
:func:`~mlsysim.lab.distributed.tiers.plan_recovery` plans them, each received into a scratch file of the
receiver's memory tier and deleted after. Why it is timed whole and not built from the floors: in the kept runs
``lab_dist-2026-12-06g`` to ``-07c`` the transfer of a gigabyte's lost half took 0.30 to 0.37 s in both layouts
(2 nodes x 1 and x 2; the mean of a run's losses), where the terms built from gloo's pair rate, the CRC-32 and the page cache's write rate gave
0.21 to 0.47 s, the 2 x 2 one the lower in every run. The floors do not hold what the transfer meets: the receivers
write into the memory tier (``/dev/shm``), not a file's page cache (``cache_write_Bps``); and on 2 nodes x 2 four
processes share the two cores, each pair's chunks waiting for a core as well as for the loopback.
"""
from __future__ import annotations

import errno
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from .. import store
from ..checksum import crc32
from . import tiers


def spans(size: int) -> list[tuple[int, int]]:
    """The [start, stop) byte ranges of ``size`` bytes sent between ranks, ``store.CHUNK_B`` each."""
    return [(lo, min(size, lo + store.CHUNK_B)) for lo in range(0, size, store.CHUNK_B)]


def send_file(path: Path, size: int, dst: int, group) -> tuple[int | None, str | None]:
    """Send the ``size`` bytes of ``path`` to rank ``dst`` from the file's mapping, chunk by chunk; returns
    (their CRC-32, None), or (None, the error) where the file cannot be mapped or is not ``size`` bytes long:
    zeros are sent then, so that the receiver, waiting for the bytes, ends and its check refuses them."""
    error, data = None, None
    try:
        if path.stat().st_size != size:
            raise store.CheckpointError(errno.EIO, f"{path}: {path.stat().st_size} B, the record names {size} B")
        data = store.map_file(path, size)
    except OSError as e:                        # a CheckpointError is one
        error = str(e)
    zeros = np.zeros(min(size, store.CHUNK_B), dtype=np.uint8) if data is None else None
    crc = 0
    for lo, hi in spans(size):
        chunk = data[lo:hi] if data is not None else zeros[:hi - lo]
        crc = crc32(chunk, crc)
        dist.send(torch.from_numpy(chunk), dst, group=group)
    return (crc, None) if error is None else (None, error)


def receive_file(path: Path, size: int, src: int, group) -> tuple[int, int]:
    """Receive ``size`` bytes from rank ``src`` into ``path`` (durable, :func:`mlsysim.lab.store.write_durable`),
    each chunk written as it arrives while the next one comes into a second buffer; returns (bytes, CRC-32)."""
    bounds = spans(size)
    bufs = [torch.empty(min(size, store.CHUNK_B), dtype=torch.uint8) for _ in range(2)]

    def arriving():
        work = dist.irecv(bufs[0][:bounds[0][1] - bounds[0][0]], src, group=group) if bounds else None
        for i, (lo, hi) in enumerate(bounds):
            work.wait()
            if i + 1 < len(bounds):
                nlo, nhi = bounds[i + 1]
                work = dist.irecv(bufs[(i + 1) % 2][:nhi - nlo], src, group=group)
            yield bufs[i % 2][:hi - lo].numpy()

    return store.write_durable(path, arriving())


def lost_node_pairs(layout: tuple) -> list[tuple[int, int]]:
    """(shard, sender) for each rank of the last node in ``layout`` (each rank's node), the sender the first
    node's rank ``shard mod ranks per node``, as :func:`~mlsysim.lab.distributed.tiers.plan_recovery` plans a
    replacement's recovery; the shard goes to its own rank.

    >>> lost_node_pairs(("a", "a", "b", "b"))
    [(2, 0), (3, 1)]
    """
    by_node = tiers.node_ranks(layout)
    first, last = by_node[layout[0]], by_node[layout[-1]]
    return [(s, first[s % len(first)]) for s in last]


def probe_transfer(group, node_dir: Path, layout: tuple, repeats: int) -> dict:
    """Every rank calls it: ``repeats`` timings (barrier to barrier) of the lost node's shards of the newest
    memory checkpoint sent from the first node as a replacement's recovery sends them (:func:`lost_node_pairs`),
    each received into ``peer-probe-<rank>.bin`` in the receiver's ``node_dir`` and deleted after; returns
    ``peer_transfer_s`` (the median), ``peer_transfer_each_s`` and ``peer_transfer_B`` (the bytes sent)."""
    rank = dist.get_rank(group)
    held = tiers.survey(node_dir)
    record = held[0][1] if held else None
    pairs = lost_node_pairs(layout)
    if rank in {src for _, src in pairs} and record is None:
        raise store.CheckpointError(errno.ENOENT, f"{node_dir}: no memory checkpoint to send")
    sizes = [None] * dist.get_world_size(group)
    dist.all_gather_object(sizes, {s: r["size_B"] for s, r in enumerate(record["shards"])} if record else {},
                           group=group)
    size_of = {k: v for part in sizes for k, v in part.items()}
    each, scratch = [], node_dir / f"peer-probe-{rank}.bin"
    for _ in range(repeats):
        dist.barrier(group=group)
        t0 = time.perf_counter()
        for shard, src in pairs:
            if rank == src:
                send_file(node_dir / record["shards"][shard]["file"], size_of[shard], shard, group)
            elif rank == shard:
                receive_file(scratch, size_of[shard], src, group)
        dist.barrier(group=group)
        each.append(time.perf_counter() - t0)
        if scratch.exists():
            os.unlink(scratch)
    return {"peer_transfer_s": statistics.median(each), "peer_transfer_each_s": each,
            "peer_transfer_B": sum(size_of[s] for s, _ in pairs)}
