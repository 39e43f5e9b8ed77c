"""The distributed checkpoint's partition metadata and files, without processes: split then gather
is the identity for any world size and shape (hypothesis), a reshard reads only what it needs,
and a checkpoint with one shard missing, truncated or flipped is refused, naming the shard."""
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mlsysim.lab.distributed import shards as ds
from mlsysim.lab.engines import SyncEngine
from mlsysim.lab.store import CheckpointError, commit_name

shapes = st.lists(st.integers(0, 9), min_size=0, max_size=3).map(tuple)


def _empty(shape, like=None):
    return np.empty(shape, dtype=np.float64)


@settings(max_examples=200, deadline=None)
@given(shape=shapes, world=st.integers(1, 9))
def test_split_then_gather_is_the_identity(shape, world):
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    specs = ds.partition(shape, world)
    pieces = ds.split(a, world)
    assert len(specs) == len(pieces) == world
    for s, p in zip(specs, pieces):
        if p is not None:
            assert tuple(p.shape) == s.local_shape and s.global_shape == shape
    if shape:
        assert sum(s.local_shape[0] for s in specs) == shape[0]          # the rows, each held once
    out = ds.gather(pieces, specs, _empty)
    assert out.shape == a.shape and np.array_equal(out, a)


@settings(max_examples=200, deadline=None)
@given(shape=shapes.filter(bool), old=st.integers(1, 8), new=st.integers(1, 8))
def test_reshard_pieces_gather_to_the_same_tensor(shape, old, new):
    a = np.random.default_rng(0).standard_normal(shape)
    have = list(zip(ds.partition(shape, old), ds.split(a, old)))
    mine = [ds.assemble(shape, ds.chunk_rows(shape[0], new, r), have, _empty) for r in range(new)]
    assert np.array_equal(ds.gather(mine, ds.partition(shape, new), _empty), a)


def test_metadata_round_trips_through_json():
    s = ds.partition((7, 3), 4)[3]
    assert s == ds.ShardSpec((7, 3), (6, 0), (1, 3), "Shard(0)")
    assert ds.ShardSpec.from_json(json.loads(json.dumps(s.to_json()))) == s


# --- files: a global checkpoint written rank by rank in one process -----------------------------
TENSORS = {"w": np.arange(30.0).reshape(10, 3), "b": np.arange(5.0), "step": np.array(3.0)}


def _write(directory, step, world):
    """Each rank's shard through a lab engine, then the global commit (as the worker does)."""
    records = []
    for r in range(world):
        local, specs = {}, {}
        for k, a in TENSORS.items():
            spec = ds.partition(a.shape, world)[r]
            if spec.local_shape == a.shape or spec.placement == ds.SHARD:
                local[k], specs[k] = a[spec.rows()[0]:spec.rows()[1]] if a.shape else a, spec
        state = {"tensors": local, "shared": {"step": step}, "rank_state": {"rank": r}}
        SyncEngine(ds.rank_dir(directory, r), keep=10 ** 9).save(step, state)
        records.append(ds.shard_record(directory, step, r, world, "fsdp", specs))
    return ds.write_global_commit(directory, step, records, run="test")


@pytest.mark.parametrize("old,new", [(4, 2), (2, 4), (3, 3)])
def test_every_rank_reads_its_part_and_the_whole_is_restored(tmp_path, old, new):
    rec = _write(tmp_path, 6, old)
    loads = [ds.read_for_rank(tmp_path, rec, new, r, lambda shape, like: np.empty(shape, like.dtype))
             for r in range(new)]
    for k, a in TENSORS.items():
        pieces = [ld.tensors[k] for ld in loads]
        got = pieces[0].reshape(()) if not a.shape else np.concatenate(pieces)   # the store keeps a NumPy
        assert np.array_equal(got, a)                                           # 0-d array as 1 element
    assert all(ld.shared == {"step": 6} for ld in loads)
    assert [ld.rank_state for ld in loads] == ([{"rank": r} for r in range(new)] if old == new else [None] * new)
    cold = ds.read_for_rank(tmp_path, rec, new, 0, lambda shape, like: np.empty(shape, like.dtype), cold=True)
    assert all(np.array_equal(cold.tensors[k], loads[0].tensors[k]) for k in TENSORS)   # the page cache dropped
    read = sorted(f for ld in loads for f in ld.files)
    assert set(read) == {str(tmp_path / s["file"]) for s in rec["shards"]}   # every shard verified
    if old == new:
        assert len(read) == old                                            # and each read once


