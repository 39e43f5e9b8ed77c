"""The PyTorch comparison's refined model (mlsysim.lab.pytorch.model): its table, term by term."""
import math

import pytest

from mlsysim.errors import MlsysimError
from mlsysim.lab.floors import Floors
from mlsysim.lab.pytorch.model import ALL, engines_model

F = Floors(size_B=2e9, copy_Bps=10e9, write_Bps=1e9, read_cold_Bps=2e9, read_warm_Bps=4e9,
           write_rounds_s=(2.5, 2.0, 3.0, 2.2), cache_write_Bps=4e9, cache_rewrite_Bps=8e9, fresh_copy_Bps=5e9,
           fresh_copy_small_pages_Bps=2.5e9, crc_Bps=20e9)


def test_terms_are_seconds_for_the_floors_size():
    x = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0)["terms"]
    assert x == pytest.approx({"c": 0.2, "f": 0.4, "F": 0.8, "p": 0.5, "q": 0.25, "W": 2.35, "k": 0.1, "t": 0.5,
                               "r": 1.0, "d": 0.2, "L": 0.0, "W_t": 2.35, "p_t": 0.5, "R": 1.0,
                               "G": 1.0, "V": 2.35, "D": 0.8})   # d = S/c, W_t = W, p_t = p, R = r, G = R, D = S/F
    # where not timed; V = W_t: the first window's pages (p_t) are faster than the disk
    assert F.typical_write_s == pytest.approx(2.35)      # the median of the four rounds, not the best


def test_the_snapshot_the_layout_and_the_disk_in_training_as_timed():
    e = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, snapshot_s=0.3, layout_s=0.02, training_write_s=3.0)
    assert e["concurrent"]["stall_s"] == pytest.approx(0.32) == e["pipelined"]["stall_s"]
    assert e["concurrent"]["durable_s"] == pytest.approx(0.3 + 2.35)            # the rounds' disk
    assert e["pipelined"]["training_stall_s"] == pytest.approx(0.02)            # the copy hidden, the layout not
    assert e["sync"]["training_stall_s"] == pytest.approx(3.0) and e["sync"]["stall_s"] == pytest.approx(2.35)
    assert e["dcp"]["training_stall_s"] == pytest.approx(1.0 + 3.0)
    for bad in (dict(snapshot_s=0.0), dict(training_write_s=float("nan")), dict(layout_s=-1.0)):
        with pytest.raises(MlsysimError, match=next(iter(bad))):
            engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, **bad)


def test_each_engine_adds_its_own_work_to_the_floors():
    e = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0)
    assert set(e) == set(ALL) | {"terms"}
    # PyTorch's writers in the rounds: pages an older checkpoint's deletion freed (q); in training new ones (p)
    assert e["torch.save"]["stall_s"] == pytest.approx(0.5 + 0.25) and e["torch.save"]["durable_s"] is None
    assert e["torch.save"]["training_stall_s"] == pytest.approx(0.5 + 0.5)
    assert e["torch.save+fsync"]["durable_s"] == pytest.approx(0.75 + 2.35) == e["dcp"]["stall_s"]
    assert e["dcp"]["training_stall_s"] == pytest.approx(1.0 + 2.35)
    # DCP's async_save: the staging copy into new tensors, then its write into pages freed before the save
    assert e["dcp-async"]["stall_s"] == pytest.approx(0.8) and e["dcp-async"]["durable_s"] == pytest.approx(3.9)
    # this package's CRC-32 (0.1 s) runs beside its write (2.35 s): the longer of the two
    assert e["sync"]["durable_s"] == pytest.approx(2.35)
    assert e["concurrent"]["durable_s"] == pytest.approx(0.2 + 2.35) == e["pipelined"]["durable_s"]
    # loads: the read, new tensors with every page new (0.8 - 0.2; this package's loader allocates as
    # torch.load does), DCP's copy
    assert e["sync"]["load_s"] == pytest.approx(1.0 + 0.6) and e["dcp"]["load_s"] == pytest.approx(1.0 + 0.6 + 0.2)
    assert e["torch.save"]["load_s"] == e["sync"]["load_s"]
    # new tensors where the allocator hands back what an earlier load freed: 2 GB at 5 GB/s, 0.4 - 0.2
    u = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, alloc_copy_Bps=5e9)
    assert u["terms"]["u"] == pytest.approx(0.4) and u["sync"]["load_s"] == pytest.approx(1.2)
    assert u["dcp"]["load_s"] == pytest.approx(1.0 + 0.2 + 0.2)
    with pytest.raises(MlsysimError, match="alloc_copy_Bps must be a measured rate"):
        engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, alloc_copy_Bps=0.0)
    # the cold reads: 1.2 s front to back; each archive read from its end first adds 0.3 s (DCP's loader)
    g = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, read_s=1.2, pieces_extra_s=0.3)
    assert g["terms"]["G"] == pytest.approx(1.5)
    assert g["dcp"]["load_s"] == pytest.approx(1.5 + 0.6 + 0.2) == g["dcp-async"]["load_s"]
    assert g["torch.save"]["load_s"] == pytest.approx(1.2 + 0.6) == g["sync"]["load_s"]
    only_r = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, read_s=1.2)      # G = R where not timed
    assert only_r["dcp"]["load_s"] == pytest.approx(1.2 + 0.6 + 0.2)
    faster = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, pieces_extra_s=-0.2)   # the floor: G = R = S/r
    assert faster["terms"]["G"] == faster["terms"]["R"] == pytest.approx(1.0)
    with pytest.raises(MlsysimError, match="pieces_extra_s must be a measured time"):
        engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, pieces_extra_s=math.nan)
    assert e["torch.save"]["load_s"] == pytest.approx(1.0 + 0.6)


