"""The lab's checksum is zlib's CRC-32, whichever library computes it: checkpoints written before
the switch to zlib-ng load, and a flipped byte is still refused. Real files, no mocks."""
import os
import zlib

import numpy as np
import pytest

from mlsysim.lab import checksum, store


def test_the_faster_library_gives_zlibs_values():
    data = np.random.default_rng(1).integers(0, 256, size=3_000_001, dtype=np.uint8)
    view = memoryview(data)
    assert checksum.crc32(view) == zlib.crc32(view)
    assert checksum.crc32(view[1_000_000:], checksum.crc32(view[:1_000_000])) == zlib.crc32(view)
    assert checksum.crc32(b"") == 0 and checksum.crc32(b"123456789") == 0xCBF43926


def test_zlib_ng_is_the_implementation_where_installed():
    pytest.importorskip("zlib_ng")
    assert checksum.IMPLEMENTATION == "zlib-ng"


def test_a_checkpoint_records_zlibs_crc_and_a_flipped_byte_is_refused(tmp_path):
    state = {"w": np.arange(100_000, dtype=np.float32), "step": 3}
    lay = store.layout(state, 3)
    size, crc = store.write_durable(tmp_path / store.data_name(3), store.chunks_of(lay))
    store.commit(tmp_path, 3, size, crc)
    data = (tmp_path / store.data_name(3)).read_bytes()
    assert crc == zlib.crc32(data)                       # what a checkpoint written with zlib recorded
    assert store.load_latest(tmp_path).step == 3
    raw = bytearray(data)
    raw[len(raw) // 2] ^= 0xFF
    (tmp_path / store.data_name(3)).write_bytes(bytes(raw))
    with pytest.raises(store.CheckpointError, match="checksum mismatch"):
        store.read_checkpoint(tmp_path, 3)


def test_the_writer_checksums_beside_the_writes_and_the_floor_writes_without(tmp_path):
    data = np.arange(3 * store.CHUNK_B // 2 + 5, dtype=np.uint64).view(np.uint8)   # large pieces: the thread
    small = bytes(range(200))                                                      # a small one: inline
    for checksum, expected in ((True, zlib.crc32(data, zlib.crc32(small, 7))), (False, 7)):
        path = tmp_path / f"w{checksum}.bin"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            size, crc = store.write_chunks(fd, [small, data], crc=7, checksum=checksum)
        finally:
            os.close(fd)
        assert size == len(small) + data.nbytes and crc == expected
        assert path.read_bytes() == small + data.tobytes()
