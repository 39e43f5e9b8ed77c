"""The distributed lab's refined model: its measured terms, its formulas with worked numbers, the
overhead per checkpoint, the record's table of every figure, and bad input."""
import copy
import dataclasses
import json
import math
import os
import statistics
import time

import numpy as np
import pytest

from mlsysim.errors import MlsysimError
from mlsysim.lab.distributed import terms
from mlsysim.lab.distributed.results import (EARLIER, across, against_others, cycles_needed, load_records, model_table,
                                             spread, overhead_resolution, own_start_only, probed_apart, recorded,
                                             remodel, staged_back_to_back, durable_split, first_probes,
                                             standard_error, targets)

T = terms.Terms(cores=2, world=2, copy_Bps=10e9, parallel_copy_Bps=10e9, parallel_fresh_Bps=5e9, fresh_copy_Bps=5e9,
                crc_Bps=20e9, cache_write_Bps=4e9, write_Bps=1e9, read_cold_Bps=2e9, bcast_Bps=1e9, pair_Bps=1e9)


def test_cores_shared():
    assert terms.share(4, 2) == 2.0 and terms.share(2, 2) == 1.0 and terms.share(1, 4) == 1.0
    with pytest.raises(MlsysimError, match="threads"):
        terms.share(0, 2)


def test_the_job_worked_numbers():
    j = terms.refined_job(dataclasses.replace(T, torch_crc_Bps=4e9, sync_s=0.01), 1e9, "fsdp")
    c, a = j["concurrent"], j["dcp-async"]
    # R = 0.5 GB + 16 kB per rank; copies of both ranks at once 1 GB / 10 GB/s; each writer's CPU work,
    # (1/20 + 1/4) s/GB (2 writers on 2 cores, a core each), beside the disk's 1 s: the longer, and of the
    # shorter one chunk's share (30 chunks of 16 MiB per rank: the first chunk's copy, the last one's writeback)
    assert round(c["stall_s"], 4) == 0.1 and round(c["durable_s"], 3) == round(0.1 + 1.0 + 0.15 / 30 + 0.02, 3)
    assert j["terms"]["pipeline_fill_s"] == pytest.approx(0.15 / 30, rel=1e-3)
    assert round(c["overhead_s"], 3) == 0.25 and j["terms"]["share_training"] == 2.0
    # DCP stages into new memory (5 GB/s) and torch.save's CRC (4 GB/s): (1/4 + 1/4) s/GB, then the disk
    assert round(a["stall_s"], 3) == 0.2 and round(a["durable_s"], 3) == round(0.2 + 0.25 + 1.0 + 0.02, 3)
    assert round(a["overhead_s"], 3) == 0.45
    assert "dcp-async" not in terms.refined_job(T, 1e9)      # no torch CRC rate measured: no DCP prediction
    # this package's fixed cost per save, 10 ms: in the stall and in everything built on it
    fixed = terms.refined_job(dataclasses.replace(T, torch_crc_Bps=4e9, sync_s=0.01, own_stall_s=0.01), 1e9)
    assert all(round(fixed["concurrent"][k] - c[k], 6) == 0.01 for k in ("stall_s", "durable_s", "overhead_s"))
    # each engine's fixed cost to the training steps beside a save (its background work's included), where
    # measured: 50 ms for this package's, 0.1 s for DCP's, in place of the fixed stall in the overhead only
    probe = dict(torch_crc_Bps=4e9, sync_s=0.01, own_stall_s=0.01, dcp_stall_s=0.02)
    stalls = terms.refined_job(dataclasses.replace(T, **probe), 1e9)
    costs = terms.refined_job(dataclasses.replace(T, **probe, own_overhead_s=0.05, dcp_overhead_s=0.1), 1e9)
    assert round(costs["concurrent"]["overhead_s"] - stalls["concurrent"]["overhead_s"], 6) == 0.04
    assert round(costs["dcp-async"]["overhead_s"] - stalls["dcp-async"]["overhead_s"], 6) == 0.08
    assert all(costs[e][k] == stalls[e][k] for e in ("concurrent", "dcp-async") for k in ("stall_s", "durable_s"))
    # a fixed cost measured below the fixed stall (two noisy timings) leaves the stall's
    noisy = terms.refined_job(dataclasses.replace(T, **probe, own_overhead_s=-0.01, dcp_overhead_s=0.0), 1e9)
    assert noisy["concurrent"] == stalls["concurrent"] and noisy["dcp-async"] == stalls["dcp-async"]
    # staged into PyTorch's own new tensors at 2 GB/s (4 KB pages) instead of NumPy's 5 GB/s: 0.3 s more,
    # in the stall and everything built on it
    small = terms.refined_job(dataclasses.replace(T, torch_crc_Bps=4e9, sync_s=0.01, torch_fresh_Bps=2e9), 1e9)
    assert all(round(small["dcp-async"][k] - a[k], 3) == 0.3 for k in ("stall_s", "durable_s", "overhead_s"))
    assert small["concurrent"] == c
    # DCP's staging timed at the job's size (two copies of every DTensor's bytes): 0.4 GB/s for the 1 GB in place of
    # F_N's 2 GB/s, 2.5 s in place of 0.5 s; the probe's own staging (15 ms) leaves its fixed stall (20 ms) and its
    # cost to the steps (40 ms), since the job's staging is in the 2.5 s
    staged = dict(torch_crc_Bps=4e9, sync_s=0.01, torch_fresh_Bps=2e9, dcp_stall_s=0.02, dcp_overhead_s=0.04)
    one = terms.refined_job(dataclasses.replace(T, **staged), 1e9)["dcp-async"]
    two = terms.refined_job(dataclasses.replace(T, **staged, dcp_stage_Bps=0.4e9, dcp_stage_small_s=0.015),
                            1e9)["dcp-async"]
    copied = 1e9 + 2 * terms.EXTRAS_PER_RANK_B
    assert two["stall_s"] == pytest.approx(one["stall_s"] + copied * (1 / 0.4e9 - 1 / 2e9) - 0.015)
    assert two["durable_s"] - one["durable_s"] == pytest.approx(two["stall_s"] - one["stall_s"])
    assert two["overhead_s"] == pytest.approx(one["overhead_s"] + copied * (1 / 0.4e9 - 1 / 2e9) - 0.015)
    # rank 0's own staging, 0.5 GB/s where the slowest rank's took 0.4: the stall is rank 0's alone, while the
    # time to durable and the overhead wait for the slowest rank
    own = terms.refined_job(dataclasses.replace(T, **staged, dcp_stage_Bps=0.4e9, dcp_stage_small_s=0.015,
                                                dcp_stage_own_Bps=0.5e9), 1e9)["dcp-async"]
    assert own["stall_s"] == pytest.approx(two["stall_s"] - copied * (1 / 0.4e9 - 1 / 0.5e9))
    assert (own["durable_s"], own["overhead_s"]) == (two["durable_s"], two["overhead_s"])
    with pytest.raises(MlsysimError, match="dcp_stage_own_Bps"):
        dataclasses.replace(T, dcp_stage_own_Bps=0.0)
    # a small collective of 10 ms: the shard records gathered once; DCP's plans gathered and scattered first
    lat = terms.refined_job(dataclasses.replace(T, torch_crc_Bps=4e9, latency_s=0.01), 1e9)
    base = terms.refined_job(dataclasses.replace(T, torch_crc_Bps=4e9), 1e9)
    assert round(lat["concurrent"]["durable_s"] - base["concurrent"]["durable_s"], 6) == 0.01
    assert round(lat["dcp-async"]["stall_s"] - base["dcp-async"]["stall_s"], 6) == 0.02
    # each engine's time to durable timed beside the training's steps stands for its fixed cost until durable:
    # this package's 50 ms to the global record, its call's 10 ms aside, in place of 2 z + l (20 ms); DCP's
    # 80 ms in place of d_d (50 ms)
    beside = terms.refined_job(dataclasses.replace(T, torch_crc_Bps=4e9, sync_s=0.01, own_stall_s=0.01,
                                                   own_durable_beside_s=0.05, dcp_durable_s=0.05,
                                                   dcp_durable_beside_s=0.08), 1e9)
    alone = terms.refined_job(dataclasses.replace(T, torch_crc_Bps=4e9, sync_s=0.01, own_stall_s=0.01,
                                                  dcp_durable_s=0.05), 1e9)
    assert round(beside["concurrent"]["durable_s"] - alone["concurrent"]["durable_s"], 6) == 0.04 - 0.02
    assert round(beside["dcp-async"]["durable_s"] - alone["dcp-async"]["durable_s"], 6) == 0.03
    assert all(beside[e][k] == alone[e][k] for e in ("concurrent", "dcp-async") for k in ("stall_s", "overhead_s"))
    # memory the host took back: DCP's write of R = 0.5 GB at 1 GB/s instead of 4 GB/s, 0.375 s more per rank,
    # once the training after the older checkpoint's deletion outlasts the kernel's 2 s delay; 2 writers on 2
    # cores, a core each
    back = dataclasses.replace(T, torch_crc_Bps=4e9, sync_s=0.01, reclaimed_write_Bps=1e9)
    late, soon = terms.refined_job(back, 1e9, gap_s=10.0), terms.refined_job(back, 1e9, gap_s=1.0)
    rank_extra = (0.5e9 + terms.EXTRAS_PER_RANK_B) * (1 / 1e9 - 1 / 4e9)
    assert round(rank_extra, 3) == 0.375 and terms.RECLAIM_DELAY_S == 2.0 and soon["dcp-async"] == a
    assert late["dcp-async"]["durable_s"] == pytest.approx(a["durable_s"] + rank_extra)
    assert late["dcp-async"]["overhead_s"] == pytest.approx(a["overhead_s"] + 2 * rank_extra / 2)
    assert late["concurrent"] == c and late["dcp-async"]["stall_s"] == a["stall_s"]   # its own window: no change
    # two writers at once share the disk: 0.5 GB/s for both instead of 1 GB/s for one, 1 s more
    shared = terms.refined_job(dataclasses.replace(T, shared_write_Bps=0.5e9), 1e9)["concurrent"]["durable_s"]
    assert round(shared - terms.refined_job(T, 1e9)["concurrent"]["durable_s"], 3) == 1.0
    # two readers at once: the sharded restore reads at their shared rate
    slow = terms.refined_restore(dataclasses.replace(T, shared_read_Bps=1e9), "sharded", 1e9)
    assert round(slow - terms.refined_restore(T, "sharded", 1e9), 3) == 0.5
    # the shards' own read, timed in the restore job, stands for the shared rate: 1 GB at 4 GB/s, not 1 GB/s
    timed = terms.refined_restore(dataclasses.replace(T, shared_read_Bps=1e9, shard_read_Bps=4e9), "sharded", 1e9)
    assert round(slow - timed, 3) == 0.75