def test_what_the_pieces_add_is_the_median_of_each_rounds_two_reads_difference():
    from mlsysim.lab.pytorch.model import pieces_extra_s
    assert pieces_extra_s([1.0, 0.5, 0.8], [1.1, 0.9, 0.7]) == pytest.approx(0.1)     # 0.1, 0.4, -0.1
    assert pieces_extra_s([0.8, 0.6], [0.5, 0.5]) == pytest.approx(-0.2)             # a difference may be < 0
    assert pieces_extra_s([], []) is None and pieces_extra_s(None, [0.5]) is None
    assert pieces_extra_s([0.5, 0.6], [0.5]) is None                                 # unpaired rounds


def test_overhead_is_the_stall_plus_the_work_beside_the_training_on_its_cores():
    e = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, cores=2, train_threads=2)
    assert e["sync"]["overhead_s"] == e["sync"]["stall_s"]
    # beside: the CRC-32 and the write into pages the cache gave back (this package's writers), 0.1 + 0.25,
    # but for the first 80 MiB, which in training land in memory as the training left it (p_t, 0.5 s for 2 GB)
    cached = 0.25 + (80 * 2 ** 20 / 2e9) * (0.5 - 0.25)
    assert e["concurrent"]["overhead_s"] == pytest.approx(0.2 + (0.1 + cached) / 2)
    assert e["pipelined"]["training_stall_s"] == 0.0                 # a 0.2 s copy behind a 1 s pass
    assert e["pipelined"]["overhead_s"] == pytest.approx((0.2 + 0.1 + cached) / 2)   # its copy runs beside too
    assert engines_model(F, 4e9, pass_s=0.05)["pipelined"]["training_stall_s"] == pytest.approx(0.15)
    one = engines_model(F, 4e9, pass_s=1.0, cores=1)
    assert one["dcp-async"]["overhead_s"] == pytest.approx(0.8 + 1.0)


def test_dcp_async_stages_as_its_stager_was_timed():
    e = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, staging_s=0.3)    # D: 0.3 s, not S/F's 0.8
    assert e["terms"]["D"] == 0.3 and e["dcp-async"]["stall_s"] == pytest.approx(0.3)
    assert e["dcp-async"]["durable_s"] == pytest.approx(0.3 + 0.5 + 0.25 + 2.35)     # then S/t + S/q + W
    assert e["dcp-async"]["training_stall_s"] == pytest.approx(0.3)                # not timed in training
    with pytest.raises(MlsysimError, match="staging_s must be a measured time"):
        engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, staging_s=-0.3)


def test_dcp_async_stages_in_training_as_its_staging_was_timed_there():
    # D 0.3 s from the rounds' prepared memory, D_t 1.1 s from the memory as the training left it
    e = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, staging_s=0.3, training_staging_s=1.1)
    assert e["terms"]["D_t"] == 1.1 and e["dcp-async"]["stall_s"] == pytest.approx(0.3)
    assert e["dcp-async"]["durable_s"] == pytest.approx(0.3 + 0.5 + 0.25 + 2.35)   # the rounds keep D
    assert e["dcp-async"]["training_stall_s"] == pytest.approx(1.1)
    assert e["dcp-async"]["overhead_s"] == pytest.approx(1.1)                      # a free core: nothing beside
    waits = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, staging_s=0.3, training_staging_s=1.1, interval_s=2.0)
    w = 0.5 + 0.5 + 2.35 - 2.0                          # P_t = S/t + p_t + W_t, longer than I by 1.35 s
    assert waits["dcp-async"]["training_stall_s"] == pytest.approx(1.1 + w / 2)
    assert "D_t" not in engines_model(F, torch_crc_Bps=4e9, pass_s=1.0)["terms"]   # not timed: D stands in
    with pytest.raises(MlsysimError, match="training_staging_s must be a measured time"):
        engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, training_staging_s=float("nan"))


