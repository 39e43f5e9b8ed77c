"""SI units, bytes per element, and human-readable formatting.

Everything inside :mod:`mlsysim` is a plain SI float: bytes, FLOP, seconds,
watts, joules, dollars. Constants below convert at the edges, e.g.
``80 * GB`` bytes or ``t / ms`` milliseconds. Decimal prefixes throughout
(1 GB = 1e9 B); binary prefixes exist only for vendors who specify them.
"""
from __future__ import annotations

import math

# --- sizes (bytes) ---------------------------------------------------------
KB, MB, GB, TB, PB = 1e3, 1e6, 1e9, 1e12, 1e15
KiB, MiB, GiB, TiB = 2.0**10, 2.0**20, 2.0**30, 2.0**40

# --- work (FLOP; 1 multiply-add = 2 FLOP) ---------------------------------
GFLOP, TFLOP, PFLOP, EFLOP = 1e9, 1e12, 1e15, 1e18

# --- time (seconds) --------------------------------------------------------
ns, us, ms = 1e-9, 1e-6, 1e-3
minute, hour, day = 60.0, 3600.0, 86400.0
year = 365.0 * day

# --- power and energy ------------------------------------------------------
kW, MW = 1e3, 1e6
kWh, MWh = 3.6e6, 3.6e9  # joules

# --- link rates ------------------------------------------------------------
Gbps = 1e9 / 8  # bytes per second in one gigabit per second

# --- bytes per element by numeric format ----------------------------------
BYTES_PER_ELEMENT = {
    "fp64": 8.0, "fp32": 4.0, "tf32": 4.0, "bf16": 2.0, "fp16": 2.0,
    "fp8": 1.0, "int8": 1.0, "fp6": 0.75, "fp4": 0.5, "int4": 0.5,
}
PRECISIONS = tuple(BYTES_PER_ELEMENT)


def bytes_per(precision: str) -> float:
    """Bytes of one element stored in ``precision`` (e.g. ``bytes_per("bf16") == 2``)."""
    if type(precision) is str:               # fast path: a name as written in the table
        b = BYTES_PER_ELEMENT.get(precision)
        if b is not None:
            return b
    try:
        return BYTES_PER_ELEMENT[precision.lower()]
    except (KeyError, AttributeError):
        from .errors import UnknownNameError
        raise UnknownNameError("precision", precision, PRECISIONS) from None


# --- formatting ------------------------------------------------------------
_SI = [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""),
       (1e-3, "m"), (1e-6, "µ"), (1e-9, "n")]
_TIME = [(day, " d"), (hour, " h"), (minute, " min"), (1.0, " s"), (ms, " ms"), (us, " µs"), (ns, " ns")]


def _pick(v: float, scales, digits: int):
    """Largest scale whose rounded quotient is at least 1 (the last one otherwise)."""
    a = abs(v)
    for scale, name in scales:
        if float(f"{a / scale:.{digits}g}") >= 1.0:
            return scale, name
    return scales[-1]


def fmt(value: float, unit: str = "", digits: int = 3) -> str:
    """Format a SI quantity with a decimal prefix and ``digits`` significant figures.

    >>> fmt(3.35e12, "B/s"), fmt(989.4e12, "FLOP/s"), fmt(4.8e-3, "s")
    ('3.35 TB/s', '989 TFLOP/s', '4.8 ms')

    Times of a minute or more are shown in min, h or d. Bytes use "KB" for
    1e3 B. ``unit="%"`` shows a fraction as a percentage; NaN prints "n/a".
    """
    v = float(value)
    if math.isnan(v):
        return "n/a"
    if math.isinf(v):
        return f"{'-' if v < 0 else ''}inf {unit}".strip()
    if unit == "%":
        return f"{v * 100:.{digits}g} %"
    if v == 0:
        return f"0 {unit}".strip()
    if unit == "s":
        scale, name = _pick(v, _TIME, digits)
        return f"{v / scale:.{digits}g}{name}"
    scales = _SI if unit else _SI[:7]
    scale, prefix = _pick(v, scales, digits)
    if prefix == "k" and unit.startswith("B"):
        prefix = "K"
    return f"{v / scale:.{digits}g} {prefix}{unit}".rstrip() if unit else f"{v / scale:.{digits}g}{prefix}"
