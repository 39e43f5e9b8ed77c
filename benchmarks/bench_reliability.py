"""Reliability and checkpointing: single calls (≤ 50 µs each) and vectorised sweeps."""
import numpy as np

import mlsysim as ms
from run import Bench

_c = ms.cluster("dgx-h100", nodes=128)
_m = ms.model("llama-3-70b")
_tau = np.geomspace(10.0, 1e5, 1_000_000)
_nodes = np.arange(4, 4100, 4, dtype=float)[:, None]


def _ck(strategy, **kw):
    return lambda: ms.checkpoint(_m, _c, strategy=strategy, tp=8, pp=4, **kw)


BENCHMARKS = [
    Bench("cluster_mtbf_h()", lambda: ms.cluster_mtbf_h(_c), "<= 50 µs"),
    Bench("young_interval_s()", lambda: ms.young_interval_s(30.0, 11000.0), "<= 50 µs"),
    Bench("daly_interval_s()", lambda: ms.daly_interval_s(30.0, 11000.0), "<= 50 µs"),
    Bench("ettr()", lambda: ms.ettr(900.0, 30.0, 11000.0, 600.0), "<= 50 µs"),
    Bench("goodput(), stall in seconds", lambda: ms.goodput(_c, checkpoint=30.0), "<= 50 µs"),
    Bench("checkpoint(), sync", _ck("sync"), "<= 50 µs"),
    Bench("checkpoint(), async", _ck("async"), "<= 50 µs"),
    Bench("checkpoint(), in-memory", _ck("in-memory"), "<= 50 µs"),
    Bench("checkpoint(), by registry names",
          lambda: ms.checkpoint("llama-3-70b", _c, strategy="async", tp=8, pp=4), "<= 50 µs"),
    Bench("checkpoint() sweep over 1e6 intervals", _ck("async", interval_s=_tau), ">= 1e6 points/s",
          points=_tau.size, calls=1),
    Bench("checkpoint() sweep, 1,024 cluster sizes x 1,000 intervals",
          _ck("in-memory", nodes=_nodes, interval_s=_tau[None, ::1000]), ">= 1e6 points/s",
          points=_nodes.size * 1000, calls=1),
]