def test_dcp_loads_as_its_loader_deserializes_each_piece_then_copies_it_in_place():
    # G 1.0 + 0.5 s (the read, what each archive from its end adds), Z 0.9 s (torch.load of every piece from
    # memory, 0.7 s beyond the 0.2 s copy), d 0.3 s (the copy into the state, tensor after tensor):
    # 1.5 + 0.7 + 0.3; A no longer counts
    e = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, pieces_extra_s=0.5, deserialize_s=0.9, snapshot_s=0.3)
    assert e["terms"]["Z"] == 0.9
    assert e["dcp"]["load_s"] == pytest.approx(2.5) == e["dcp-async"]["load_s"]
    assert e["sync"]["load_s"] == pytest.approx(1.0 + 0.6)                        # the other loaders as before
    assert "Z" not in engines_model(F, 4e9, pass_s=1.0)["terms"]
    with pytest.raises(MlsysimError, match="deserialize_s must be a measured time"):
        engines_model(F, 4e9, pass_s=1.0, deserialize_s=0.0)


def test_a_write_timed_beside_the_training_is_what_the_background_engines_cost_it():
    # a free core: the share charges nothing, the timed write beside the training 0.25 s
    e = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, cores=2, train_threads=1, write_beside_s=0.25,
                      prune_s={"concurrent": 0.3, "sync": 0.3})
    assert e["terms"]["B"] == 0.25
    for n in ("concurrent", "pipelined", "dcp-async"):
        assert e[n]["overhead_s"] == pytest.approx(e[n]["training_stall_s"] + 0.25), n
    assert e["sync"]["overhead_s"] == pytest.approx(e["sync"]["training_stall_s"] + 0.3)   # blocks: no B
    busy = engines_model(F, 4e9, pass_s=1.0, cores=2, train_threads=2, write_beside_s=0.25, prune_s={"concurrent": 0.3})
    assert busy["concurrent"]["overhead_s"] == pytest.approx(0.2 + 0.25 + 0.3 / 2)   # the deletion at the share
    assert engines_model(F, 4e9, pass_s=1.0, write_beside_s=-0.01)["terms"]["B"] == 0.0     # noise below zero
    with pytest.raises(MlsysimError, match="write_beside_s must be a measured time"):
        engines_model(F, 4e9, pass_s=1.0, write_beside_s=math.nan)


def test_in_training_the_memory_is_timed_again():
    # the page-cache write as the training left the memory: 0.9 s for the state
    e = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, training_cache_write_s=0.9)
    assert e["torch.save"]["training_stall_s"] == pytest.approx(0.5 + 0.9) and e["torch.save"]["stall_s"] == 0.75
    assert e["dcp"]["training_stall_s"] == pytest.approx(0.5 + 0.9 + 2.35)
    assert e["dcp-async"]["overhead_s"] == e["dcp-async"]["training_stall_s"] == pytest.approx(0.8)   # a free core
    with pytest.raises(MlsysimError, match="training_cache_write_s must be a measured time"):
        engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, training_cache_write_s=0.0)


def test_in_training_this_packages_first_window_meets_the_memory_the_training_left():
    # p_t 10 s for 2 GB (5 ns/B, slower than the disk's 2.35 s): the first 80 MiB (4.19 %) at that pace
    e = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, training_cache_write_s=10.0, training_write_s=2.0)
    omega = 80 * 2 ** 20 / 2e9
    assert e["terms"]["V"] == pytest.approx(2.0 + omega * 8.0) == pytest.approx(2.3355, abs=1e-4)
    assert e["sync"]["training_stall_s"] == e["terms"]["V"] and e["sync"]["stall_s"] == pytest.approx(2.35)
    busy = engines_model(F, 4e9, pass_s=1.0, cores=2, train_threads=2, training_cache_write_s=10.0)
    assert busy["concurrent"]["overhead_s"] == pytest.approx(0.2 + (0.1 + (1 - omega) * 0.25 + omega * 10.0) / 2)
    small = Floors(**{**F.__dict__, "size_B": 50e6})     # a state under the window: all of it at p_t's pace
    s = engines_model(small, 4e9, pass_s=1.0, training_cache_write_s=1.0, training_write_s=0.1)
    assert s["terms"]["V"] == pytest.approx(1.0)


def test_a_core_the_training_leaves_free_takes_the_work_beside_it():
    free = engines_model(F, 4e9, pass_s=1.0, cores=2, train_threads=1)
    assert all(free[e]["overhead_s"] == free[e]["training_stall_s"] for e in ALL)


