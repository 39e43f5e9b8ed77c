import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mlsysim as ms


def test_worked_numbers():
    assert ms.allreduce_time(1e9, 8, 450e9) == pytest.approx(2 * 7 / 8 * 1e9 / 450e9)
    assert ms.reduce_scatter_time(1e9, 8, 450e9) + ms.all_gather_time(1e9, 8, 450e9) == \
        pytest.approx(ms.allreduce_time(1e9, 8, 450e9))
    assert ms.hierarchical_allreduce_time(1e9, 8, 16, 450e9, 50e9) == pytest.approx(8.576e-3, rel=1e-3)


def test_latency_terms():
    assert ms.allreduce_time(0, 8, 1e9, 1e-6) == pytest.approx(14e-6)
    assert ms.allreduce_time(0, 8, 1e9, 1e-6, algorithm="tree") == pytest.approx(6e-6)
    assert ms.broadcast_time(0, 16, 1e9, 1e-6) == pytest.approx(4e-6)
    assert ms.p2p_time(1e6, 1e9, 1e-6) == pytest.approx(1e-3 + 1e-6)


def test_single_rank_moves_nothing():
    for fn in (ms.allreduce_time, ms.reduce_scatter_time, ms.all_gather_time, ms.all_to_all_time,
               ms.broadcast_time):
        assert fn(1e9, 1, 1e9, 1e-6) == 0
    assert ms.allreduce_time(1e9, 1, 1e9, 1e-6, algorithm="tree") == 0


def test_tree_wins_on_latency_ring_on_bandwidth():
    small, large = 1e3, 1e9
    assert ms.allreduce_time(small, 1024, 50e9, 5e-6, "tree") < ms.allreduce_time(small, 1024, 50e9, 5e-6, "ring")
    assert ms.allreduce_time(large, 8, 50e9, 5e-6, "ring") < ms.allreduce_time(large, 8, 50e9, 5e-6, "tree")
    # at 1,024 ranks the ring's 2(n-1) latency steps outweigh its bandwidth edge even for 1 GB
    assert ms.allreduce_time(large, 1024, 50e9, 5e-6, "tree") < ms.allreduce_time(large, 1024, 50e9, 5e-6, "ring")


def test_vectorised_over_ranks_and_bytes():
    n = np.array([1, 2, 8, 64])
    t = ms.allreduce_time(1e9, n, 50e9, 1e-6, algorithm="tree")
    assert t.shape == (4,) and t[0] == 0 and np.all(np.diff(t[1:]) > 0)
    s = ms.all_gather_time(np.array([1e6, 1e9]), 8, 50e9)
    assert s[1] == pytest.approx(1000 * s[0])


@settings(max_examples=50, deadline=None)
@given(st.floats(1e3, 1e11), st.integers(2, 4096), st.floats(1e9, 1e12), st.floats(1.01, 10))
def test_more_bandwidth_never_slower(size, n, bw, k):
    for alg in ms.collectives.ALGORITHMS:
        assert ms.allreduce_time(size, n, bw * k, 1e-6, alg) <= ms.allreduce_time(size, n, bw, 1e-6, alg)


def test_bad_input():
    with pytest.raises(ValueError, match="bandwidth_Bps"):
        ms.allreduce_time(1e9, 8, 0)
    with pytest.raises(ValueError, match="ranks"):
        ms.allreduce_time(1e9, 0, 1e9)
    with pytest.raises(ValueError, match="ranks"):
        ms.allreduce_time(1e9, 2.5, 1e9)
    with pytest.raises(ValueError, match="bytes_"):
        ms.all_gather_time(-1, 8, 1e9)
    with pytest.raises(ms.UnknownNameError, match="ring"):
        ms.allreduce_time(1e9, 8, 1e9, algorithm="butterfly")