def test_each_engine_s_fixed_cost_to_the_training_is_its_save_s_cpu_where_measured():
    # the saves of the job at its smallest width cost its short steps 50 ms (this package's) and 0.1 s (DCP's) of
    # their time, but 3 ms and 50 ms of CPU: the CPU stands for the time, N x / C (each rank's on its own core)
    probe = dict(torch_crc_Bps=4e9, sync_s=0.01, own_stall_s=0.01, dcp_stall_s=0.02, dcp_stage_Bps=0.4e9,
                 dcp_stage_small_s=0.015, own_overhead_s=0.05, dcp_overhead_s=0.1)
    wall = terms.refined_job(dataclasses.replace(T, **probe), 1e9)
    cpu = terms.refined_job(dataclasses.replace(T, **probe, own_overhead_cpu_s=0.003, dcp_overhead_cpu_s=0.05), 1e9)
    # this package's: no less than its stall (10 ms), in place of 50 ms
    assert cpu["concurrent"]["overhead_s"] == pytest.approx(wall["concurrent"]["overhead_s"] - 0.04)
    # DCP's: its CPU less its staging (in the copy), 35 ms, in place of 0.1 - 0.015 s
    assert cpu["dcp-async"]["overhead_s"] == pytest.approx(wall["dcp-async"]["overhead_s"] - (0.085 - 0.035))
    assert all(cpu[e][k] == wall[e][k] for e in ("concurrent", "dcp-async") for k in ("stall_s", "durable_s"))
    # 4 ranks on 2 cores: each rank's CPU costs the job twice its seconds; the staging's 15 ms, every rank at
    # once, is 7.5 ms of a rank's CPU: 2 x (0.05 - 0.0075) s
    four = dataclasses.replace(T, world=4, **probe, own_overhead_cpu_s=0.02, dcp_overhead_cpu_s=0.05)
    two = terms.refined_job(four, 1e9)
    fixed = terms.refined_job(dataclasses.replace(four, own_overhead_cpu_s=0.0, dcp_overhead_cpu_s=0.0075), 1e9)
    assert two["concurrent"]["overhead_s"] - fixed["concurrent"]["overhead_s"] == pytest.approx(0.04 - 0.01)
    assert two["dcp-async"]["overhead_s"] - fixed["dcp-async"]["overhead_s"] == pytest.approx(0.085 - 0.005)
    # where w_d (the writer's CPU in the job) stands for DCP's writer, it holds the writer's cost per save: the
    # probe's writer thread (w_s, 10 ms) leaves x_d
    w = dict(writer_cpu_s_per_B=1e-9, dcp_writer_cpu_s=0.3, own_overhead_cpu_s=0.003, dcp_overhead_cpu_s=0.05)
    held = terms.refined_job(dataclasses.replace(T, **probe, **w), 1e9)["dcp-async"]
    less = terms.refined_job(dataclasses.replace(T, **probe, **w, dcp_writer_small_cpu_s=0.01), 1e9)["dcp-async"]
    assert held["overhead_s"] - less["overhead_s"] == pytest.approx(0.01)
    assert cpu["dcp-async"] == terms.refined_job(dataclasses.replace(T, **probe, own_overhead_cpu_s=0.003,
                                                                     dcp_overhead_cpu_s=0.05,
                                                                     dcp_writer_small_cpu_s=0.01), 1e9)["dcp-async"]
    with pytest.raises(MlsysimError, match="dcp_writer_small_cpu_s must be a measured time >= 0 s or None"):
        dataclasses.replace(T, dcp_writer_small_cpu_s=-0.01)
    with pytest.raises(MlsysimError, match="own_overhead_cpu_s must be a measured time in seconds or None"):
        dataclasses.replace(T, own_overhead_cpu_s=math.nan)


def test_the_restores_and_recoveries_worked_numbers():
    got = {s: round(terms.refined_restore(T, s, 1e9), 3) for s in ("sharded", "broadcast", "replicated")}
    # sharded: 0.5 read + 0.05 faults + 0.1 load; broadcast: 0.5 + 0.15 + 1.0 gloo + 0.2; replicated: 0.5 + 0.15 + 0.2
    assert got == {"sharded": 0.65, "broadcast": 1.85, "replicated": 0.85}
    # the state's own broadcast into the receivers' new tensors at 0.5 GB/s in place of gloo's 1 GB/s: 1 s more
    fresh = terms.refined_restore(dataclasses.replace(T, bcast_state_Bps=0.5e9), "broadcast", 1e9)
    assert round(fresh - got["broadcast"], 3) == 1.0
    # both ranks reading the same file at once at 0.5 GB/s in all: 1 s more than one reader at 2 GB/s
    same = terms.refined_restore(dataclasses.replace(T, same_read_Bps=0.5e9), "replicated", 1e9)
    assert round(same - got["replicated"], 3) == 1.5
    # the ranks' new tensors as the restore job times them, 0.5 ns per byte of a rank's (1 GB replica, 0.5 GB
    # shard), in place of the faults NumPy's threads show (a = 1/5 - 1/10 s/GB: 0.1 s and 0.05 s); a median
    # below zero (noise in a difference) counts as nothing
    new = dataclasses.replace(T, new_tensor_ddp_s_per_B=0.5e-9, new_tensor_fsdp_s_per_B=0.5e-9)
    assert round(terms.refined_restore(new, "replicated", 1e9) - got["replicated"], 3) == 0.4
    assert round(terms.refined_restore(new, "sharded", 1e9) - got["sharded"], 3) == 0.2
    assert round(terms.refined_restore(new, "broadcast", 1e9), 3) == got["broadcast"]   # rank 0 alone reads
    none = dataclasses.replace(T, new_tensor_ddp_s_per_B=-0.1e-9)
    assert round(got["replicated"] - terms.refined_restore(none, "replicated", 1e9), 3) == 0.1
    r = terms.refined_recovery(dataclasses.replace(T, start_s=5.0), 1e9)
    # the shard (0.5 GB) over the pair at 1 GB/s, beside the slower side: the sender's mapping and check
    # (1/5 + 1/20 s/GB) or the receiver's check and write (1/20 + 1/4 s/GB); then read back (1/5 + 1/20)
    # and loaded by both ranks at 10 GB/s: 0.5 + 0.15 + 0.125 + 0.1
    assert round(r["peer_memory_s"], 3) == 0.875 and round(r["storage_s"], 3) == 0.65
    assert math.isclose(r["downtime_peer_s"], 5.0 + r["peer_memory_s"]) and terms.DETECT_S == 2.0
    assert "downtime_peer_s" not in terms.refined_recovery(T, 1e9)   # no start measured, no downtime
    # the driver's teardown of each lost node comes before the replacement's start: it adds to that loss's downtime
    torn = terms.refined_recovery(dataclasses.replace(T, start_s=5.0), 1e9, teardown_s=(0.25, 0.5))
    assert round(torn["downtime_peer_s"] - r["downtime_peer_s"], 3) == 0.25
    assert round(torn["downtime_storage_s"], 3) == round(0.5 + 5.0 + 0.65, 3)
    for bad in ((0.1,), (-0.1, 0.0), (0.0, math.inf), (0.0, "1")):
        with pytest.raises(MlsysimError, match="teardown_s must be two finite seconds"):
            terms.refined_recovery(dataclasses.replace(T, start_s=5.0), 1e9, teardown_s=bad)
    # the tier's file mapped in place and checked at 10 GB/s, where measured, in place of a copy into new
    # memory and a check (1/5 + 1/20 s/GB): the sender's side 0.05 s, below the receiver's 0.15 s; read back 0.05
    m = terms.refined_recovery(dataclasses.replace(T, map_read_Bps=10e9), 1e9)
    assert round(m["peer_memory_s"], 3) == round(0.5 + 0.15 + 0.05 + 0.1, 3) and m["storage_s"] == r["storage_s"]
    # both ranks' read back timed at once, 4 GB/s in all, in place of one's mapped read shared: 2 x 0.5 / 4 = 0.25 s
    both = terms.refined_recovery(dataclasses.replace(T, map_read_Bps=10e9, parallel_map_read_Bps=4e9), 1e9)
    assert round(both["peer_memory_s"], 3) == round(0.5 + 0.15 + 0.25 + 0.1, 3)
    # the transfer as the job timed it, 0.6 ns a byte of the lost node's shards, in place of gloo's pair and the two
    # sides' work (0.5 + 0.15 s): 2 ranks on 2 nodes lose one, 0.5 GB x 0.6 ns = 0.3 s; on 4 ranks the lost node
    # holds two shards of 0.25 GB, the same 0.3 s; pair_Bps is not needed then
    x = dataclasses.replace(T, job_peer_transfer_s_per_B=0.6e-9, pair_Bps=None)
    assert round(terms.refined_recovery(x, 1e9)["peer_memory_s"], 3) == round(0.3 + 0.125 + 0.1, 3)
    four = terms.refined_recovery(dataclasses.replace(x, world=4), 1e9)["peer_memory_s"]
    plain4 = terms.refined_recovery(dataclasses.replace(T, world=4), 1e9)["peer_memory_s"]
    send4 = 0.25 + 2 * 0.25 * 0.3     # the old transfer on 4: 0.25 GB over the pair + the slower side, shared
    assert round(four - 0.3, 3) == round(plain4 - send4, 3)     # the read back and load as before


