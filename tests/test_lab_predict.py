"""The lab's stall model: a pool of two or more buffers overlaps the snapshot copy with the
previous write, one buffer does not."""
import pytest

from mlsysim.errors import MlsysimError
from mlsysim.lab.predict import machine_from, predict

M = machine_from(copy_Bps=20e9, write_Bps=1.5e9, read_Bps=3e9)   # 1.2 GB: copy d = 0.06 s, write W = 0.8 s


def test_two_buffers_overlap_the_copy_with_the_previous_write():
    # one writer, never idle: a checkpoint every W = 0.8 s; after τ = 0.5 s of compute the training waits 0.3 s
    assert predict(1.2e9, M, interval_s=0.5, buffers=2).concurrent_stall_s == pytest.approx(0.30, abs=1e-3)
    assert predict(1.2e9, M, interval_s=0.5, buffers=4).concurrent_stall_s == pytest.approx(0.30, abs=1e-3)
    # back-pressure ends once τ covers W − d = 0.74 s: then only the copy stalls
    assert predict(1.2e9, M, interval_s=0.74, buffers=2).concurrent_stall_s == pytest.approx(0.06, abs=1e-3)


def test_one_buffer_waits_for_the_copy_and_the_write():
    assert predict(1.2e9, M, interval_s=0.5, buffers=1).concurrent_stall_s == pytest.approx(0.36, abs=1e-3)
    assert predict(1.2e9, M, interval_s=0.8, buffers=1).concurrent_stall_s == pytest.approx(0.06, abs=1e-3)


@pytest.mark.parametrize("bad", [0, 1.5, "2"])
def test_buffers_must_be_a_positive_integer(bad):
    with pytest.raises(MlsysimError, match="buffers"):
        predict(1.2e9, M, interval_s=1.0, buffers=bad)