@pytest.mark.parametrize("damage", ["missing", "truncated", "flipped"])
def test_a_damaged_shard_is_refused_naming_it(tmp_path, damage):
    rec = _write(tmp_path, 4, 2)
    path = tmp_path / rec["shards"][1]["file"]
    if damage == "missing":
        path.unlink()
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-10])
    else:
        b = bytearray(path.read_bytes())
        b[len(b) // 2] ^= 0xFF
        path.write_bytes(bytes(b))
    with pytest.raises(CheckpointError, match=r"shard of rank 1 of 2: .*rank-00001/ckpt-000000004\.data"):
        ds.read_for_rank(tmp_path, rec, 2, 1, lambda shape, like: np.empty(shape, like.dtype))
    ds.read_for_rank(tmp_path, rec, 2, 0, lambda shape, like: np.empty(shape, like.dtype))   # rank 0's is fine
    with pytest.raises(CheckpointError, match="shard of rank 1 of 2"):                      # also read cold
        ds.read_for_rank(tmp_path, rec, 2, 1, lambda shape, like: np.empty(shape, like.dtype), cold=True)


def test_prune_keeps_the_newest_globals_and_deletes_records_first(tmp_path):
    for s in (2, 4, 6):
        _write(tmp_path, s, 2)
    # a shard that never reached a global commit, older than the ones kept
    SyncEngine(ds.rank_dir(tmp_path, 1), keep=10 ** 9).save(3, {"tensors": {}, "shared": {}, "rank_state": {}})
    assert ds.prune(tmp_path, keep=2) == [2]
    assert ds.global_steps(tmp_path) == [4, 6]
    left = sorted(p.name for p in ds.rank_dir(tmp_path, 1).iterdir())
    assert left == ["ckpt-000000004.commit", "ckpt-000000004.data", "ckpt-000000006.commit", "ckpt-000000006.data"]
    assert not (ds.rank_dir(tmp_path, 0) / commit_name(2)).exists()


def test_global_commit_needs_every_rank(tmp_path):
    rec = _write(tmp_path, 2, 2)
    with pytest.raises(CheckpointError, match="shard records of ranks"):
        ds.write_global_commit(tmp_path, 4, rec["shards"][:1], run="test")


def test_a_directory_of_another_run_is_refused_and_kept(tmp_path):
    ds.claim(tmp_path / "a", {"config": 1})
    ds.claim(tmp_path / "a", {"config": 1})                     # the same run: accepted
    with pytest.raises(CheckpointError, match="another run's checkpoints"):
        ds.claim(tmp_path / "a", {"config": 2})
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "notes.txt").write_text("mine")
    with pytest.raises(CheckpointError, match="not empty"):
        ds.claim(tmp_path / "b", {"config": 1})
    assert (tmp_path / "b" / "notes.txt").read_text() == "mine"


def test_assemble_uses_a_piece_that_is_exactly_the_rows_without_a_copy():
    a = np.arange(24, dtype=np.float64).reshape(6, 4)
    specs, pieces = ds.partition(a.shape, 2), ds.split(a, 2)
    own = ds.assemble(a.shape, specs[1].rows(), list(zip(specs, pieces)), _empty)
    assert own is pieces[1]                                   # the same world size: no copy
    cut = ds.assemble(a.shape, (2, 5), list(zip(specs, pieces)), _empty)   # another shape: rows from both
    assert np.array_equal(cut, a[2:5]) and not any(np.shares_memory(cut, p) for p in pieces)
