"""mlsysim.lab.reporting: the reporter's passes, the touch model, its bad input, and a real touch after a free."""
import math

import pytest

from mlsysim.errors import MlsysimError
from mlsysim.lab import reporting

BUDDYINFO = """Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3
Node 0, zone    DMA32      2      2      3      2      3      2      1      4      4      4    750
Node 0, zone   Normal   5725   8301   2490   2754    983    672    385    259    777      1   2387
"""


def test_free_lists_keep_the_reported_orders_only():
    lists = reporting.free_lists(BUDDYINFO)
    assert lists == {("DMA", 9): 1, ("DMA", 10): 3, ("DMA32", 9): 4, ("DMA32", 10): 750, ("Normal", 9): 1,
                     ("Normal", 10): 2387}


def test_free_lists_reads_this_machine():
    lists = reporting.free_lists()
    assert lists and all(order >= reporting.REPORT_ORDER and n >= 0 for (_, order), n in lists.items())


def test_a_pass_takes_a_sixteenth_of_a_long_list_and_all_of_a_short_one():
    mib = 2 ** 20
    assert reporting.pass_B({("Normal", 10): 512 * 16}) == (16 + 1) * 32 * 4 * mib      # 1/16 of 8192, one more batch
    assert reporting.pass_B({("DMA", 10): 3}) == 3 * 4 * mib                             # fewer blocks than a batch
    assert reporting.pass_B({}) == 0.0
    # BUDDYINFO's lists: 6 batches of Normal's 2387 blocks of order 10, 3 of DMA32's 750, the short lists whole
    assert reporting.pass_B(reporting.free_lists(BUDDYINFO)) == (192 * 4 + 96 * 4 + 1 * 2 + 4 * 2 + 1 * 2 + 3 * 4) * mib


def test_the_host_gets_a_pass_every_two_seconds_from_two_seconds_on():
    assert [reporting.handed_B(d, 1.0) for d in (0.0, 1.99, 2.0, 3.9, 4.0, 9.0)] == [0, 0, 1, 1, 2, 4]


def test_touch_runs_from_all_backed_to_all_taken_back():
    w, c, gb = 0.1e-9, 2e-9, 1e9
    at = lambda d: reporting.touch_s(4 * gb, 4 * gb, d, 1.5 * gb, w, c)
    assert at(0.0) == pytest.approx(0.4) and at(1.9) == pytest.approx(0.4)
    assert at(2.0) == pytest.approx(0.4 + 1.5 * 1.9) and at(4.5) == pytest.approx(0.4 + 3.0 * 1.9)
    assert at(6.0) == at(30.0) == pytest.approx(4 * gb * c)
    # more freed than touched: the touch takes the backed part first
    assert reporting.touch_s(1 * gb, 4 * gb, 4.0, 1.5 * gb, w, c) == pytest.approx(0.1)
    assert reporting.touch_s(2 * gb, 4 * gb, 4.0, 1.5 * gb, w, c) == pytest.approx(0.2 + 1.0 * 1.9)


@pytest.mark.parametrize("bad", [-1.0, math.nan])
def test_bad_delays_and_rates_are_refused_by_name(bad):
    with pytest.raises(MlsysimError, match="delay_s"):
        reporting.handed_B(bad, 1.0)
    with pytest.raises(MlsysimError, match="w <= c"):
        reporting.touch_s(1.0, 1.0, 0.0, 1.0, w=2e-9, c=1e-9)
    with pytest.raises(MlsysimError, match="order"):
        reporting.pass_B({("Normal", 3): 10})
    with pytest.raises(MlsysimError, match="freed_B"):
        reporting.touch_after_free(0, 1, 0.0)
    with pytest.raises(MlsysimError, match="delay_s"):
        reporting.touch_after_free(1, 1, bad)


def test_a_real_touch_after_a_free():
    got = reporting.touch_after_free(64 * 2 ** 20, 64 * 2 ** 20, 0.0)
    assert got["first_s"] > 0 and got["touch_s"] > 0 and got["pass_B"] == reporting.pass_B(
        {(z, int(o)): n for z, o, n in (k.split(":") + [v] for k, v in got["lists"].items())})
