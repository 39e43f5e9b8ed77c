"""Checkpoint files under damage: torn, corrupt, uncommitted, a full disk, an unwritable
directory, many crashes. Never a silent load of bad state; never the loss of the last good one."""
import errno
import os
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mlsysim.lab import store
from mlsysim.lab.engines import ConcurrentEngine, SyncEngine, make_engine
from mlsysim.lab.store import CheckpointError, CheckpointWarning, load_latest
from mlsysim.lab.train import LabConfig, Trainer

ENGINES = ["sync", "concurrent"]


def _state(step, n=1000):
    return {"step": step, "lr": 0.1 * step, "w": np.full(n, step, dtype=np.float32),
            "nested": {3: [np.arange(step + 1), (1.5, None, "x")]}}


def _save(directory, steps, kind="sync", **kw):
    with make_engine(kind, directory, **kw) as e:
        for s in steps:
            e.save(s, _state(s))


def test_round_trip_keeps_every_type_exactly(tmp_path):
    _save(tmp_path, [7])
    got = load_latest(tmp_path)
    assert got.step == 7 and got.state["lr"] == 0.1 * 7 and got.state["nested"][3][1] == (1.5, None, "x")
    assert np.array_equal(got.state["w"], _state(7)["w"]) and got.state["w"].dtype == np.float32
    assert got.size_B == os.path.getsize(tmp_path / store.data_name(7))


@pytest.mark.parametrize("kind", ENGINES)
def test_keeps_the_newest_k(tmp_path, kind):
    _save(tmp_path, [1, 2, 3, 4], kind, keep=2)
    assert store.committed_steps(tmp_path) == [3, 4]
    assert sorted(p.name for p in tmp_path.iterdir()) == [store.commit_name(3), store.data_name(3),
                                                         store.commit_name(4), store.data_name(4)]


def _damage(directory, how):
    data = directory / store.data_name(2)
    if how == "truncate":
        with open(data, "r+b") as f:
            f.truncate(data.stat().st_size - 100)
    elif how == "flip":
        with open(data, "r+b") as f:
            f.seek(data.stat().st_size - 10)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0x01]))
    elif how == "no-commit":
        (directory / store.commit_name(2)).unlink()
    elif how == "torn-record":
        (directory / store.commit_name(2)).write_text('{"step": 2, "size_')
    return data if how != "torn-record" else directory / store.commit_name(2)


@pytest.mark.parametrize("how", ["truncate", "flip", "no-commit", "torn-record"])
def test_damaged_newest_is_skipped_with_a_warning_naming_it(tmp_path, how):
    _save(tmp_path, [1, 2], keep=3)
    bad = _damage(tmp_path, how)
    with pytest.warns(CheckpointWarning, match=bad.name):
        got = load_latest(tmp_path)
    assert got.step == 1 and np.array_equal(got.state["w"], _state(1)["w"])


def test_nothing_valid_is_a_clear_error(tmp_path):
    _save(tmp_path, [2], keep=1)
    _damage(tmp_path, "flip")
    with pytest.warns(CheckpointWarning), pytest.raises(CheckpointError, match="no valid committed checkpoint"):
        load_latest(tmp_path)
    (tmp_path / "new").mkdir()
    with pytest.raises(CheckpointError, match="empty"):
        load_latest(tmp_path / "new")