@pytest.mark.parametrize("call, match", [
    (lambda: terms.refined_restore(dataclasses.replace(T, bcast_Bps=None), "broadcast", 1e9), "bcast_Bps"),
    (lambda: terms.refined_restore(T, "mirrored", 1e9), "scheme must be one of"),
    (lambda: terms.refined_recovery(dataclasses.replace(T, pair_Bps=None), 1e9), "pair_Bps"),
    (lambda: dataclasses.replace(T, job_peer_transfer_s_per_B=0.0), "job_peer_transfer_s_per_B must be measured"),
    (lambda: terms.refined_job(T, -1.0), "size_B"),
    (lambda: terms.refined_job(T, 1e9, "zero"), "mode must be"),
    (lambda: dataclasses.replace(T, crc_Bps=float("nan")), "crc_Bps must be a measured rate"),
    (lambda: dataclasses.replace(T, write_Bps=0.0), "write_Bps must be a measured rate"),
    (lambda: dataclasses.replace(T, bcast_state_Bps=0.0), "bcast_state_Bps must be a measured rate"),
    (lambda: dataclasses.replace(T, own_stall_s=-1.0), "own_stall_s must be a measured time"),
    (lambda: dataclasses.replace(T, own_durable_beside_s=math.inf), "own_durable_beside_s must be a measured time"),
    (lambda: dataclasses.replace(T, dcp_durable_beside_s=-0.1), "dcp_durable_beside_s must be a measured time"),
    (lambda: dataclasses.replace(T, dcp_overhead_s=math.nan), "dcp_overhead_s must be a measured time"),
    (lambda: terms.overhead_per_checkpoint([], 2, 1), "plain must be an integer >= 2"),
    (lambda: terms.overhead_per_checkpoint([{"step": 5, "t": 1.0}], 2, 4), "no plain step was timed"),
    (lambda: terms.parallel_copy_Bps(0, 2), "size_B"),
    (lambda: terms.parallel_copy_Bps(1e6, 2, piece_B=0.0), "piece_B"),
    (lambda: terms.parallel_copy_Bps(1e6, 2, piece_B=math.nan), "piece_B"),
    (lambda: dataclasses.replace(T, copy_piece_B=0.0), "copy_piece_B must be a size > 0 B"),
    (lambda: dataclasses.replace(T, shared_write_B=-1.0), "shared_write_B must be a size > 0 B"),
    (lambda: terms.shared_write_Bps(None, 0.0, 2), "size_B"),
    (lambda: terms.shared_write_Bps(None, 1e6, 0), "world"),
    (lambda: terms.shared_write_Bps(None, 1e6, 2, rounds=0), "rounds"),
    (lambda: terms.shared_reads_Bps(None, 1e6, 2.5), "world"),
    (lambda: terms.parallel_torch_fresh_Bps(1e6, 0), "threads"),
    (lambda: dataclasses.replace(T, torch_fresh_Bps=-1.0), "torch_fresh_Bps must be a measured rate"),
    (lambda: dataclasses.replace(T, reclaimed_write_Bps=0.0), "reclaimed_write_Bps must be a measured rate"),
    (lambda: terms.refined_job(T, 1e9, gap_s=-1.0), "gap_s must be a time"),
    (lambda: terms.reclaimed_write_Bps(None, 0.0), "size_B"),
    (lambda: terms.map_read_Bps(0.0), "size_B"),
    (lambda: terms.parallel_map_read_Bps(0.0, 2), "rank_B"),
    (lambda: terms.parallel_map_read_Bps(0.5, 2), "rank_B must be at least one byte"),
    (lambda: terms.parallel_map_read_Bps(1e6, 0), "world"),
    (lambda: terms.parallel_map_read_Bps(1e6, 2, rounds=0), "rounds"),
    (lambda: dataclasses.replace(T, parallel_map_read_Bps=0.0), "parallel_map_read_Bps must be a measured rate"),
    (lambda: dataclasses.replace(T, map_read_Bps=0.0), "map_read_Bps must be a measured rate"),
    (lambda: dataclasses.replace(T, shard_read_Bps=float("inf")), "shard_read_Bps must be a measured rate"),
    (lambda: dataclasses.replace(T, new_tensor_ddp_s_per_B=math.nan), "new_tensor_ddp_s_per_B must be measured"),
])
def test_bad_input_names_the_input(call, match):
    with pytest.raises(MlsysimError, match=match):
        call()


def test_overhead_per_checkpoint_is_the_cycle_less_the_plain_steps():
    # plain steps of 0.2 s; the steps after the checkpoints at 6 and 8 take 0.1 s and 0.3 s more
    t, ev = 0.0, []
    for s in range(1, 11):
        t += 1.0 if s == 1 else 0.2 + (0.1 if s in (7, 8) else 0.0) + (0.3 if s in (9, 10) else 0.0) / 2
        ev.append({"step": s, "t": t, "loss": "0x0p+0"})
    o = terms.overhead_per_checkpoint(ev, every=2, plain=4)
    assert round(o["plain_step_s"], 6) == 0.2 and [round(x, 6) for x in o["overheads_s"]] == [0.2, 0.3]
    assert round(o["overhead_s"], 6) == 0.25                       # their mean: what the training paid per checkpoint
    assert terms.overhead_per_checkpoint(ev[:6], 2, 4)["overhead_s"] is None   # no full cycle after a checkpoint
    assert o["plain_step_cpu_s"] is None                              # no CPU time in the events
    # the rank's CPU time (process_time) grows 0.15 s in each plain step: busy 3/4 of a 0.2 s step
    busy = [{**e, "cpu": 0.15 * e["step"] + (0.5 if e["step"] > 6 else 0.0)} for e in ev]
    ob = terms.overhead_per_checkpoint(busy, 2, 4)
    assert round(ob["plain_step_cpu_s"], 6) == 0.15 and o["overheads_cpu_s"] is None
    # 0.5 s more CPU in step 7 (a writer's, for the checkpoint at step 6): in that cycle only
    assert [round(x, 6) for x in ob["overheads_cpu_s"]] == [0.5, 0.0] and round(ob["overhead_cpu_s"], 6) == 0.25


def test_with_four_steps_between_checkpoints_each_cycle_has_its_own_baseline():
    # steps of 0.3 s drifting down to 0.2 s over the job; each checkpoint makes the next step 0.1 s longer
    t, ev = 0.0, []
    for s in range(1, 21):
        t += 0.3 - 0.1 * s / 20 + (0.1 if s > 4 and (s - 1) % 4 == 0 else 0.0)
        ev.append({"step": s, "t": t})
    o = terms.overhead_per_checkpoint(ev, every=4, plain=4)
    assert len(o["overheads_s"]) == 3                               # checkpoints at 8, 12, 16 (20 has no interval)
    # the cycle's two steps less the next two: the 0.1 s, plus 0.02 s of drift (each of the cycle's steps is
    # 0.01 s longer than the step two later); against the plain steps of the job's start, far less than 0.1 s
    assert [round(x, 6) for x in o["overheads_s"]] == [0.12, 0.12, 0.12]
    against_start = [ev[s + 3]["t"] - ev[s - 1]["t"] - 4 * o["plain_step_s"] for s in (8, 12, 16)]
    assert all(a < 0.12 - 0.05 for a in against_start)


def test_the_writers_beside_busy_processes_stand_for_their_rates():
    # 0.2 ns per byte beside the training, 0.1 ns of training lost per byte: for 1 GB (+ 32 kB of extras)
    t = dataclasses.replace(T, torch_crc_Bps=4e9, beside_write_s_per_B=0.2e-9, beside_loss_s_per_B=0.1e-9)
    j = terms.refined_job(t, 1e9)
    assert j["concurrent"]["durable_s"] == terms.refined_job(T, 1e9)["concurrent"]["durable_s"]  # not the spinners'
    assert round(j["concurrent"]["overhead_s"], 3) == round(0.1 + 0.1, 3)
    # DCP's writer: torch.save's CRC-32 (4 GB/s) in place of this package's (20 GB/s), 0.1 s more per rank
    assert round(j["dcp-async"]["overhead_s"] - j["concurrent"]["overhead_s"], 3) == round(0.1 + 2 * 0.1 / 2, 3)


def test_the_writers_cpu_time_is_what_the_training_loses():
    # 1 ns of CPU per byte: 1 GB (+ 32 kB of extras) takes 1.0 s of CPU, which 2 ranks on 2 cores lose at the
    # pace of 2 cores: 0.5 s per checkpoint, in place of the busy processes' loss (0.1 s)
    t = dataclasses.replace(T, torch_crc_Bps=4e9, beside_write_s_per_B=0.2e-9, beside_loss_s_per_B=0.1e-9,
                            writer_cpu_s_per_B=1e-9)
    j = terms.refined_job(t, 1e9)
    assert round(j["terms"]["writer_cpu_s"], 3) == 1.0 and round(j["terms"]["writer_loss_s"], 3) == 0.5
    assert round(j["concurrent"]["overhead_s"], 3) == round(0.1 + 0.5, 3)
    # each writer's 0.5 s of CPU (a core each) beside the disk's 1.0 s, and a thirtieth of it (30 chunks)
    assert round(j["concurrent"]["durable_s"], 3) == round(0.1 + 1.0 + 0.5 / 30, 3)
    # one rank on 4 cores: while its writer runs (1 s), the 3 free cores can take 3 core-seconds: no loss
    one = terms.refined_job(dataclasses.replace(t, world=1, cores=4), 1e9)
    assert one["terms"]["writer_loss_s"] == 0.0 and round(one["terms"]["idle_taken_s"], 3) == 1.0
    with pytest.raises(MlsysimError, match="writer_cpu_s_per_B must be"):
        dataclasses.replace(T, writer_cpu_s_per_B=0.0)


def test_the_writers_cpu_time_after_the_host_took_memory_back_counts_once_the_gap_is_long():
    # u = 1 ns/B back to back, u_h = 2.5 ns/B after a wait: 1 GB on 2 cores loses 0.5 s or 1.25 s; the
    # page-cache write into memory taken back (h = 1 GB/s against p = 4 GB/s) is 0.375 s more per rank's 0.5 GB
    t = dataclasses.replace(T, torch_crc_Bps=4e9, reclaimed_write_Bps=1e9, writer_cpu_s_per_B=1e-9,
                            writer_cpu_reclaimed_s_per_B=2.5e-9)
    near, far = terms.refined_job(t, 1e9, gap_s=1.0), terms.refined_job(t, 1e9, gap_s=10.0)
    assert round(near["terms"]["writer_loss_s"], 3) == 0.5 and round(far["terms"]["writer_loss_s"], 3) == 1.25
    assert round(far["concurrent"]["overhead_s"] - near["concurrent"]["overhead_s"], 3) == 0.75
    # DCP: its loss takes u_h too, and the reclaimed write's 0.375 s per rank is not counted a second time;
    # the durable time still holds it (2 writers on 2 cores, a core each)
    tc_extra = 2 * (0.5 / 4 - 0.5 / 20) / 2                       # torch.save's CRC-32 over 2 cores: 0.1 s
    assert round(far["dcp-async"]["overhead_s"] - far["concurrent"]["overhead_s"]
                 - (far["dcp-async"]["stall_s"] - far["concurrent"]["stall_s"]), 3) == round(tc_extra, 3)
    dur = far["dcp-async"]["durable_s"] - near["dcp-async"]["durable_s"]
    assert round(dur, 3) == round(0.5 / 1 - 0.5 / 4, 3)
    without = terms.refined_job(dataclasses.replace(t, writer_cpu_reclaimed_s_per_B=None), 1e9, gap_s=5.0)
    assert round(without["terms"]["writer_loss_s"], 3) == 0.5      # u, and the reclaimed write in DCP's loss
    # without u_h, DCP's overhead holds u's 0.5 s and the reclaimed write (2 x 0.375 s over 2 cores)
    assert round(without["dcp-async"]["overhead_s"] - far["dcp-async"]["overhead_s"], 3) == round(
        (0.5 + 0.375) - 1.25, 3)
    with pytest.raises(MlsysimError, match="writer_cpu_reclaimed_s_per_B must be"):
        dataclasses.replace(T, writer_cpu_reclaimed_s_per_B=-1e-9)


