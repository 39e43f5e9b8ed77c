"""The distributed lab's full-size benchmark, read without PyTorch.

``benchmarks/bench_lab_dist.py --record`` stores its run as ``lab/distributed/data/benchmark.json``
(schema ``mlsysim.lab.dist-benchmark/1``): per world size and state size, the stall and time to
the global commit of the sharded ``concurrent`` engine and of ``dcp.async_save``, the three
restores with bytes read per rank, each beside :mod:`mlsysim.lab.distributed.predict`'s prediction;
and at the largest size a node lost, recovered from peer memory and from durable storage.
:func:`recorded` reads it, :func:`targets` checks the benchmark's targets on it.
"""
from __future__ import annotations

import json
from importlib.resources import files

RECORD = "data/benchmark.json"


def recorded() -> dict:
    """The recorded full-size run (``dict``; see the module docstring for its layout)."""
    return json.loads(files(__package__).joinpath(RECORD).read_text(encoding="utf-8"))


def within(measured: float, predicted: float, factor: float = 2.0) -> bool:
    """``predicted / factor <= measured <= predicted x factor``.

    >>> within(1.5, 1.0), within(0.4, 1.0), within(2.0, 1.0)
    (True, False, True)
    """
    return predicted / factor <= measured <= predicted * factor


def targets(d: dict) -> list[tuple[str, bool, str]]:
    """The benchmark's targets as (name, met, the numbers), one per world size and state size:

    * the sharded concurrent engine's stall is at most half of ``dcp.async_save``'s;
    * the model is within x2 of the measured durable time and of the sharded restore time;
    * at the largest size, recovery from peer memory is at least 3x faster than from storage."""
    out = []
    for q in d["points"]:
        tag = f"{q['world_size']} ranks, {q['state_B'] / 1e6:.0f} MB"
        c, a, p = q["concurrent"], q["dcp_async"], q["predicted"]
        sh = next(r for r in q["restores"] if r["scheme"] == "sharded")
        out += [(f"{tag}: concurrent stall <= 1/2 of dcp.async_save's", c["stall_s"] <= 0.5 * a["stall_s"],
                 f"{c['stall_s']:.3f} s vs {a['stall_s']:.3f} s"),
                (f"{tag}: model within x2 of the durable time", within(c["durable_s"], p["durable_s"]),
                 f"measured {c['durable_s']:.3f} s, model {p['durable_s']:.3f} s"),
                (f"{tag}: model within x2 of the sharded restore", within(sh["restore_s"], sh["predicted"]["restore_s"]),
                 f"measured {sh['restore_s']:.3f} s, model {sh['predicted']['restore_s']:.3f} s")]
    for n in d["node_loss"]:
        peer, disk = n["recovery_s"], n["recovery_storage_s"]
        ok = peer is not None and disk is not None and 3 * peer <= disk
        out.append((f"{n['world_size']} ranks on 2 nodes, {n['state_B'] / 1e6:.0f} MB: peer memory >= 3x faster "
                    f"than storage", ok, f"{peer} s vs {disk} s" if peer is None or disk is None
                    else f"{peer:.3f} s vs {disk:.3f} s (storage / peer {disk / peer:.2f}x)"))
    return out