def test_unwritable_directory_is_a_clear_error(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    for kind in ENGINES:
        with pytest.raises(CheckpointError, match="not writable"):
            make_engine(kind, f / "ckpt")


@pytest.mark.parametrize("kind", ENGINES)
def test_full_disk_keeps_the_last_good_checkpoint(tmp_path, kind):
    """A real ENOSPC from the kernel: the next data file is a link to /dev/full."""
    e = make_engine(kind, tmp_path, keep=1)
    e.save(1, _state(1))
    e.wait()
    os.symlink("/dev/full", tmp_path / (store.data_name(2) + ".tmp"))
    with pytest.raises(CheckpointError, match="no space left") as info:
        e.save(2, _state(2))
        e.wait()
    assert info.value.errno == errno.ENOSPC
    e.abort()
    assert load_latest(tmp_path).step == 1
    assert not (tmp_path / (store.data_name(2) + ".tmp")).exists()


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                           capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


@pytest.mark.parametrize("kind", ENGINES)
def test_small_filesystem_fills_up(tmp_path, kind):
    """A 1 MiB tmpfs: two 0.4 MB checkpoints fit, the third does not."""
    mnt = tmp_path / "small"
    if not _mount_tmpfs(mnt, "1m"):
        pytest.skip("cannot mount a tmpfs here")
    try:
        e = make_engine(kind, mnt, keep=2)
        e.save(1, _state(1, n=100_000))
        e.save(2, _state(2, n=100_000))
        e.wait()
        with pytest.raises(CheckpointError, match="no space left"):
            e.save(3, _state(3, n=100_000))
            e.wait()
        e.abort()
        assert store.committed_steps(mnt) == [1, 2]
        assert load_latest(mnt).step == 2
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_writer_error_reaches_the_training_thread(tmp_path):
    e = ConcurrentEngine(tmp_path, buffers=1)
    os.symlink("/dev/full", tmp_path / (store.data_name(1) + ".tmp"))
    e.save(1, _state(1))  # returns once copied; the writer fails later
    with pytest.raises(CheckpointError):
        e.save(2, _state(2))
    e.abort()


def test_resumed_trainer_continues_exactly(tmp_path):
    t = Trainer(LabConfig(width=16, steps=30, batch=8))
    with SyncEngine(tmp_path) as e:
        for _ in range(10):
            t.step()
        e.save(t.step_count, t.state())
    expected = [t.step() for _ in range(20)]   # crosses an epoch: reshuffle comes from the saved generator
    back = Trainer.from_state(load_latest(tmp_path).state)
    assert [back.step() for _ in range(20)] == expected


def test_torch_state_dicts(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "half": torch.ones(3, dtype=torch.bfloat16),
             "rng": torch.get_rng_state()}
    for kind in ENGINES:
        with make_engine(kind, tmp_path / kind) as e:
            e.save(1, state)
        got = load_latest(tmp_path / kind).state
        for k, v in model.state_dict().items():
            assert torch.equal(got["model"][k], v)
        assert got["optimizer"]["param_groups"] == opt.state_dict()["param_groups"]
        assert torch.equal(got["optimizer"]["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])
        assert got["half"].dtype == torch.bfloat16 and torch.equal(got["half"], state["half"])
        model2 = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        model2.load_state_dict(got["model"])


class Crash(BaseException):
    """Stands for a SIGKILL inside the engine: nothing cleans up after it."""


@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(ENGINES), keep=st.integers(1, 3),
       ops=st.lists(st.one_of(st.just(None), st.sampled_from(["snapshot", "persist", "commit"])), min_size=1,
                    max_size=8))
def test_any_sequence_of_saves_and_crashes_leaves_the_newest_commit_loadable(tmp_path_factory, kind, keep, ops):
    d = tmp_path_factory.mktemp("seq")
    committed = []
    engine = None
    for step, crash_at in enumerate(ops, start=1):
        def hook(point, s, crash_at=crash_at, step=step):
            if point == crash_at and s == step:
                raise Crash
        engine = engine or make_engine(kind, d, keep=keep, hook=hook, on_commit=committed.append)
        engine._hook = hook
        try:
            engine.save(step, _state(step, n=50))
            engine.wait()
        except Crash:
            engine.abort()
            engine = None        # the process died: a new one opens the directory
    if engine is not None:
        engine.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CheckpointWarning)
        if committed:
            got = load_latest(d)
            assert got.step == max(committed)
            assert np.array_equal(got.state["w"], _state(got.step, n=50)["w"])
        else:
            with pytest.raises(CheckpointError):
                load_latest(d)


def test_arrays_keep_their_shape_zero_dimensional_and_non_contiguous_included(tmp_path):
    state = {"scalar": np.array(2.5), "empty": np.zeros((0, 3)), "strided": np.arange(12.0).reshape(3, 4)[:, ::2]}
    with SyncEngine(tmp_path) as e:
        e.save(1, state)
    got = load_latest(tmp_path).state
    for k, a in state.items():
        assert got[k].shape == a.shape and got[k].dtype == a.dtype and np.array_equal(got[k], a), k


def test_a_mapped_read_equals_the_copy_leaves_the_file_alone_and_refuses_a_flipped_byte(tmp_path):
    _save(tmp_path, [5])
    copied, _, size = store.read_checkpoint(tmp_path, 5)
    mapped, _, size_m = store.read_checkpoint(tmp_path, 5, mapped=True)
    assert size_m == size and np.array_equal(mapped["w"], copied["w"])
    assert mapped["nested"][3][1] == copied["nested"][3][1] and mapped["lr"] == copied["lr"]
    assert not mapped["w"].flags.owndata                     # a view of the mapping, not a new buffer
    mapped["w"][:] = -1                                       # copy-on-write: the file is unchanged
    assert np.array_equal(store.read_checkpoint(tmp_path, 5)[0]["w"], copied["w"])
    path = tmp_path / store.data_name(5)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=r"ckpt-000000005\.data: checksum mismatch"):
        store.read_checkpoint(tmp_path, 5, mapped=True)


