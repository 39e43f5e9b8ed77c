"""How much of a checkpoint file the page cache holds after the lab writes or reads it: a durable
write keeps at most a window of it (its pages are given back as the device confirms them), a
resuming reader drops what it has read, and a reader that may share the file leaves it cached.
Measured on real files with the kernel's own answer (``mincore`` on a mapping of the file)."""
import ctypes
import mmap
import os
import sys
import zlib

import numpy as np
import pytest

from mlsysim.lab import floors, store

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="page-cache residency: Linux")

SIZE_B = 10 * store.CHUNK_B + 12_345        # ten chunks and a tail


def cached_B(path) -> int:
    """Bytes of ``path`` in the page cache now (``mincore`` of a read-only mapping)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    size, page = os.path.getsize(path), mmap.PAGESIZE
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
        try:
            pages = -(-size // page)
            vec = np.zeros(pages, dtype=np.uint8)
            view = np.frombuffer(m, dtype=np.uint8)
            assert libc.mincore(view.ctypes.data, size, vec.ctypes.data) == 0, ctypes.get_errno()
            del view
        finally:
            m.close()
    return int((vec & 1).sum()) * page


@pytest.fixture
def data():
    return np.random.default_rng(7).integers(0, 256, size=SIZE_B, dtype=np.uint8)


def test_a_durable_write_keeps_at_most_its_window_cached_and_checksums_every_byte(tmp_path, data):
    path = tmp_path / "ckpt.data"
    size, crc = store.write_durable(path, [data[:1000], data[1000:]])   # a small chunk, then one of 160 MB
    assert cached_B(path) <= store.WINDOW_B + store.CHUNK_B < SIZE_B / 2      # before anything reads it
    assert size == SIZE_B and crc == zlib.crc32(data) and path.read_bytes() == data.tobytes()


def test_the_write_floor_writes_as_the_engines_do(tmp_path, data):
    path = tmp_path / "floor.bin"
    assert floors.write_once(path, data) > 0
    assert cached_B(path) <= store.WINDOW_B + store.CHUNK_B
    assert path.read_bytes() == data.tobytes()


def test_a_resuming_reader_drops_what_it_read_and_a_shared_reader_keeps_it(tmp_path, data):
    size, crc = store.write_durable(tmp_path / store.data_name(4), store.chunks_of(store.layout({"x": data}, 4)))
    store.commit(tmp_path, 4, size, crc)
    path = tmp_path / store.data_name(4)
    kept, _, _ = store.read_checkpoint(tmp_path, 4)          # maybe one of several readers: leaves it cached
    assert cached_B(path) > SIZE_B / 2
    loaded = store.load_latest(tmp_path)                     # a resume: the file's only reader
    assert loaded.step == 4 and np.array_equal(loaded.state["x"], data) and np.array_equal(kept["x"], data)
    assert cached_B(path) <= 2 * store.CHUNK_B