def test_gloos_share_of_a_plain_step_is_recorded_and_left_out_of_the_loss():
    # gloo's threads' CPU follows the collectives' bytes and does not grow while the training is held up: a
    # measured share of 0.2 of a core per rank and second changes no figure (the writes take 1.6 core-seconds,
    # 0.5 cores the ranks leave idle take them for the writers' 1.017 s: 0.546 s lost either way)
    t = dataclasses.replace(T, torch_crc_Bps=4e9, beside_write_s_per_B=0.5e-9, beside_loss_s_per_B=0.1e-9,
                            writer_cpu_s_per_B=1e-9, beside_mean_loss_s_per_B=0.8e-9, busy_share=0.75)
    plain, shared = terms.refined_job(t, 1e9), terms.refined_job(dataclasses.replace(t, gloo_share=0.2), 1e9)
    assert round(plain["terms"]["writer_loss_s"], 3) == round((1.6 - 0.5 * (1.0 + 0.5 / 30)) / 2, 3) and shared == plain
    with pytest.raises(MlsysimError, match="gloo_share must be"):
        dataclasses.replace(T, gloo_share=-0.1)


def test_the_ranks_waits_take_the_hosts_work_and_free_cores_the_writers_too():
    # u = 1 ns/B: 1 GB takes 1.0 s of CPU; each of 2 busy processes lost 0.8 ns/B on average beside the
    # writers: the writes take 2 x 0.8 = 1.6 core-seconds from the work beside them
    t = dataclasses.replace(T, torch_crc_Bps=4e9, beside_write_s_per_B=0.5e-9, beside_loss_s_per_B=0.1e-9,
                            writer_cpu_s_per_B=1e-9, beside_mean_loss_s_per_B=0.8e-9)
    busy = terms.refined_job(t, 1e9)
    assert round(busy["terms"]["writer_taken_s"], 3) == 1.6 and round(busy["terms"]["writer_loss_s"], 3) == 0.8
    # ranks busy 3/4 of the time leave 2 - 2 x 0.75 = 0.5 cores idle, waiting in their collectives, while the
    # writers run, 1.017 s (the disk's write outlasts each writer's 0.5 s of CPU, and a thirtieth of that, 30
    # chunks): 0.508 core-seconds of the host's 0.6
    idle = terms.refined_job(dataclasses.replace(t, busy_share=0.75), 1e9)
    writers = 1.0 + 0.5 / 30
    assert round(idle["terms"]["writers_s"], 3) == round(writers, 3)
    assert round(idle["terms"]["idle_taken_s"], 3) == round(0.5 * writers, 3)
    assert round(idle["terms"]["writer_loss_s"], 3) == round((1.6 - 0.5 * writers) / 2, 3)
    assert round(busy["concurrent"]["overhead_s"] - idle["concurrent"]["overhead_s"], 3) == round(0.5 * writers / 2, 3)
    # after the gap, the re-backed pages' accounted CPU (u_h - u = 1.5 ns/B) comes on top of the spinners' loss
    back = terms.refined_job(dataclasses.replace(t, writer_cpu_reclaimed_s_per_B=2.5e-9), 1e9, gap_s=10.0)
    assert round(back["terms"]["writer_taken_s"], 3) == 3.1
    # the waits take none of the writers' own work: with the host's 0.2 core-seconds only (0.6 ns/B lost each),
    # they take 0.2, and the writers' 1.0 s of CPU is lost over the 2 cores
    small = terms.refined_job(dataclasses.replace(t, busy_share=0.75, beside_mean_loss_s_per_B=0.6e-9), 1e9)
    assert round(small["terms"]["idle_taken_s"], 3) == 0.2 and round(small["terms"]["writer_loss_s"], 3) == 0.5
    # ranks that only ever wait lose none of the host's work (their waits take all 0.6 s), the writers' CPU still
    never = terms.refined_job(dataclasses.replace(t, busy_share=0.0, beside_write_s_per_B=1e-9), 1e9)
    assert round(never["terms"]["idle_taken_s"], 3) == 0.6 and round(never["terms"]["writer_loss_s"], 3) == 0.5
    # a core no rank runs on takes the writers' work first, then the host's: one rank on 2 cores, busy half the
    # time, its writer's 1.0 s of CPU on the free core, the host's 0.6 s in what is left of the free core and in
    # the rank's waits while the writer runs (1 s, and a sixtieth of that: 60 chunks): 0.017 + 0.508 s of it
    one = terms.refined_job(dataclasses.replace(t, world=1, busy_share=0.5, beside_mean_loss_s_per_B=1.6e-9), 1e9)
    writers = 1.0 + 1.0 / 60
    assert round(one["terms"]["writer_taken_s"], 3) == 1.6
    assert round(one["terms"]["idle_taken_s"], 3) == round(1.0 + (writers - 1.0) + 0.5 * writers, 3)
    assert round(one["terms"]["writer_loss_s"], 3) == round(1.6 - (1.0 + (writers - 1.0) + 0.5 * writers), 3)
    with pytest.raises(MlsysimError, match="busy_share must be a measured value"):
        dataclasses.replace(T, busy_share=-0.5)


def test_the_writers_cpu_runs_beside_the_disk_and_dcp_writes_back_after_it():
    # u = 3 ns/B: 3.0 s of CPU for 1 GB, 1.5 s per writer; the writers take the cores first, 2 of them on 2 cores
    # at a core each: 1.5 s, longer than the disk's 1.0 s, so it is the writers' time; DCP: (1/4 + 1/4) s/GB x
    # 0.5 GB, then the whole 1.0 s write at its fsync
    t = dataclasses.replace(T, torch_crc_Bps=4e9, writer_cpu_s_per_B=3e-9, busy_share=0.5)
    j = terms.refined_job(t, 1e9)
    assert j["terms"]["writers_slowed"] == 1.0 and round(j["terms"]["writers_s"], 3) == round(1.5 + 1.0 / 30, 3)
    assert round(j["concurrent"]["durable_s"], 3) == round(0.1 + 1.5 + 1.0 / 30, 3)    # 30 chunks per rank
    assert round(j["dcp-async"]["durable_s"], 3) == round(0.2 + 0.25 + 1.0, 3)
    # the ranks' busy share does not slow the writers; their waits take only the host's work, none measured here
    busy = terms.refined_job(dataclasses.replace(t, busy_share=1.0), 1e9)
    assert busy["terms"]["writers_s"] == j["terms"]["writers_s"] and busy["dcp-async"]["durable_s"] == \
        j["dcp-async"]["durable_s"] and busy["concurrent"]["overhead_s"] == j["concurrent"]["overhead_s"]
    # 4 writers on 2 cores run at half a core each: 0.75 s of CPU per writer takes 1.5 s, and the disk's 1.0 s over
    # 15 chunks per rank; DCP's (1/4 + 1/4) s/GB x 0.25 GB per rank takes 0.25 s
    four = terms.refined_job(dataclasses.replace(t, world=4), 1e9)
    assert four["terms"]["writers_slowed"] == 2.0 and round(four["terms"]["writers_s"], 3) == round(1.5 + 1.0 / 15, 3)
    assert round(four["dcp-async"]["durable_s"] - four["dcp-async"]["stall_s"], 3) == round(0.25 + 1.0, 3)


def test_the_host_s_work_for_the_writes_counts_with_their_cpu_time():
    stolen = terms.steal_s()
    assert stolen is None or stolen >= 0          # since boot, where the kernel reports it
    # u = 1 ns/B and 0.5 ns/B stolen by the host beside busy processes: 1.5 core-seconds for 1 GB, in place of
    # the busy processes' own loss (m = 0.8 ns/B x 2 = 1.6); 2 busy ranks on 2 cores lose 0.75 s
    t = dataclasses.replace(T, writer_cpu_s_per_B=1e-9, beside_mean_loss_s_per_B=0.8e-9, beside_steal_s_per_B=0.5e-9)
    j = terms.refined_job(t, 1e9)
    assert round(j["terms"]["host_taken_s"], 3) == 0.5 and round(j["terms"]["writer_taken_s"], 3) == 1.5
    assert round(j["terms"]["writer_loss_s"], 3) == 0.75
    assert round(j["concurrent"]["overhead_s"], 3) == round(0.1 + 0.75, 3)
    with pytest.raises(MlsysimError, match="beside_steal_s_per_B must be a measured value"):
        dataclasses.replace(T, beside_steal_s_per_B=-1e-9)


def test_writers_beside_busy_processes_measured(tmp_path):
    b = terms.beside(tmp_path, 2e6, 2, reclaim_wait_s=0.05)
    assert b["size_B"] == 2e6 and b["writers_alone_s"] > 0 and b["writers_beside_s"] > 0 and b["loss_s"] >= 0
    assert 0 < b["writers_cpu_s"] < 10                      # the kernel's accounting: some CPU, and not minutes
    assert 0 < b["writers_cpu_reclaimed_s"] < 10 and 0 <= b["mean_loss_s"] < 10
    assert b["steal_s"] is None or 0 <= b["steal_s"] < 10     # the host's work beside them, where reported
    assert terms.beside(tmp_path, 2e6, 2, reclaimed=0)["writers_cpu_reclaimed_s"] is None
    with pytest.raises(MlsysimError, match="reclaimed must be an integer"):
        terms.beside(tmp_path, 2e6, 2, reclaimed=-1)
    with pytest.raises(MlsysimError, match="reclaim_wait_s must be a time"):
        terms.beside(tmp_path, 2e6, 2, reclaim_wait_s=math.inf)


