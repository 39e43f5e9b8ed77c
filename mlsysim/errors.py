"""Errors raised for bad input or infeasible configurations, and input checks.

Every error is a :class:`ValueError` subclass whose message names the input
and the limit it broke, so that a notebook reader sees what to change.
"""
from __future__ import annotations

import contextlib
import contextvars
import difflib
import math
from typing import Iterable

import numpy as np


class MlsysimError(ValueError):
    """Base class for every error raised by mlsysim."""


class UnknownNameError(MlsysimError, KeyError):
    """A registry name, precision, optimizer or strategy that does not exist."""

    def __init__(self, kind: str, name, known: Iterable[str]):
        known = sorted(known)
        close = difflib.get_close_matches(str(name).lower(), [k.lower() for k in known], n=4, cutoff=0.4)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        shown = ", ".join(known[:30]) + (" …" if len(known) > 30 else "")
        super().__init__(f"unknown {kind} {name!r}.{hint} Known: {shown}")

    __str__ = ValueError.__str__  # KeyError would add quotes around the message


class InfeasibleError(MlsysimError):
    """A configuration that cannot run (does not fit, does not divide, …)."""


def _numeric(name: str, value) -> np.ndarray:
    """``value`` as a float array; a bool, a string or anything else that is not a number raises."""
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise MlsysimError(f"{name} must be a number, got {value!r}")
    try:
        a = np.asarray(value)
    except (TypeError, ValueError):
        raise MlsysimError(f"{name} must be a number or an array of numbers, got {value!r}") from None
    if a.dtype.kind not in "iuf":
        shown = repr(value) if len(repr(value)) <= 60 else f"an array of {a.dtype} values"
        raise MlsysimError(f"{name} must be a number or an array of numbers, got {shown}")
    return a.astype(float, copy=False)


def check_positive(name: str, value, *, allow_zero: bool = False) -> None:
    """Raise if ``value`` (scalar or array) is NaN, infinite or not > 0 (≥ 0 with ``allow_zero``)."""
    if type(value) in (int, float):  # fast path for plain numbers
        if math.isfinite(value) and (value >= 0 if allow_zero else value > 0):
            return
    a = _numeric(name, value)
    if a.size == 0:
        raise MlsysimError(f"{name} is empty")
    if not np.all(np.isfinite(a)):
        raise MlsysimError(f"{name} must be a finite number, got {_show(value)}")
    bad = a < 0 if allow_zero else a <= 0
    if np.any(bad):
        limit = ">= 0" if allow_zero else "> 0"
        raise MlsysimError(f"{name} must be {limit}, got {_show(value)}")


def check_fraction(name: str, value) -> None:
    """Raise unless every element of ``value`` lies in (0, 1]."""
    if type(value) in (int, float) and 0 < value <= 1:
        return
    a = _numeric(name, value)
    if not np.all(np.isfinite(a)) or np.any(a <= 0) or np.any(a > 1):
        raise MlsysimError(f"{name} must lie in (0, 1], got {_show(value)}")


def check_share(name: str, value) -> None:
    """Raise unless every element of ``value`` lies in [0, 1] (a share that may be zero)."""
    if type(value) in (int, float) and 0 <= value <= 1:
        return
    a = _numeric(name, value)
    if a.size == 0:
        raise MlsysimError(f"{name} is empty")
    if not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a > 1):
        raise MlsysimError(f"{name} must lie in [0, 1], got {_show(value)}")


_CONTINUOUS = contextvars.ContextVar("mlsysim_continuous_counts", default=False)


@contextlib.contextmanager
def continuous_counts():
    """Within this block, counts (batch, tokens, GPUs, …) may take fractional values.

    A derivative needs a continuum: :func:`~mlsysim.sensitivity.sensitivity` and
    :func:`~mlsysim.sensitivity.solve_for` evaluate solvers on the continuous relaxation
    of their counts (a batch of 57.6 between 57 and 58; a count of at least 1 relaxes to
    any positive number). Everywhere else a fractional count is refused (scalar) or
    masked (array). NaN, infinite, negative, boolean and text values stay errors here too.
    """
    token = _CONTINUOUS.set(True)
    try:
        yield
    finally:
        _CONTINUOUS.reset(token)


