"""Collective communication times in the α–β model.

A message of S bytes between two ranks takes α + S/β: α the per-message latency
(s), β the **per-direction** link bandwidth of one rank (B/s). Collectives over n
ranks (Thakur, Rabenseifner & Gropp, IJHPCA 2005; Patarasuk & Yuan, JPDC 2009):

=====================  ===========================  ==========================
collective             latency term                 bandwidth term
=====================  ===========================  ==========================
ring all-reduce        2(n−1)·α                     2(n−1)/n · S/β
tree all-reduce        2·⌈log2 n⌉·α                 2 · S/β  (pipelined trees)
reduce-scatter         (n−1)·α                      (n−1)/n · S/β
all-gather             (n−1)·α                      (n−1)/n · S/β
all-to-all             (n−1)·α                      (n−1)/n · S/β
broadcast              ⌈log2 n⌉·α                   S/β      (pipelined)
point-to-point         α                            S/β
=====================  ===========================  ==========================

S is the per-rank buffer: the gradient each rank holds for an all-reduce, the
full (gathered) tensor for reduce-scatter and all-gather, the data each rank
sends in total for all-to-all. Assumptions: every rank drives its own link at
full rate at once (a non-blocking switch or NVSwitch; full bisection), no
compute or protocol overhead beyond α, and a single ring/tree per call.

A **hierarchical** all-reduce (the usual choice on clusters of 8-GPU nodes)
reduce-scatters inside each node over NVLink, all-reduces the 1/g shard across
nodes over each GPU's own NIC (all g rings run in parallel), then all-gathers
inside the node.

Worked number (tested): 1 GB ring all-reduce over the 8 GPUs of a DGX H100
(NVLink 4, 450 GB/s per direction, α ignored): 2·7/8·1e9/450e9 = 3.89 ms.
"""
from __future__ import annotations

import math

import numpy as np

from .errors import UnknownNameError, check_count, check_positive

ALGORITHMS = ("ring", "tree")


def _check(bytes_, n, bandwidth_Bps, latency_s):
    """Validate; return the mask of whole rank counts (None when every ``n`` is whole)."""
    check_positive("bytes_", bytes_, allow_zero=True)
    whole = check_count("n (ranks)", n, minimum=1)
    check_positive("bandwidth_Bps", bandwidth_Bps)
    check_positive("latency_s", latency_s, allow_zero=True)
    return whole


def _whole_only(whole, t):
    """NaN where a rank count of an array was fractional."""
    return t if whole is None else np.where(whole, t, np.nan)


def _log2ceil(n):
    return math.ceil(math.log2(n)) if np.ndim(n) == 0 else np.ceil(np.log2(n))


def _unless_single(n, t):
    """A collective over one rank moves nothing."""
    if np.ndim(n) == 0 and np.ndim(t) == 0:
        return t if n > 1 else 0.0
    return np.where(np.asarray(n) > 1, t, 0.0)


def _linear(bytes_, n, bandwidth_Bps, latency_s):
    """(n−1)·α + (n−1)/n·S/β: the shape shared by reduce-scatter, all-gather and all-to-all."""
    return (n - 1) * latency_s + (n - 1) / n * bytes_ / bandwidth_Bps


def allreduce_time(bytes_, n, bandwidth_Bps, latency_s=0.0, algorithm: str = "ring"):
    """Time to all-reduce ``bytes_`` per rank across ``n`` ranks (s).

    ring: 2(n−1)·α + 2(n−1)/n·S/β (bandwidth-optimal); tree: 2⌈log2 n⌉·α + 2·S/β
    (latency-optimal; pipelined double binary trees as in NCCL, Sanders et al. 2009).

    >>> round(allreduce_time(1e9, 8, 450e9) * 1e3, 2)
    3.89
    """
    whole = _check(bytes_, n, bandwidth_Bps, latency_s)
    if algorithm == "ring":
        return _whole_only(whole, 2 * (n - 1) * latency_s + 2 * (n - 1) / n * bytes_ / bandwidth_Bps)
    if algorithm == "tree":
        return _whole_only(whole, _unless_single(n, 2 * _log2ceil(n) * latency_s + 2 * bytes_ / bandwidth_Bps))
    raise UnknownNameError("all-reduce algorithm", algorithm, ALGORITHMS)


def reduce_scatter_time(bytes_, n, bandwidth_Bps, latency_s=0.0):
    """Ring reduce-scatter of a ``bytes_`` tensor per rank into n shards: (n−1)·α + (n−1)/n·S/β.

    >>> round(reduce_scatter_time(1e9, 8, 450e9) * 1e3, 3)
    1.944
    """
    return _whole_only(_check(bytes_, n, bandwidth_Bps, latency_s), _linear(bytes_, n, bandwidth_Bps, latency_s))


def all_gather_time(bytes_, n, bandwidth_Bps, latency_s=0.0):
    """Ring all-gather producing a ``bytes_`` tensor on every rank: (n−1)·α + (n−1)/n·S/β."""
    return _whole_only(_check(bytes_, n, bandwidth_Bps, latency_s), _linear(bytes_, n, bandwidth_Bps, latency_s))


def all_to_all_time(bytes_, n, bandwidth_Bps, latency_s=0.0):
    """All-to-all where each rank sends ``bytes_`` in total, 1/n to every rank (itself included):
    (n−1)·α + (n−1)/n·S/β on a full-bisection network."""
    return _whole_only(_check(bytes_, n, bandwidth_Bps, latency_s), _linear(bytes_, n, bandwidth_Bps, latency_s))


def broadcast_time(bytes_, n, bandwidth_Bps, latency_s=0.0):
    """Pipelined broadcast of ``bytes_`` from one rank to n: ⌈log2 n⌉·α + S/β (0 for n = 1)."""
    whole = _check(bytes_, n, bandwidth_Bps, latency_s)
    return _whole_only(whole, _unless_single(n, _log2ceil(n) * latency_s + bytes_ / bandwidth_Bps))


def p2p_time(bytes_, bandwidth_Bps, latency_s=0.0):
    """One point-to-point send: α + S/β."""
    _check(bytes_, 2, bandwidth_Bps, latency_s)
    return latency_s + bytes_ / bandwidth_Bps


def hierarchical_allreduce_time(bytes_, ranks_per_node, nodes, intra_Bps, inter_Bps,
                                intra_latency_s=0.0, inter_latency_s=0.0):
    """All-reduce across ``nodes`` × ``ranks_per_node`` ranks in three steps:
    reduce-scatter inside the node (β = ``intra_Bps``), ring all-reduce of each 1/g shard
    across nodes (β = ``inter_Bps``, each rank's own NIC share), all-gather inside the node.

    >>> t = hierarchical_allreduce_time(1e9, 8, 16, 450e9, 50e9)
    >>> round(t * 1e3, 2)   # 1.94 + 4.69 + 1.94 ms
    8.58
    """
    per_node, across_nodes = check_count("ranks_per_node", ranks_per_node), check_count("nodes", nodes)
    whole = per_node if across_nodes is None else across_nodes if per_node is None else per_node & across_nodes
    check_positive("intra_Bps", intra_Bps)
    check_positive("intra_latency_s", intra_latency_s, allow_zero=True)
    check_positive("inter_Bps", inter_Bps)
    check_positive("inter_latency_s", inter_latency_s, allow_zero=True)
    g = ranks_per_node
    inside = 2 * reduce_scatter_time(bytes_, g, intra_Bps, intra_latency_s)
    across = 2 * (nodes - 1) * inter_latency_s + 2 * (nodes - 1) / nodes * (bytes_ / g) / inter_Bps
    return _whole_only(whole, inside + across)