def test_measured_terms_are_rates_of_this_machine(tmp_path):
    t = terms.measure_terms(2, 4e6, tmp_path, rounds=1, reclaim_wait_s=0.05, bcast_Bps=1e9)
    assert t.world == 2 and t.cores >= 1 and t.bcast_Bps == 1e9 and t.start_s is None and 0 < t.sync_s < 5
    for k in ("copy_Bps", "parallel_copy_Bps", "parallel_fresh_Bps", "crc_Bps", "cache_write_Bps", "write_Bps",
              "shared_write_Bps", "shared_read_Bps", "same_read_Bps", "reclaimed_write_Bps", "map_read_Bps",
              "parallel_map_read_Bps"):
        assert 1e6 < getattr(t, k) < 1e13
    for k in ("beside_write_s_per_B", "beside_loss_s_per_B", "writer_cpu_s_per_B", "writer_cpu_reclaimed_s_per_B",
              "beside_mean_loss_s_per_B"):
        assert 0 <= getattr(t, k) < 1e-6                           # seconds per byte
    assert set(t.to_dict()) >= {"crc_Bps", "parallel_copy_Bps", "sync_s", "pair_Bps", "start_s"}


def test_the_copies_of_n_threads_are_timed_in_pieces_of_a_rank_s_largest_tensor(tmp_path, monkeypatch):
    copied, copyto = [], np.copyto

    def counted(dst, src):
        copied.append(src.nbytes)
        copyto(dst, src)
    monkeypatch.setattr(terms.np, "copyto", counted)
    assert 0 < terms.parallel_copy_Bps(4e6, 2, repeats=1, piece_B=1.5e6) < math.inf
    assert sorted(copied) == [5e5, 5e5, 1.5e6, 1.5e6]            # 2 MB a thread: 1.5 MB, then the rest
    copied.clear()
    terms.parallel_copy_Bps(4e6, 2, fresh=True, repeats=1, piece_B=1e9)   # a piece larger than a thread's part
    assert copied == [2e6, 2e6]
    copied.clear()
    terms.parallel_copy_Bps(4e6, 2, repeats=1)                             # None: one piece a thread
    assert copied == [2e6, 2e6]
    monkeypatch.undo()
    t = terms.measure_terms(2, 4e6, tmp_path, rounds=1, reclaim_wait_s=0.05, copy_piece_B=1e6)
    assert t.copy_piece_B == 1e6 and t.to_dict()["copy_piece_B"] == 1e6


def test_the_shared_disk_is_written_as_the_job_writes_new_files_at_its_own_size(tmp_path, monkeypatch):
    from mlsysim.lab import floors
    seen, write_once = [], floors.write_once

    def spied(path, data):
        seen.append((os.path.basename(path), os.path.exists(path), data.nbytes, sorted(os.listdir(tmp_path))))
        return write_once(path, data)
    monkeypatch.setattr(floors, "write_once", spied)
    assert 1e6 < terms.shared_write_Bps(tmp_path, 6e6, 2, rounds=3) < 1e13
    assert len({name for name, *_ in seen}) == 6 and not any(existed for _, existed, *_ in seen)   # new files
    assert {nbytes for _, _, nbytes, _ in seen} == {3_000_000}
    for name, _, _, present in seen:          # the round before deleted first, as the job prunes its older
        assert {p.split("-")[1] for p in present} <= {name.split("-")[1]}
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    rates = terms.shared_reads_Bps(tmp_path, 4e6, 2)
    assert all(1e6 < r < 1e13 for r in rates) and list(tmp_path.iterdir()) == []
    t = terms.measure_terms(2, 4e6, tmp_path, rounds=1, reclaim_wait_s=0.05)
    assert t.shared_write_B == 4e6 and terms.Terms(**{**t.to_dict(), "shared_write_B": None}).shared_write_B is None


def test_the_memory_tiers_mapped_read_is_measured_and_cleaned_up(tmp_path):
    rate = terms.map_read_Bps(8e6, tmp_path)
    assert 0 < rate < math.inf and list(tmp_path.iterdir()) == []
    together = terms.parallel_map_read_Bps(4e6, 3, tmp_path, rounds=2)   # three processes, 4 MB each
    assert 1e6 < together < 1e13 and list(tmp_path.iterdir()) == []
    from mlsysim.lab.distributed.tier_reads import _round_s
    (tmp_path / "short.bin").write_bytes(b"x" * 10)
    t0 = time.monotonic()
    with pytest.raises(MlsysimError, match="a reader of the memory tier failed"):   # cannot map 1 MB of 10 B
        _round_s([tmp_path / "short.bin", tmp_path / "missing.bin"], 1_000_000)
    assert time.monotonic() - t0 < 60                                   # the barrier broken, no reader waited


def test_the_write_into_memory_freed_a_while_ago_is_measured_and_cleaned_up(tmp_path):
    assert 1e6 < terms.reclaimed_write_Bps(tmp_path, 2e6, repeats=2, wait_s=0.05) < 1e13
    assert not any(tmp_path.iterdir())
    with pytest.raises(MlsysimError, match="wait_s must be a time"):
        terms.reclaimed_write_Bps(tmp_path, 2e6, wait_s=-1.0)


def test_pytorchs_new_tensors_measured():
    pytest.importorskip("torch")
    import torch
    before = torch.get_num_threads()
    rate = terms.parallel_torch_fresh_Bps(8e6, 2, repeats=2)
    assert 1e6 < rate < 1e13 and torch.get_num_threads() == before     # the intra-op threads given back


def _record() -> dict:
    """A schema-2 record of one point and one node loss, with round numbers."""
    eng = lambda stall, durable, over, pred: {"stall_s": stall, "durable_s": durable, "overhead_s": over,
                                              "stalls_s": [stall] * 3, "durables_s": [durable] * 3,
                                              "overheads_s": [over] * 2, "plain_step_s": 1.0, "predicted": pred}
    p = {"naive": {"stall_s": 0.01, "durable_s": 1.0, "overhead_s": 0.01},
         "refined": {"stall_s": 0.05, "durable_s": 2.0, "overhead_s": 0.3}}
    restore = {"scheme": "sharded", "restore_s": 1.0, "predicted": {"restore_s": 0.5, "refined_restore_s": 0.9}}
    return {"schema": "mlsysim.lab.dist-benchmark/2", "points": [
        {"world_size": 2, "state_B": 1e9, "concurrent": eng(0.06, 2.2, 0.35, p), "dcp_async": eng(0.2, 3.0, 0.5, p),
         "restores": [restore]}],
        "node_loss": [{"world_size": 2, "state_B": 1e9, "recovery_s": 1.0, "recovery_storage_s": 1.1,
                       "downtime_s": [10.0, 12.0],
                       "predicted": {"naive": {"peer_memory_s": 0.3, "storage_s": 1.0},
                                     "refined": {"peer_memory_s": 0.9, "storage_s": 1.0, "downtime_peer_s": 9.0,
                                                 "downtime_storage_s": 16.0}}}]}


def test_the_table_lists_every_figure_beside_both_predictions():
    rows = model_table(_record())
    assert len(rows) == 6 + 1 + 4 and set(rows[0]) == {"figure", "naive_s", "refined_s", "measured_s", "ratio",
                                                      "holds", "naive_holds", "measured_se_s", "consistent"}
    by = {r["figure"]: r for r in rows}
    c = by["2 ranks, 1000 MB: concurrent durable"]
    assert c["ratio"] == 1.1 and c["holds"] and c["naive_holds"] is False
    assert by["2 ranks, 1000 MB: concurrent stall"]["holds"]               # 0.06 s: within x1.5 of 0.05 s
    assert not by["2 ranks, 1000 MB: dcp-async stall"]["holds"]            # 0.2 s vs 0.05 s
    down = by["2 nodes x 1, 1000 MB: downtime, storage recovery"]
    assert down["naive_s"] is None and down["naive_holds"] is None and not down["holds"]   # 12 s vs 16 s: 33 % off
    assert [t[1] for t in targets(_record())].count(False) == len([r for r in rows if not r["holds"]])
    assert c["measured_se_s"] == 0.0 and c["consistent"]               # three equal medians: no spread
    assert by["2 ranks, 1000 MB: concurrent overhead"]["measured_se_s"] is None    # two cycles: too few for one
    assert down["measured_se_s"] is None and not down["consistent"]      # timed once: as it holds


def test_a_measurement_as_spread_as_the_bound_does_not_refute_the_prediction():
    d = _record()
    e = d["points"][0]["dcp_async"]
    e["overheads_s"] = [0.2, 0.5, 0.8, 0.5]           # mean 0.5, 0.3 s predicted: 1.67 times, misses
    (row,) = [r for r in model_table(d) if r["figure"] == "2 ranks, 1000 MB: dcp-async overhead"]
    assert row["measured_se_s"] == pytest.approx(0.1224745, rel=1e-6)   # s = 0.245 over sqrt(4)
    assert not row["holds"] and row["consistent"]     # 0.5 - 2 x 0.122 = 0.255 s: within 25 % of 0.3 s
    e["overheads_s"] = [0.48, 0.5, 0.52, 0.5]
    (row,) = [r for r in model_table(d) if r["figure"] == "2 ranks, 1000 MB: dcp-async overhead"]
    assert not row["holds"] and not row["consistent"]
    d["points"][0]["restores"][0]["rounds_s"] = [1.0, 0.9, 1.1, 1.0, 1.0]
    (r,) = [r for r in model_table(d) if r["figure"] == "2 ranks, 1000 MB: sharded restore"]
    assert r["measured_se_s"] == pytest.approx((math.pi / 2) ** 0.5 * 0.0707107 / 5 ** 0.5, rel=1e-5)   # a median's
    with pytest.raises(MlsysimError, match="statistic must be 'mean' or 'median'"):
        standard_error([1.0, 2.0, 3.0], "mode")


def test_a_record_without_the_refined_model_gives_no_rows():
    d = _record()
    old = copy.deepcopy(d)
    for q in old["points"]:
        for k in ("concurrent", "dcp_async"):
            del q[k]["predicted"]
        q["restores"][0]["predicted"].pop("refined_restore_s")
    del old["node_loss"][0]["predicted"]
    assert model_table(old) == [] and len(targets(old)) == 1


def test_run_distributed_refuses_bad_plain_steps():
    from mlsysim.lab.distributed.launcher import run_distributed
    for bad in (1, 8, -2, 2.5):
        with pytest.raises(MlsysimError, match="plain_steps must be 0 or an integer from 2 to steps - 1"):
            run_distributed(steps=8, plain_steps=bad)