def check_integer(name: str, value, *, minimum: int = 1) -> None:
    """Raise unless every element of ``value`` is a whole number ≥ ``minimum``."""
    if type(value) is int and value >= minimum:  # fast path for plain whole numbers
        return
    if type(value) is float and math.isfinite(value) and value == int(value) and value >= minimum:
        return
    if check_count(name, value, minimum=minimum) is not None:
        raise MlsysimError(f"{name} must be a whole number >= {minimum}, got {_show(value)}")


def check_count(name: str, value, *, minimum: int = 1):
    """Validate a count (batch, tokens, layers, GPUs, steps, …): a whole number ≥ ``minimum``.

    A scalar that is not one raises, naming the input and the value (``batch=2.5``,
    ``True``, ``"4"``, NaN, infinity, or below ``minimum``). An array raises for
    non-numbers, NaN, infinities and entries below ``minimum``, and returns a boolean
    mask that is False at fractional entries (None when every entry is whole), for the
    caller to report them as infeasible: NaN plus ``feasible`` False, as other
    infeasible entries of a sweep. Inside :func:`continuous_counts` fractions pass.
    """
    if type(value) is int:  # fast path for plain whole numbers
        if value >= minimum:
            return None
    elif type(value) is float and math.isfinite(value) and value == int(value) and value >= minimum:
        return None
    a = _numeric(name, value)
    if a.size == 0:
        raise MlsysimError(f"{name} is empty")
    if _CONTINUOUS.get():   # the relaxation of counts >= 1 is every positive number
        low = a <= 0 if minimum >= 1 else a < minimum
        if not np.all(np.isfinite(a)) or np.any(low):
            raise MlsysimError(f"{name} must be {'> 0' if minimum >= 1 else f'>= {minimum}'}, "
                               f"got {_show(value)}")
        return None
    limit = f"a whole number >= {minimum}"
    if not np.all(np.isfinite(a)) or np.any(a < minimum):
        raise MlsysimError(f"{name} must be {limit}, got {_show(value, minimum)}")
    whole = a == np.round(a)
    if whole.all():
        return None
    if a.ndim == 0:
        raise MlsysimError(f"{name} must be {limit}, got {_show(value, minimum)}")
    return whole


def check_single_count(name: str, value, *, minimum: int = 1, why: str = "") -> None:
    """Raise unless ``value`` is one whole number ≥ ``minimum``: an input that a search loops
    over or that sizes the candidates takes no array (``why`` says what to do instead)."""
    if type(value) is int and value >= minimum:  # fast path
        return
    if not isinstance(value, (str, bytes)) and np.ndim(value) != 0:
        raise MlsysimError(f"{name} must be a single whole number, not an array{why}")
    check_integer(name, value, minimum=minimum)


def fractional_counts(minimum: int = 1, **counts) -> list[tuple[object, str]]:
    """Validate each count ``name=value`` with :func:`check_count` (None values are skipped) and
    return (mask, reason) pairs, mask True at the fractional entries of an array count, for a
    sweep to report as infeasible. Empty when every entry is whole (always, for scalars: a
    fractional scalar raises).
    """
    out = []
    for name, value in counts.items():
        if value is None or type(value) is int and value >= minimum:   # the scalar fast path
            continue
        whole = check_count(name, value, minimum=minimum)
        if whole is not None:
            out.append((~whole, f"{name} must be a whole number"))
    return out


def _show(value, minimum=None) -> str:
    if isinstance(value, (bool, np.bool_, str, bytes)):
        return repr(value)
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return repr(value)
    if a.ndim == 0:
        v = float(a)
        return "NaN" if math.isnan(v) else f"{v:g}"
    low = a <= 0 if minimum is None else a < minimum
    bad = a[~np.isfinite(a) | low | (a != np.round(a) if minimum is not None else False)] if a.size else a
    sample = bad[:3] if bad.size else a.ravel()[:3]
    return f"an array containing {', '.join(f'{x:g}' for x in sample)}"
