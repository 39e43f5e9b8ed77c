"""Two torchrun agents on one machine, each a node with its own memory tier under /dev/shm: a node
SIGKILLed with every worker and its memory erased, a replacement joining with an empty memory, the
lost shards recovered from the peer replica on the survivor without a byte of durable storage and
every loss after it bit for bit; the fallback to durable storage once both memory copies are gone;
the elastic job going on alone on the surviving node at half the world size. Then the tiers'
placement and recovery plans without processes (hypothesis), and bad input. Nothing mocked; no
process and no memory tier is left behind."""
import json
import os
import statistics
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mlsysim.errors import MlsysimError
from mlsysim.lab.distributed import shards, tiers
from mlsysim.lab.distributed.launcher import DistributedRun, has_torch, node_loss_steps, run_distributed, running
from mlsysim.lab.distributed.tiers import Holding, memory_candidates, peer, plan_recovery, replica_source
from mlsysim.lab.engines import SyncEngine

needs_torch = pytest.mark.skipif(not has_torch(), reason="the distributed lab needs the torch extra")
STEPS, EVERY = 8, 2          # memory checkpoints at 2, 4, 6, 8; nodes lost at 4 and 6


def _strays(directory) -> list:
    """Live processes whose command line names ``directory`` (agents and workers carry ``--dir``)."""
    out = []
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                cmd = Path(f"/proc/{e}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if str(directory) in cmd and running(int(e)):
                out.append(int(e))
    return out


@pytest.fixture(scope="module")
def lost(tmp_path_factory):
    d = tmp_path_factory.mktemp("node-loss")
    return d, run_distributed(nproc=1, nodes=2, kill="node", engine="concurrent", steps=STEPS, every=EVERY,
                              directory=d, probe_terms=2)


@pytest.fixture(scope="module")
def elastic(tmp_path_factory, lost):
    d = tmp_path_factory.mktemp("elastic")
    return d, run_distributed(nproc=1, nodes=2, kill="node", replace=False, engine="concurrent", steps=STEPS,
                              every=EVERY, directory=d, reference=lost[1])


@needs_torch
def test_a_lost_node_comes_back_from_peer_memory_then_from_storage(lost):
    d, r = lost
    first, second = node_loss_steps(STEPS, EVERY)
    assert [k[1:] for k in r.kills] == [("node", first, "node-1"), ("node", second, "node-2")]
    # node-1 lost, node-2 joins empty: the newest memory checkpoint, the lost shard from the survivor's replica
    assert r.recovered_from == "peer-memory" and r.resumed_from[0] == first
    assert r.storage_bytes_read_per_rank == (0, 0)                              # not a byte from storage
    assert r.peer_bytes_per_rank[0] == 0 < r.peer_bytes_per_rank[1]             # the replacement received it
    # node-2 lost with the survivor's memory once checkpoint `second` was durable: from storage
    assert r.sources == ("peer-memory", "storage")
    assert r.resumed_from[1] == second
    assert all(b > 0 for b in r.bytes_read_per_rank)                            # every rank read its shard
    assert r.resumed_exactly is True                                            # every loss, bit for bit
    assert shards.global_steps(d / "killed")[-1] == STEPS                  # and it went on to the end
    assert r.world_size == 2 and r.nodes == 2 and 0 < r.recovery_s < 30 and 0 < r.recovery_storage_s < 30
    assert len(r.downtime_s) == 2 and all(r.recovery_s < t < 60 for t in r.downtime_s)   # seconds, not minutes
    # the job's own start (its launch until it first resumed) and the driver's teardown of each lost node,
    # the downtime's terms, measured in the same run: each teardown ends before the replacement starts
    assert 0 < r.start_s < 60 and len(r.teardown_s) == 2
    assert all(0 <= e < t for e, t in zip(r.teardown_s, r.downtime_s))
    # the engine's preparation of its buffers at the start and after each loss, inside each start and downtime
    assert len(r.prepares_s) == 3 and r.prepares_s[0] < r.start_s
    assert all(0 < p < t for p, t in zip(r.prepares_s[1:], r.downtime_s))
    # the uninterrupted job timed the recovery's transfer at its end: the lost node's shard, sent twice from the
    # survivor's replica; its newest checkpoint's, whose extras (the sampler's state) may take a few bytes more or
    # less than the one the replacement received
    t = r.job_terms
    assert abs(t["peer_transfer_B"] - r.peer_bytes_per_rank[1]) < 4096 and len(t["peer_transfer_each_s"]) == 2, \
        (t["peer_transfer_B"], r.peer_bytes_per_rank)
    assert 0 < t["peer_transfer_s"] == statistics.median(t["peer_transfer_each_s"]) < 30
    record = json.loads(json.dumps(r.to_dict()))
    assert record["world_size"] == 2 and record["storage_bytes_read_per_rank"] == [0, 0]
    assert {"nodes", "recovered_from", "recovery_s", "recovery_storage_s"} <= set(record)
    _nothing_left(d, r)


@needs_torch
def test_elastic_the_survivor_goes_on_alone_from_its_own_and_the_peer_replica(elastic, lost):
    d, e = elastic
    assert [k[1:] for k in e.kills] == [("node", node_loss_steps(STEPS, EVERY, replace=False)[0], "node-1")]
    assert e.recovered_from == "peer-memory" and e.storage_bytes_read_per_rank == (0,)
    assert e.peer_bytes_per_rank == (0,)                    # one node left: everything was in its memory
    assert e.reshard_to == 1 and e.reshard_equal is True    # every gathered tensor's CRC-32 as saved
    assert e.reshard_loss_max_abs < 1e-4                    # one rank instead of two: reduction order only
    assert e.reference_losses == lost[1].reference_losses   # the same uninterrupted run, not launched again
    _nothing_left(d, e)


def _nothing_left(d, r) -> None:
    """No process of the run is alive and its memory tiers are gone."""
    assert r.memory_root and r.memory_root.startswith(str(tiers.memory_base()))
    assert not Path(r.memory_root).exists()
    assert _strays(d) == []


# --- the tiers without processes -------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(nodes=st.integers(1, 5), per=st.integers(1, 4))
def test_replicas_form_a_ring_over_the_nodes(nodes, per):
    layout = tuple(f"n{i}" for i in range(nodes) for _ in range(per))
    peers = [peer(layout, r) for r in range(len(layout))]
    if nodes == 1:
        assert peers == [None] * per
        return
    assert sorted(peers) == list(range(len(layout)))                      # every rank holds one replica
    for r, p in enumerate(peers):
        assert layout[p] != layout[r] and p % per == r % per              # on another node, same local rank
        assert replica_source(layout, p) == r


def _gemini(nodes: int, per: int, step: int = 4) -> list:
    """What each node holds after a checkpoint: its ranks' shards and the previous node's."""
    layout = tuple(f"n{i}" for i in range(nodes) for _ in range(per))
    out = []
    for i in range(nodes):
        own = tuple(range(i * per, (i + 1) * per))
        reps = tuple(replica_source(layout, r) for r in own) if nodes > 1 else ()
        out.append(Holding(f"n{i}", step, nodes * per, own, reps))
    return out


@settings(max_examples=200, deadline=None)
@given(data=st.data(), nodes=st.integers(1, 4), per=st.integers(1, 3))
def test_a_recovery_plan_gives_every_rank_its_shards(data, nodes, per):
    world = nodes * per
    held = _gemini(nodes, per)
    lost = set(data.draw(st.sets(st.integers(0, nodes - 1), max_size=nodes - 1)))
    live = [h for h in held if int(h.node[1:]) not in lost]
    new_nodes = [h.node for h in live] + [f"spare{i}" for i in range(data.draw(st.integers(0, len(lost))))]
    new_per = data.draw(st.integers(1, 3))
    layout = tuple(n for n in new_nodes for _ in range(new_per))
    needs = [data.draw(st.sets(st.integers(0, world - 1), min_size=1)) for _ in layout]
    complete = bool(memory_candidates(live, None))
    covered = set().union(*(h.ranks() for h in live))
    assert complete == (covered >= set(range(world)))
    if not complete:
        return
    plan = plan_recovery(4, needs, layout, live)
    has = {h.node: set(h.ranks()) for h in live}
    sent = set()
    for t in plan.transfers:
        assert t.shard in has.get(layout[t.src], set()) and t.shard not in has.get(layout[t.dst], set())
        assert (t.shard, layout[t.dst]) not in sent                    # a node receives a shard once
        sent.add((t.shard, layout[t.dst]))
    for r, node in enumerate(layout):
        assert set(plan.reads[r]) == needs[r]
        assert needs[r] <= has.get(node, set()) | {s for s, n in sent if n == node}
    by_writer = {o: h.node for h in live for o in h.own}
    mine = all(by_writer.get(o) == layout[r] for r in range(len(layout)) for o in needs[r])
    assert plan.source == ("memory" if mine else "peer-memory")


def test_memory_older_than_storage_or_incomplete_is_not_a_candidate():
    a, b = _gemini(2, 1)                                  # a holds 0 (own) and 1, b holds 1 and 0
    assert memory_candidates([a, b], None) == [4] and memory_candidates([a], 4) == [4]
    assert memory_candidates([a], 6) == []                # storage is newer: read it
    older = Holding("b", 2, 2, own=(1,), replicas=(0,))
    assert memory_candidates([a, older], None) == [4, 2]  # newest first
    other_world = Holding("b", 4, 4, own=(2, 3), replicas=(0, 1))
    assert memory_candidates([a, other_world], None) == []
    with pytest.raises(MlsysimError, match="no live node holds the shard of rank 1"):
        plan_recovery(4, [{0, 1}], ("a",), [Holding("a", 4, 2, own=(0,), replicas=())])


def test_a_node_tier_on_disk_is_surveyed_shard_by_shard(tmp_path):
    """Write a node's memory tier as the worker does (its own shard, the peer's replica, the node's
    record), then lose the replica's data file: the survey no longer counts it."""
    node = tiers.node_dir(tmp_path, "node-0")
    records = []
    for r in (0, 1):
        SyncEngine(shards.rank_dir(node, r), keep=10 ** 9).save(4, {"tensors": {"w": np.arange(3.0) + r}})
        records.append(shards.shard_record(node, 4, r, 2, "fsdp", {}))
    shards.write_global_commit(node, 4, records, "test", extra=tiers.node_record("node-0", [0], [1]))
    [(h, rec)] = tiers.survey(node)
    assert h == Holding("node-0", 4, 2, own=(0,), replicas=(1,)) and rec["node"] == "node-0"
    (shards.rank_dir(node, 1) / "ckpt-000000004.data").unlink()
    assert tiers.survey(node)[0][0].replicas == ()


def test_names_and_layouts_are_checked():
    assert tiers.node_name({"MLSYSIM_NODE": "node-7"}) == "node-7"
    with pytest.raises(MlsysimError, match="MLSYSIM_NODE must be"):
        tiers.node_name({"MLSYSIM_NODE": "../etc"})
    with pytest.raises(MlsysimError, match="node name must be"):
        tiers.node_dir("/dev/shm/x", "a/b")
    with pytest.raises(MlsysimError, match="as many ranks as the others"):
        tiers.node_ranks(("a", "a", "b"))


@pytest.mark.parametrize("kw, says", [
    ({"nodes": 3}, "nodes must be 1 or 2"),
    ({"kill": "node"}, "kill='node' needs nodes=2"),
    ({"kill": "node", "nodes": 2, "engine": "dcp"}, "needs this package's engines"),
    ({"replace": False}, "applies to kill='node' only"),
    ({"kill": "node", "nodes": 2, "steps": 4}, "needs 2 checkpoint"),
    ({"persist_every": 0}, "persist_every must be a positive integer"),
    ({"kill": "disk"}, "kill must be one of"),
    ({"nproc": 3, "nodes": 2}, "world size of 6 cannot split"),
])
def test_bad_input_is_refused_before_anything_starts(kw, says):
    with pytest.raises(MlsysimError, match=says):
        run_distributed(**kw)


def test_a_reference_of_another_job_is_refused():
    ref = DistributedRun(engine="concurrent", mode="fsdp", world_size=2, steps=8, kills=(), resumed_from=(),
                         resumed_exactly=None, reshard_to=None, reshard_equal=None, reshard_loss_max_abs=None,
                         stall_s=0.0, durable_s=0.0, bytes_read_per_rank=(), wall_s=0.0, nodes=2,
                         reference_losses=(1.0,) * 8)
    with pytest.raises(MlsysimError, match="its seed is 0, this one's 1"):
        run_distributed(nproc=1, nodes=2, kill="node", seed=1, reference=ref)
