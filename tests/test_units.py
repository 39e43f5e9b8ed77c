import math

import pytest

import mlsysim as ms
from mlsysim.units import GB, TFLOP, bytes_per, fmt


@pytest.mark.parametrize("value, unit, text", [
    (3.35e12, "B/s", "3.35 TB/s"), (989.4e12, "FLOP/s", "989 TFLOP/s"), (4.8e-3, "s", "4.8 ms"),
    (800e3, "B", "800 KB"), (7200, "s", "2 h"), (2.5e-5, "s", "25 µs"), (0.35, "%", "35 %"),
    (0, "s", "0 s"), (999.7e9, "B", "1 TB"), (float("nan"), "s", "n/a"), (12, "W", "12 W"),
])
def test_fmt(value, unit, text):
    assert fmt(value, unit) == text


def test_constants_are_decimal():
    assert GB == 1e9 and TFLOP == 1e12 and ms.units.GiB == 2 ** 30


def test_bytes_per():
    assert bytes_per("BF16") == 2 and bytes_per("int4") == 0.5 and bytes_per("fp32") == 4


def test_unknown_precision_names_close_matches():
    with pytest.raises(ms.UnknownNameError, match="bf16"):
        bytes_per("bf61")


def test_table_text_and_html():
    t = ms.table([{"a": 1.234567, "b": "x"}, {"a": 2, "b": "yy"}], title="T")
    assert str(t).splitlines()[0] == "T" and "1.235" in str(t)
    assert "<table>" in t._repr_html_() and "yy" in t._repr_html_()
    assert not math.isnan(float(str(t).splitlines()[-1].split()[0]))
