"""Errors raised for bad input or infeasible configurations, and input checks.

Every error is a :class:`ValueError` subclass whose message names the input
and the limit it broke, so that a notebook reader sees what to change.
"""
from __future__ import annotations

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


def check_positive(name: str, value, *, allow_zero: bool = False) -> None:
    """Raise if ``value`` (scalar or array) is NaN, infinite or not > 0 (≥ 0 with ``allow_zero``)."""
    if type(value) in (int, float):  # fast path for plain numbers
        if math.isfinite(value) and (value >= 0 if allow_zero else value > 0):
            return
    a = np.asarray(value, dtype=float)
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
    a = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(a)) or np.any(a <= 0) or np.any(a > 1):
        raise MlsysimError(f"{name} must lie in (0, 1], got {_show(value)}")


def check_integer(name: str, value, *, minimum: int = 1) -> None:
    """Raise unless every element of ``value`` is a whole number ≥ ``minimum``."""
    if type(value) is int and value >= minimum:  # fast path for plain whole numbers
        return
    if type(value) is float and math.isfinite(value) and value == int(value) and value >= minimum:
        return
    a = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(a)) or np.any(a != np.round(a)) or np.any(a < minimum):
        raise MlsysimError(f"{name} must be a whole number >= {minimum}, got {_show(value)}")


def _show(value) -> str:
    a = np.asarray(value, dtype=float)
    if a.ndim == 0:
        v = float(a)
        return "NaN" if math.isnan(v) else f"{v:g}"
    bad = a[~np.isfinite(a) | (a <= 0)] if a.size else a
    sample = bad[:3] if bad.size else a.ravel()[:3]
    return f"an array containing {', '.join(f'{x:g}' for x in sample)}"