def test_a_deletion_in_the_callers_thread_is_paid_by_the_training():
    prune = {e: 0.3 for e in ALL}
    free = engines_model(F, 4e9, pass_s=1.0, cores=2, train_threads=1, prune_s=prune)
    for e in ("torch.save", "torch.save+fsync", "dcp", "sync"):       # deleted inside save(), after the stall
        assert free[e]["overhead_s"] == pytest.approx(free[e]["training_stall_s"] + 0.3), e
        assert free[e]["stall_s"] == engines_model(F, 4e9, pass_s=1.0)[e]["stall_s"]
    for e in ("dcp-async", "concurrent", "pipelined"):                # deleted by the writer, on the free core
        assert free[e]["overhead_s"] == free[e]["training_stall_s"], e
    busy = engines_model(F, 4e9, pass_s=1.0, cores=2, train_threads=2, prune_s=prune)
    cached = 0.25 + (80 * 2 ** 20 / 2e9) * (0.5 - 0.25)            # the first window in memory the training left
    assert busy["concurrent"]["overhead_s"] == pytest.approx(0.2 + (0.1 + cached + 0.3) / 2)
    with pytest.raises(MlsysimError, match=r"prune_s\['sync'\] must be a measured time"):
        engines_model(F, 4e9, pass_s=1.0, prune_s={"sync": -0.1})


@pytest.mark.parametrize("kw", [dict(torch_crc_Bps=math.nan, pass_s=1.0), dict(torch_crc_Bps=4e9, pass_s=-1.0),
                                dict(torch_crc_Bps=4e9, pass_s=1.0, cores=0),
                                dict(torch_crc_Bps=4e9, pass_s=1.0, train_threads=1.5)])
def test_bad_input_names_what_is_missing(kw):
    with pytest.raises(MlsysimError, match="torch_crc_Bps|pass_s|cores|train_threads"):
        engines_model(F, **kw)


def test_a_floor_without_the_new_rates_is_refused():
    old = Floors(size_B=1e9, copy_Bps=10e9, write_Bps=1e9, read_cold_Bps=2e9, read_warm_Bps=4e9)
    with pytest.raises(MlsysimError, match="fresh_copy_Bps must be a measured rate"):
        engines_model(old, torch_crc_Bps=4e9, pass_s=1.0)


def test_the_recorded_run_holds_the_models_predictions():
    """The stored run's refined predictions are what the model gives now for the rates it measured:
    a change of the model shows here until the record is computed again (``model.remodel``)."""
    from mlsysim.lab.pytorch.model import remodel
    from mlsysim.lab.pytorch.results import recorded
    rec = recorded()
    again = remodel(rec)
    for r, s in zip(rec["engines"], again["engines"]):
        for k, v in r["model"].items():
            assert (v is None and s["model"][k] is None) or v == pytest.approx(s["model"][k]), (r["engine"], k)
    assert rec["terms_s"] == pytest.approx(again["terms_s"])


def test_a_background_write_longer_than_the_interval_makes_the_next_save_wait():
    # DCP's writer in training: S/t + p_t + W_t = 0.5 + 0.5 + 2.35 = 3.35 s against 2 s of training between the
    # checkpoints: the second save and the final wait each wait 1.35 s; ours write for max(S/k, V) = 2.35 s
    e = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, staging_s=0.3, interval_s=2.0)
    assert e["terms"]["I"] == 2.0
    assert e["dcp-async"]["training_stall_s"] == pytest.approx(0.3 + 1.35 / 2)    # the median: midway
    assert e["dcp-async"]["overhead_s"] == pytest.approx(0.3 + 1.35)
    assert e["concurrent"]["training_stall_s"] == pytest.approx(0.2 + 0.35 / 2)
    assert e["concurrent"]["overhead_s"] == pytest.approx(0.2 + 0.35)
    assert e["dcp-async"]["stall_s"] == pytest.approx(0.3)                         # the rounds wait for each write
    slow = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, staging_s=0.3, interval_s=5.0)
    plain = engines_model(F, torch_crc_Bps=4e9, pass_s=1.0, staging_s=0.3)
    for n in ("dcp-async", "concurrent", "pipelined", "sync", "dcp"):              # a long interval: nothing waits
        for k in ("training_stall_s", "overhead_s"):
            assert slow[n][k] == pytest.approx(plain[n][k])
    for n in ("sync", "dcp", "torch.save+fsync"):                                 # blocking engines never wait
        assert e[n]["overhead_s"] == pytest.approx(plain[n]["overhead_s"])
    with pytest.raises(MlsysimError, match="interval_s must be a measured time"):
        engines_model(F, 4e9, pass_s=1.0, interval_s=0.0)