def test_chunks_hold_the_file_bytes_with_small_pieces_gathered():
    """The sync engine writes ``chunks_of``: the same bytes as the snapshot buffer, in few writes."""
    state = {f"norm{i}": np.full(7, i, dtype=np.float32) for i in range(200)}
    state["big"] = np.arange(3_000_000, dtype=np.float32)          # 12 MB
    lay = store.layout(state, 3)
    buf = np.zeros(lay.size_B, dtype=np.uint8)
    store.fill(buf, lay)
    chunks = [bytes(c) for c in store.chunks_of(lay, 2 ** 20)]
    assert b"".join(chunks) == buf.tobytes()
    assert all(len(c) <= 2 ** 20 for c in chunks)
    assert len(chunks) <= lay.size_B // 2 ** 20 + 3           # not one write per small tensor (201 arrays)


def test_free_page_reporting_is_read_from_the_balloon_device(tmp_path):
    """A balloon device with feature bit 5 set reports free pages; another device's bits do not count."""
    from mlsysim.lab.floors import reports_free_pages
    drivers, devices = tmp_path / "drivers", tmp_path / "devices"
    for name in ("virtio_balloon", "virtio_blk"):
        (drivers / name).mkdir(parents=True)

    def device(dev, driver, bits):
        (devices / dev).mkdir(parents=True)
        (devices / dev / "driver").symlink_to(drivers / driver)
        (devices / dev / "features").write_text(bits + "\n")

    device("virtio1", "virtio_blk", "00000100")
    assert not reports_free_pages(str(devices))
    device("virtio0", "virtio_balloon", "01100001")
    assert not reports_free_pages(str(devices))           # bit 5 clear
    (devices / "virtio0" / "features").write_text("01100101\n")
    assert reports_free_pages(str(devices))
    assert not reports_free_pages(str(tmp_path / "missing"))


@given(cpu=st.floats(0, 10), write=st.floats(0, 10), size=st.floats(1, 4e9))
def test_a_chunked_write_takes_the_longer_stage_and_one_chunk_of_the_shorter(cpu, write, size):
    t = store.pipelined_s(cpu, write, size)
    m = -(-size // store.CHUNK_B)
    assert max(cpu, write) <= t <= cpu + write + 1e-12          # never faster than a stage, never slower than both
    assert t == pytest.approx(max(cpu, write) + min(cpu, write) / m)
    assert store.pipelined_s(cpu, write, store.CHUNK_B) == pytest.approx(cpu + write)   # one chunk: in turn


@pytest.mark.parametrize("kw, name", [({"cpu_s": -0.1}, "cpu_s"), ({"write_s": float("inf")}, "write_s"),
                                      ({"size_B": 0}, "size_B"), ({"chunk_B": 0.5}, "chunk_B")])
def test_a_chunked_write_refuses_times_and_sizes_that_are_not_by_name(kw, name):
    from mlsysim.errors import MlsysimError
    args = {"cpu_s": 0.1, "write_s": 0.2, "size_B": 1e6, **kw}
    with pytest.raises(MlsysimError, match=name):
        store.pipelined_s(**args)