def test_the_detection_is_the_launchers_keep_alive():
    from mlsysim.lab.distributed.launcher import RDZV_CONF
    conf = dict(RDZV_CONF)
    assert conf["keep_alive_interval"] * conf["keep_alive_max_attempt"] == terms.DETECT_S



def test_the_memory_a_checkpoint_frees_is_the_hosts_2_s_after_its_write_ends_not_after_the_save():
    # the older checkpoint is deleted (DCP's staging dropped) once the newer one is durable: 1.0 s after the
    # concurrent engine's call returns (1 GB at 1 GB/s), 1.25 s after DCP's (its CRC-32 and page-cache write,
    # then the write at its fsync). With 3.1 s between checkpoints the concurrent engine's memory has waited
    # 2.1 s, the host's again, and its writes take u_h (2.5 ns/B, not 1): 1.25 s of loss on 2 cores, not 0.5;
    # DCP's has waited 1.85 s, still the guest's: its figures are those of a short gap
    t = dataclasses.replace(T, torch_crc_Bps=4e9, reclaimed_write_Bps=1e9, writer_cpu_s_per_B=1e-9,
                            writer_cpu_reclaimed_s_per_B=2.5e-9)
    held, j = terms.refined_job(t, 1e9, gap_s=1.0), terms.refined_job(t, 1e9, gap_s=3.1)
    waits = (j["terms"]["reclaim_wait_concurrent_s"], j["terms"]["reclaim_wait_dcp_s"])
    assert [round(w, 3) for w in waits] == [round(2.1 - 0.5 / 30, 3), 1.85]     # 30 chunks: the last one's write
    assert round(j["terms"]["writer_loss_s"], 3) == 1.25 and round(held["terms"]["writer_loss_s"], 3) == 0.5
    assert j["dcp-async"] == held["dcp-async"] and "reclaimed_write_s" not in j["terms"]
    assert round(j["concurrent"]["overhead_s"] - held["concurrent"]["overhead_s"], 3) == 0.75
    # 3.3 s apart, DCP's has waited 2.05 s: its page-cache write of 0.5 GB runs at h = 1 GB/s, not 4 GB/s
    far = terms.refined_job(t, 1e9, gap_s=3.3)
    assert round(far["terms"]["reclaimed_write_s"], 3) == 0.5 and far["concurrent"] == j["concurrent"]
    assert round(far["dcp-async"]["durable_s"] - held["dcp-async"]["durable_s"], 3) == round(0.5 - 0.5 / 4, 3)
    # under the 2 s delay itself no wait is timed: the memory is the guest's whatever the engines' times
    assert "reclaim_wait_dcp_s" not in terms.refined_job(t, 1e9, gap_s=1.99)["terms"]


def test_across_runs_counts_each_figure_in_every_run_and_names_a_one_sided_miss(tmp_path):
    shipped, earlier = recorded(), recorded(EARLIER)
    rows = across({"shipped": shipped, "earlier": earlier})
    assert len(rows) == 62 and {r["runs"] for r in rows} == {2}
    assert sum(r["held"] for r in rows) == 56 + 54                      # each run's own count, summed
    own = {r["figure"]: r["ratio"] for r in model_table(remodel(earlier))}
    assert all(r["ratios"][1] == own[r["figure"]] for r in rows)
    fig = "2 ranks, 1013 MB: dcp-async overhead"                        # 1.68 and 1.37 times the model
    (row,) = [r for r in rows if r["figure"] == fig]
    assert row["side"] == "above" and row["held"] == 0 and row["lowest"] > 1.3 and row["highest"] > 1.6
    assert row["median_ratio"] == pytest.approx((row["lowest"] + row["highest"]) / 2)
    lower = copy.deepcopy(earlier)
    q = next(q for q in lower["points"] if q["world_size"] == 2 and q["state_B"] > 1e9)
    q["dcp_async"]["overhead_s"] = 0.9 * q["dcp_async"]["predicted"]["refined"]["overhead_s"]
    (row,) = [r for r in across({"shipped": shipped, "lower": lower}) if r["figure"] == fig]
    assert row["side"] == "both" and row["held"] == 1 and row["ratios"][1] == pytest.approx(0.9)
    with pytest.raises(MlsysimError, match="at least one recorded run"):
        across({})
    with pytest.raises(MlsysimError, match=r"no recorded run matches 'lab_dist-\*.json'"):
        load_records(tmp_path)
    for name in ("lab_dist-b", "lab_dist-a", "other"):
        (tmp_path / f"{name}.json").write_text(json.dumps({"date": name}))
    assert list(load_records(tmp_path)) == ["lab_dist-a", "lab_dist-b"]
    kept = load_records()                                               # the repository's benchmarks/records
    assert len(kept) >= 11 and all(name.startswith("lab_dist-") for name in kept)


def test_terms_the_job_timed_of_itself_stand_for_those_timed_apart():
    t = dataclasses.replace(T, torch_crc_Bps=4e9, sync_s=0.01)
    apart = terms.refined_job(t, 1e9)
    # every rank copying at once: rank 0 done at 8 GB/s of all the bytes, the last at 5 GB/s; the disk at 0.5 GB/s
    own = terms.refined_job(dataclasses.replace(t, job_copy_own_Bps=8e9, job_copy_Bps=5e9, job_write_Bps=0.5e9), 1e9)
    copied = 1e9 + 2 * terms.EXTRAS_PER_RANK_B
    c, a = own["concurrent"], apart["concurrent"]
    assert c["stall_s"] - a["stall_s"] == pytest.approx(copied / 8e9 - copied / 10e9)        # rank 0's own copy
    assert c["overhead_s"] - a["overhead_s"] == pytest.approx(copied / 5e9 - copied / 10e9)  # the slowest rank's
    assert own["terms"]["write_s"] == pytest.approx(copied / 0.5e9) and c["durable_s"] > a["durable_s"] + 0.9
    more = own["dcp-async"]["durable_s"] - apart["dcp-async"]["durable_s"]
    assert more == pytest.approx(copied / 0.5e9 - copied / 1e9)
    # DCP's job timed its own disk: its time to durable takes it, the concurrent engine's keeps its own
    dcp = terms.refined_job(dataclasses.replace(t, dcp_job_write_Bps=0.25e9), 1e9)
    assert dcp["concurrent"] == apart["concurrent"] and dcp["terms"]["dcp_write_s"] == pytest.approx(copied / 0.25e9)
    more = dcp["dcp-async"]["durable_s"] - apart["dcp-async"]["durable_s"]
    assert more == pytest.approx(copied / 0.25e9 - copied / 1e9)
    # more ranks than cores: they copy at once on shared cores, and rank 0's copy ends with the slowest
    shared = dataclasses.replace(t, world=4, job_copy_own_Bps=8e9, job_copy_Bps=5e9)
    four = terms.refined_job(shared, 1e9)["concurrent"]
    four_own = terms.refined_job(dataclasses.replace(shared, job_copy_Bps=None), 1e9)["concurrent"]
    copied4 = 1e9 + 4 * terms.EXTRAS_PER_RANK_B
    assert four["stall_s"] - four_own["stall_s"] == pytest.approx(copied4 / 5e9 - copied4 / 8e9)
    with pytest.raises(MlsysimError, match="job_copy_Bps must be a measured rate > 0 B/s or None"):
        dataclasses.replace(T, job_copy_Bps=0.0)
    # the engine's fixed cost to durable beside the job's own steps stands for the smallest job's, durable only
    beside = dataclasses.replace(t, own_stall_s=0.001, own_durable_beside_s=0.011)
    fixed = terms.refined_job(dataclasses.replace(beside, job_fixed_durable_s=0.05), 1e9)
    small = terms.refined_job(beside, 1e9)
    assert small["terms"]["fixed_durable_s"] == pytest.approx(0.01) and fixed["terms"]["fixed_durable_s"] == 0.05
    assert fixed["concurrent"]["durable_s"] - small["concurrent"]["durable_s"] == pytest.approx(0.04)
    assert {k: fixed["concurrent"][k] for k in ("stall_s", "overhead_s")} == \
        {k: small["concurrent"][k] for k in ("stall_s", "overhead_s")} and fixed["dcp-async"] == small["dcp-async"]
    with pytest.raises(MlsysimError, match="job_fixed_durable_s must be a measured time >= 0 s or None"):
        dataclasses.replace(T, job_fixed_durable_s=-0.01)


def test_probed_apart_takes_out_what_the_jobs_timed_of_themselves():
    shipped = recorded()
    assert probed_apart(shipped) == shipped                         # a run whose jobs timed none: unchanged
    own = copy.deepcopy(shipped)
    q = own["points"][0]
    q["terms"].update(job_copy_Bps=1e9, job_copy_own_Bps=2e9, job_write_Bps=0.1e9, dcp_job_write_Bps=0.1e9,
                      dcp_stage_Bps=1e9, dcp_stage_own_Bps=1e9)
    moved, back = remodel(own)["points"][0], remodel(probed_apart(own))["points"][0]
    assert moved["concurrent"]["predicted"] != back["concurrent"]["predicted"]
    assert back["concurrent"]["predicted"] == remodel(shipped)["points"][0]["concurrent"]["predicted"]
    assert back["dcp_async"]["predicted"] == remodel(shipped)["points"][0]["dcp_async"]["predicted"]


def test_first_probes_takes_each_term_from_its_first_times_only():
    shipped = recorded()
    assert first_probes(shipped, 1) == shipped                      # no job timed its terms: unchanged
    run = copy.deepcopy(shipped)
    q = run["points"][0]
    writes, copies = [0.09, 0.04, 0.05, 0.03, 0.035], [0.006, 0.005, 0.004, 0.005, 0.005]
    q["concurrent"]["job_terms"] = {"repeats": 5, "copy_B": 60e6, "copy_s": statistics.median(copies),
                                    "copy_each_s": copies, "copy_own_s": 0.004, "write_B": 60e6,
                                    "write_s": statistics.median(writes), "write_each_s": writes}
    five, three = first_probes(run, 5)["points"][0]["terms"], first_probes(run, 3)["points"][0]["terms"]
    assert five["job_write_Bps"] == 60e6 / 0.04 and three["job_write_Bps"] == 60e6 / 0.05
    assert three["job_copy_Bps"] == 60e6 / 0.005 and three["job_copy_own_Bps"] == five["job_copy_own_Bps"] == 60e6 / 0.004
    got = [remodel(first_probes(run, n))["points"][0]["terms_s"]["write_s"] for n in (5, 3)]
    assert got[1] / got[0] == pytest.approx(0.05 / 0.04)          # the model's write, each from its own probes
    assert run["points"][0]["concurrent"]["job_terms"]["write_s"] == 0.04           # the record left as it was
    for bad in (0, 6, 1.5):
        with pytest.raises(MlsysimError, match="n must be"):
            first_probes(run, bad)


def test_durable_split_sets_rank_0s_shard_beside_the_global_commit_and_the_model():
    shipped = recorded()
    assert durable_split(shipped) == []                      # no shard times recorded
    run = copy.deepcopy(shipped)
    e = run["points"][1]["concurrent"]
    e["shards_s"] = [t - 0.01 * (i + 1) for i, t in enumerate(e["durables_s"])]
    (row,) = durable_split(run)
    n = len(e["durables_s"])
    assert row["point"] == "2 ranks, 254 MB" and row["checkpoints"] == n
    assert row["after_s"] == pytest.approx(statistics.median(0.01 * (i + 1) for i in range(n)))
    assert row["durable_s"] == pytest.approx(statistics.median(e["durables_s"]))
    refined = remodel(run)["points"][1]["concurrent"]["predicted"]["refined"]
    assert refined["durable_s"] == pytest.approx(refined["stall_s"] + row["model_writers_s"] + row["model_fixed_s"])
    assert 0 < row["model_fixed_s"] < row["model_writers_s"] and 0 < row["model_fill_s"] < row["model_writers_s"] / 4
    e["shards_s"] = e["shards_s"][:-1]
    with pytest.raises(MlsysimError, match="2 ranks, 254 MB: .* shard times for .* checkpoints"):
        durable_split(run)


def test_spread_says_whether_a_prediction_follows_its_figure_from_run_to_run():
    shipped, earlier = recorded(), recorded(EARLIER)
    rows = across({"shipped": shipped, "earlier": earlier, "again": shipped})
    r = rows[0]
    assert [m / p for m, p in zip(r["measured"], r["predicted"])] == pytest.approx(r["ratios"])
    out = {s["figure"]: s for s in spread(rows)}
    assert len(out) == 62 and all(s["runs"] == 3 for s in out.values())
    # one figure: measured 1, 2 and 4 s, predicted 1, 1.9 and 4.2 s, against a constant prediction of 2 s
    one = {"figure": "f", "runs": 3, "measured": [1.0, 2.0, 4.0]}
    (follows,) = spread([{**one, "predicted": [1.0, 1.9, 4.2]}])
    (constant,) = spread([{**one, "predicted": [2.0, 2.0, 2.0]}])
    assert follows["tracks"] and follows["ratio_sd"] < 0.06 < 0.69 < follows["measured_sd"] < 0.7
    assert not constant["tracks"] and constant["ratio_sd"] == pytest.approx(constant["measured_sd"])
    assert constant["predicted_sd"] == 0.0
    # fewer than three runs, or a value not above zero, give no row
    assert spread([{**one, "measured": [1.0, 2.0], "predicted": [1.0, 2.0]}]) == []
    assert spread([{**one, "predicted": [1.0, 0.0, 4.0]}]) == []
    assert spread([{**one, "predicted": [1.0, None, 4.0]}]) == []


def test_a_mean_needs_enough_cycles_for_the_bound_to_judge_it():
    spread = [0.3, 0.5, 0.7, 0.5]                                       # s = 0.163
    assert cycles_needed(spread, 1.0) == 3                              # (2 x 0.163 / 0.2)^2 = 2.67
    assert cycles_needed(spread, 0.5) == 11                             # w = 0.1: 10.7
    assert cycles_needed(spread, 0.09) == 119                           # under 0.1 s, w = 0.03: 118.5
    assert cycles_needed(spread, 0.5, k=1.0) == 3                       # one standard error: a quarter
    assert cycles_needed([0.5, 0.5, 0.5], 0.5) == 1                     # no spread: one is enough
    # a right model, samples drawn around it: at the count needed, two s.e. fit inside the bound
    rng = np.random.default_rng(7)
    xs = rng.normal(0.4, 0.4, 4000)
    n = cycles_needed(xs, 0.4)
    assert 2 * np.std(xs, ddof=1) / n ** 0.5 <= 0.2 * 0.4 < 2 * np.std(xs, ddof=1) / (n - 1) ** 0.5
    for bad, match in (([0.1], "samples must be two"), ([0.1, float("nan")], "samples must be two"),
                       (None, "samples must be two")):
        with pytest.raises(MlsysimError, match=match):
            cycles_needed(bad, 0.5)
    for bad in (0.0, -1.0, float("inf"), "0.5"):
        with pytest.raises(MlsysimError, match="predicted_s must be a finite number of seconds > 0"):
            cycles_needed(spread, bad)
    with pytest.raises(MlsysimError, match="k must be a finite number"):
        cycles_needed(spread, 0.5, k=0)


def test_each_overhead_says_whether_its_cycles_resolve_the_bound():
    d = _record()
    rows = {r["figure"]: r for r in overhead_resolution(d)}
    assert set(rows) == {r["figure"] for r in model_table(d) if r["figure"].endswith("overhead")}
    e = d["points"][0]["dcp_async"]
    e["overheads_s"] = [0.2, 0.5, 0.8, 0.5]
    (row,) = [r for r in overhead_resolution(d) if r["figure"] == "2 ranks, 1000 MB: dcp-async overhead"]
    pred = e["predicted"]["refined"]["overhead_s"]
    assert row["cycles"] == 4 and row["needed"] == cycles_needed([0.2, 0.5, 0.8, 0.5], pred)
    assert row["resolved"] is (4 >= row["needed"]) and row["spread_s"] == pytest.approx(0.2449490, rel=1e-6)
    assert row["needed_s"] is None                                     # the record has no cadence (every)
    d["every"], e["plain_step_s"] = 4, 0.5
    (row,) = [r for r in overhead_resolution(d) if r["figure"] == "2 ranks, 1000 MB: dcp-async overhead"]
    assert row["needed_s"] == pytest.approx(row["needed"] * 4 * 0.5)
    e.pop("plain_step_s")
    (row,) = [r for r in overhead_resolution(d) if r["figure"] == "2 ranks, 1000 MB: dcp-async overhead"]
    assert row["needed_s"] is None
    e["overheads_s"] = [0.5, 0.5]
    (row,) = [r for r in overhead_resolution(d) if r["figure"] == "2 ranks, 1000 MB: dcp-async overhead"]
    assert row["needed"] == 1 and row["resolved"]
    e["overheads_s"] = [0.5]                                            # one cycle: no spread to judge by
    assert "2 ranks, 1000 MB: dcp-async overhead" not in {r["figure"] for r in overhead_resolution(d)}
    shipped = overhead_resolution(remodel(recorded()))
    assert len(shipped) == 12 and all(r["cycles"] == 6 for r in shipped)


def test_a_run_s_dcp_staging_can_be_set_to_the_probe_s_back_to_back_timing():
    held = load_records()["lab_dist-2026-12-06c"]                      # staged held through 4 steps, nothing else
    assert all(q["gloo"]["dcp_stage_steps"] == 4 and "dcp_stage_back_s" not in q["gloo"] for q in held["points"])
    assert staged_back_to_back(held) == held                           # no back-to-back timing: left as it is
    both = copy.deepcopy(held)
    g = both["points"][2]["gloo"]                                      # 2 ranks, a gigabyte
    g["dcp_stage_back_s"], g["dcp_stage_back_own_s"] = 1.5 * g["dcp_stage_s"], 0.4
    back = staged_back_to_back(both)
    t, t0 = back["points"][2]["terms"], both["points"][2]["terms"]
    assert t["dcp_stage_Bps"] == pytest.approx(g["dcp_stage_B"] / (1.5 * g["dcp_stage_s"]))
    assert t["dcp_stage_own_Bps"] == pytest.approx(g["dcp_stage_B"] / 0.4)
    assert t0["dcp_stage_Bps"] == pytest.approx(g["dcp_stage_B"] / g["dcp_stage_s"])      # the input is untouched
    assert [q["terms"] for i, q in enumerate(back["points"]) if i != 2] == \
        [q["terms"] for i, q in enumerate(both["points"]) if i != 2]
    # the model again: DCP's stall takes rank 0's own staging, 0.4 s here where the held probe timed 0.266 s
    stall = [remodel(d)["points"][2]["dcp_async"]["predicted"]["refined"]["stall_s"] for d in (both, back)]
    assert round(g["dcp_stage_own_s"], 3) == 0.266 and stall[1] - stall[0] == pytest.approx(0.4 - 0.266, abs=0.002)


def test_the_start_a_restart_meets_is_the_mean_of_the_jobs_two_launches():
    assert terms.job_start_s(6.0, 9.0) == 7.5 and terms.job_start_s(6.0) == 6.0 and terms.job_start_s(6.0, None) == 6.0
    for bad in ((0.0, 9.0), (6.0, -1.0), (6.0, math.nan), (math.inf, 9.0), ("6", 9.0)):
        with pytest.raises(MlsysimError, match="must be a finite start in seconds > 0"):
            terms.job_start_s(*bad)
    shipped = recorded()   # its node losses timed one start each: their downtimes stand on it alone
    assert all("start_apart_s" not in n for n in shipped["node_loss"]) and remodel(shipped) == shipped
    run = copy.deepcopy(shipped)
    n = run["node_loss"][0]
    n["start_apart_s"] = n["start_s"] + 2.0
    got, before = remodel(run)["node_loss"][0]["predicted"]["refined"], n["predicted"]["refined"]
    for key in ("downtime_peer_s", "downtime_storage_s"):             # each downtime 1 s later: T half-way
        assert got[key] == pytest.approx(before[key] + 1.0)
    assert got["peer_memory_s"] == before["peer_memory_s"] and n["start_apart_s"] == n["start_s"] + 2.0


def test_the_two_launches_bound_the_kept_runs_downtimes_better_than_the_jobs_own_start_alone():
    """The counts job_start_s's docstring gives: the kept runs from lab_dist-2026-12-05j on, each downtime predicted
    (``remodel``) with T the mean of the job's two launches and with its own first start alone."""
    held = {}
    for name, run in load_records().items():
        if name < "lab_dist-2026-12-05j":
            continue
        for way, d in (("mean", run), ("own", own_start_only(run))):
            rows = [r for r in model_table(remodel(d)) if ": downtime," in r["figure"]]
            k = (way, "up to -06g" if name <= "lab_dist-2026-12-06g" else name)      # the runs recorded after apart
            held[k] = [held.get(k, [0, 0])[0] + sum(r["holds"] for r in rows), held.get(k, [0, 0])[1] + len(rows)]
    assert held == {("mean", "up to -06g"): [39, 40], ("own", "up to -06g"): [36, 40],
                    ("mean", "lab_dist-2026-12-06h"): [4, 4], ("own", "lab_dist-2026-12-06h"): [1, 4],
                    ("mean", "lab_dist-2026-12-06i"): [2, 4], ("own", "lab_dist-2026-12-06i"): [4, 4],
                    ("mean", "lab_dist-2026-12-06j"): [1, 4], ("own", "lab_dist-2026-12-06j"): [3, 4],
                    ("mean", "lab_dist-2026-12-07"): [3, 4], ("own", "lab_dist-2026-12-07"): [3, 4],
                    ("mean", "lab_dist-2026-12-07b"): [4, 4], ("own", "lab_dist-2026-12-07b"): [4, 4],
                    ("mean", "lab_dist-2026-12-07c"): [4, 4], ("own", "lab_dist-2026-12-07c"): [4, 4],
                    ("mean", "lab_dist-2026-12-07d"): [4, 4], ("own", "lab_dist-2026-12-07d"): [4, 4],
                    ("mean", "lab_dist-2026-12-07e"): [4, 4], ("own", "lab_dist-2026-12-07e"): [4, 4],
                    ("mean", "lab_dist-2026-12-07f"): [4, 4], ("own", "lab_dist-2026-12-07f"): [4, 4],
                    ("mean", "lab_dist-2026-12-08"): [4, 4], ("own", "lab_dist-2026-12-08"): [4, 4],
                    ("mean", "lab_dist-2026-12-08b"): [4, 4], ("own", "lab_dist-2026-12-08b"): [4, 4]}
    assert sum(v[0] for (way, _), v in held.items() if way == "mean") == 77 \
        and sum(v[0] for (way, _), v in held.items() if way == "own") == 75


def test_a_model_exactly_right_on_average_misses_by_the_measurements_noise_alone():
    from mlsysim.lab.distributed.results import chance_misses, miss_chance
    from mlsysim.lab.pytorch.results import within_bound
    assert miss_chance(2.0, 0.0) == 0.0 and miss_chance(2.0, 0.1) < 1e-4
    z = lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2)))
    assert miss_chance(2.0, 0.4) == pytest.approx(1 - (z((2 / 0.75 - 2) / 0.4) - z((2 / 1.25 - 2) / 0.4)))
    assert miss_chance(0.05, 0.01) == pytest.approx(1 - (z((0.075 - 0.05) / 0.01) - z((0.05 / 1.5 - 0.05) / 0.01)))
    # the bound widens below 0.1 s: a mean of 0.11 s may fall under it and still hold within x1.5
    assert miss_chance(0.11, 0.02) < miss_chance(0.2, 0.02 * 0.2 / 0.11)
    rng = np.random.default_rng(3)             # draws about a right model: the share outside the bound
    for p, se in ((2.0, 0.4), (0.12, 0.03), (0.05, 0.015)):
        x = rng.normal(p, se, 20_000)
        outside = np.mean([not within_bound(v, p) if v > 0 else True for v in x])
        assert outside == pytest.approx(miss_chance(p, se), abs=0.01)
    for bad, match in (((-1.0, 0.1), "measured_s must be"), ((0.0, 0.1), "measured_s must be above 0"),
                       ((1.0, math.nan), "se_s must be"), ((1.0, "0.1"), "se_s must be")):
        with pytest.raises(MlsysimError, match=match):
            miss_chance(*bad)
    d = _record()
    c = chance_misses(d)
    rows = model_table(d)
    sampled = [r for r in rows if r["measured_se_s"] is not None]
    assert c["sampled"] == len(sampled) and c["unsampled"] == len(rows) - len(sampled)
    assert c["expected"] == pytest.approx(sum(miss_chance(r["measured_s"], r["measured_se_s"]) for r in sampled))
    assert c["all_hold"] == pytest.approx(math.prod(1 - miss_chance(r["measured_s"], r["measured_se_s"])
                                                    for r in sampled))
    assert [r["chance"] for r in c["rows"]] == sorted((r["chance"] for r in c["rows"]), reverse=True)


def test_a_node_loss_timed_three_times_gives_its_figures_a_standard_error():
    d = remodel(load_records()["lab_dist-2026-12-06j"])
    once = {r["figure"]: r for r in model_table(d) if r["figure"].startswith("2 nodes")}
    assert len(once) == 8 and all(r["measured_se_s"] is None for r in once.values())
    n = d["node_loss"][0]
    keys = ("recovery_s", "recovery_storage_s", "downtime_s")
    trials = [{k: n[k] for k in keys}, {k: n[k] for k in keys}, {k: n[k] for k in keys}]
    trials[1].update(recovery_s=n["recovery_s"] + 0.3, downtime_s=[x + 3.0 for x in n["downtime_s"]])
    trials[2].update(recovery_s=n["recovery_s"] - 0.3, downtime_s=[x - 3.0 for x in n["downtime_s"]])
    n["trials"] = trials
    rows = {r["figure"]: r for r in model_table(d)}
    tag = "2 nodes x 1, 1013 MB"
    assert rows[f"{tag}: peer-memory recovery"]["measured_se_s"] == pytest.approx(0.3 / math.sqrt(3))
    assert rows[f"{tag}: downtime, peer recovery"]["measured_se_s"] == pytest.approx(3.0 / math.sqrt(3))
    assert rows[f"{tag}: storage recovery"]["measured_se_s"] == 0.0
    assert all(rows[f]["measured_se_s"] is None for f in rows if f.startswith("2 nodes x 2"))
    # a run of node losses alone carries the terms it was predicted with: remodel takes them
    alone = {**d, "points": [], "node_loss": [{**n, "terms": d["points"][2]["terms"]}]}
    assert remodel(alone)["node_loss"][0]["predicted"] == d["node_loss"][0]["predicted"]


def test_against_others_judges_each_run_by_the_other_runs_mean():
    from mlsysim.lab.pytorch.results import within_bound
    base = recorded()
    fig = next(r for r in model_table(remodel(base)) if r["figure"].endswith("storage recovery"))
    doubled = copy.deepcopy(base)
    doubled["node_loss"][0]["recovery_storage_s"] *= 2            # one run measured twice the others' value
    j = against_others({"a": base, "b": copy.deepcopy(base), "c": doubled})
    # c against the mean of a and b (x): 2x misses; a and b against the mean of x and 2x (1.5 x): x / 1.5 x misses
    assert j["figures_missed"][fig["figure"]]["others"] == 3
    model_misses = 2 * (not fig["holds"]) + (not within_bound(2 * fig["measured_s"], fig["refined_s"]))
    assert j["figures_missed"][fig["figure"]]["model"] == model_misses
    # every other figure is measured alike in the three runs: its others' mean is its measurement, which holds
    assert all(m["others"] == 0 for f, m in j["figures_missed"].items() if f != fig["figure"])
    held = {n: r["others_held"] for n, r in j["runs"].items()}
    assert held == {"a": 61, "b": 61, "c": 61} and {r["figures"] for r in j["runs"].values()} == {62}
    assert j["runs"]["a"]["model_held"] == sum(r["holds"] for r in model_table(remodel(base)))
    assert j["runs"]["a"]["model_only"] == 62 - j["runs"]["a"]["model_held"] - (not fig["holds"])
    with pytest.raises(MlsysimError, match="three recorded runs or more, got 2"):
        against_others({"a": base, "b": base})


def test_the_four_rank_stalls_end_with_the_slowest_ranks_copy():
    """The counts in ``terms``' docstring (the concurrent stall where N > C), from the kept runs -06d to -07."""
    runs = {n: d for n, d in load_records().items() if "lab_dist-2026-12-06d" <= n <= "lab_dist-2026-12-07"}
    own_over_last, from_own, from_last = [], [], []
    for d in runs.values():
        for q in d["points"]:
            if q["world_size"] != 4:
                continue
            jt, c = q["concurrent"]["job_terms"], q["concurrent"]
            fixed = q["terms"]["own_stall_s"] or 0.0
            own_over_last.append(jt["copy_own_s"] / jt["copy_s"])
            from_own.append(c["stall_s"] / (jt["copy_own_s"] + fixed))
            from_last.append(c["stall_s"] / (jt["copy_s"] + fixed))
    assert len(runs) == 7 and len(own_over_last) == 21
    assert (round(min(own_over_last), 2), round(max(own_over_last), 2)) == (0.35, 0.98)
    assert (round(min(from_own), 2), round(max(from_own), 2)) == (0.87, 2.45)
    assert (round(min(from_last), 2), round(max(from_last), 2)) == (0.56, 1.49)
    # and so the model takes them: its stall on 4 ranks is the last rank's copy and the fixed cost
    for d in runs.values():
        for q in remodel(d)["points"]:
            if q["world_size"] == 4:
                jt = q["concurrent"]["job_terms"]
                want = jt["copy_s"] + (q["terms"]["own_stall_s"] or 0.0)
                assert q["concurrent"]["predicted"]["refined"]["stall_s"] == pytest.approx(want, rel=0.01)


def test_dcp_s_writer_as_the_probe_and_the_job_s_thread_put_it_in_the_kept_run_the_docstring_names():
    """The ratios the module docstring gives for DCP's overhead: in lab_dist-2026-12-07d the probe's t + u_f R
    against w_d, at a gigabyte and at 61 MB, on 2 and 4 ranks; the overhead takes the larger."""
    d = remodel(load_records()["lab_dist-2026-12-07d"])
    ratio = {(q["world_size"], round(q["state_B"] / 1e6)):
             round((q["terms_s"]["torch_crc_s"] + q["terms_s"]["cached_write_s"]) / q["terms_s"]["dcp_writer_cpu_s"], 2)
             for q in d["points"]}
    assert [ratio[(2, 1013)], ratio[(4, 1013)], ratio[(2, 61)], ratio[(4, 61)]] == [1.69, 1.68, 0.68, 0.53]
    held = {r["figure"]: round(r["ratio"], 2) for r in model_table(d)}
    assert [held[f"{n} ranks, 1013 MB: dcp-async overhead"] for n in (2, 4)] == [1.05, 1.13]
