"""Sensitivity and inverse design: which input moves a result, and what input a target needs.

**Elasticity.** The elasticity of a result T to a positive input x is the percentage
change of T per percent change of x — Marshall's elasticity, and in sensitivity
analysis the normalised local derivative (Saltelli et al., *Global Sensitivity
Analysis: The Primer*, Wiley 2008, §1.2.1):

    e = ∂ln T / ∂ln x                                   (dimensionless)

:func:`sensitivity` estimates it by central differences in log space, with a
relative step h, from the base point x and the points x(1 ± h):

    e₊ = ln(T(x(1+h)) / T(x)) / ln(1+h)                  (one-sided, upwards)
    e₋ = ln(T(x) / T(x(1−h))) / −ln(1−h)                 (one-sided, downwards)
    e  = ln(T(x(1+h)) / T(x(1−h))) / ln((1+h) / (1−h))   (central)

The log form is exact for a power law T = c·xᵃ, and every roofline term is one:
a memory-bound step T = Q/B has e = −1 to the bandwidth B and 0 to the peak P,
whatever h. Where a max() switches terms within the step (a pass near its ridge
point) e₊ and e₋ differ; both are kept and the input is marked as a **kink**,
rather than reporting an average that describes neither side. All 2k + 1
evaluations (base point, two per input) are **one** call of the solver with
arrays, so a sensitivity costs about one vectorised solver call.

**Inverse design.** :func:`inverse_roofline` asks which peak FLOP/s, bandwidth or
capacity a target time (or token rate) needs. For T = max(W/P, Q/B) it is closed
form: B* = Q/T* when W/P ≤ T* (otherwise no bandwidth can help: the compute term
alone exceeds the target), P* = W/T* when Q/B ≤ T*, capacity = the pass's
footprint. :func:`solve_for` inverts any monotone vectorised solver by bracketing
on a log grid (256 points per call, four calls reach 1e-9), so that solvers with
more terms than one max() invert too.

Worked number (tested): Llama-3-8B decode at batch 1 on an H100 has elasticity
−1.00 to bandwidth and 0.00 to peak FLOP/s; a 2 ms step needs 7.51 TB/s, 2.24× the
H100's 3.35 TB/s.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping

import numpy as np

from .errors import InfeasibleError, MlsysimError, UnknownNameError, check_positive, continuous_counts
from .registry import hardware as _hardware
from .roofline import roofline
from .systems import Hardware
from .tables import Record, Table
from .units import fmt

# spec name -> (Hardware field, unit shown, description)
SPECS = {
    "peak": ("peak_flops", "FLOP/s", "peak FLOP/s (every precision)"),
    "bandwidth": ("memory_bw_Bps", "B/s", "main-memory bandwidth"),
    "capacity": ("memory_B", "B", "main-memory capacity"),
    "link": ("scaleup_Bps", "B/s", "scale-up link bandwidth per direction"),
    "host_link": ("host_link_Bps", "B/s", "host / injection link bandwidth per direction"),
}
KINK_TOL = 0.05   # one-sided elasticities further apart than this (+5 % of |e|) mark a kink


# --- perturbing hardware -----------------------------------------------------
def _is_one(f) -> bool:
    return type(f) in (int, float) and f == 1


def scale_hardware(hardware, peak=1.0, bandwidth=1.0, capacity=1.0, link=1.0, host_link=1.0) -> Hardware:
    """A copy of ``hardware`` with its specs multiplied by factors (floats or arrays).

    ``peak`` scales the dense peak of every precision, ``bandwidth`` the main-memory
    bandwidth, ``capacity`` the main-memory capacity, ``link`` the scale-up link and
    ``host_link`` the host (injection) link. Array factors give a record whose fields
    are arrays; the solvers divide by these fields, so they broadcast over them.

    >>> h = scale_hardware("h100", bandwidth=[1.0, 2.0])
    >>> h.memory_bw_Bps / 1e12
    array([3.35, 6.7 ])
    """
    hw = _hardware(hardware)
    factors = dict(peak=peak, bandwidth=bandwidth, capacity=capacity, link=link, host_link=host_link)
    changes = {}
    for spec, f in factors.items():
        if _is_one(f):
            continue
        check_positive(spec, f)
        f = f if np.ndim(f) == 0 else np.asarray(f, dtype=float)
        field = SPECS[spec][0]
        old = getattr(hw, field)
        if old is None:
            raise MlsysimError(f"{hw.name} has no {SPECS[spec][2]} to scale ({field} is not given)")
        changes[field] = MappingProxyType({p: v * f for p, v in old.items()}) if spec == "peak" else old * f
    return _with(hw, changes) if changes else hw


def _with(hw: Hardware, changes: dict) -> Hardware:
    """A copy of a frozen record with some fields replaced, the values already checked
    (``dataclasses.replace`` would re-run every check and costs more than a solver call)."""
    new = object.__new__(Hardware)
    new.__dict__.update(hw.__dict__)
    new.__dict__.update(changes)
    return new


def spec_value(hardware, spec: str, precision: str = "bf16"):
    """The value of one spec of ``hardware`` (``peak`` in ``precision``)."""
    hw = _hardware(hardware)
    if spec not in SPECS:
        raise UnknownNameError("hardware spec", spec, SPECS)
    return hw.peak(precision) if spec == "peak" else getattr(hw, SPECS[spec][0])


# --- results -------------------------------------------------------------------
def _is_time(name: str) -> bool:
    """A field in seconds (``time_s``), not a rate (``tokens_per_s``)."""
    return name.endswith("_s") and not name.endswith("per_s")


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x * 100:+.3g} %"


def _e(x: float) -> str:
    if math.isnan(x):
        return "n/a"
    return "0.00" if abs(x) < 5e-3 else f"{x:+.2f}"


@dataclass(frozen=True)
class Elasticity:
    """Elasticity of a result to one input, with both one-sided values and the swing.

    ``low`` / ``high`` are the relative changes of the result when the input moves
    to x(1−h) / x(1+h) (the two ends of a tornado bar).
    """

    name: str
    base: float
    elasticity: float
    up: float
    down: float
    low: float
    high: float
    kink: bool
    note: str = ""
    base_text: str = ""

    @property
    def magnitude(self) -> float:
        """Largest |one-sided elasticity| (ignores a side that is infeasible)."""
        return float(np.nanmax(np.abs([self.up, self.down])))

    def shown(self) -> str:
        """The elasticity as text; at a kink both one-sided values."""
        if self.kink:
            return f"{_e(self.down)} below / {_e(self.up)} above"
        return _e(self.elasticity)


@dataclass(frozen=True, repr=False)
class Sensitivity:
    """Result of :func:`sensitivity`: one :class:`Elasticity` per input.

    ``value`` is the result at the base point; ``bound`` the binding constraint the
    solver reports there ("" when it reports none). ``ranked()`` orders the inputs
    by influence, as the bars of a tornado diagram.
    """

    output: str
    value: float
    rel_step: float
    bound: str
    items: tuple

    def __getitem__(self, name: str) -> Elasticity:
        for it in self.items:
            if it.name == name:
                return it
        raise UnknownNameError("input", name, [it.name for it in self.items])

    @property
    def elasticities(self) -> dict:
        """Central elasticity per input name."""
        return {it.name: it.elasticity for it in self.items}

    def ranked(self) -> list:
        """Inputs by decreasing influence (largest one-sided |elasticity| first)."""
        return sorted(self.items, key=lambda it: -it.magnitude)

    @property
    def most_influential(self) -> str:
        """Name of the input whose change moves the result most."""
        return self.ranked()[0].name

    def predict(self, ratios: Mapping[str, float]) -> float:
        """First-order prediction of result(new) / result(base) when inputs change by ``ratios``.

        Log-linear: Π rᵢ^eᵢ, with the one-sided elasticity in the direction of each change.
        Exact for power laws within one regime; a change large enough to move the binding
        term (cross a ridge) makes it wrong, which is what a local derivative means.
        """
        ln = 0.0
        for name, r in ratios.items():
            check_positive(f"ratios[{name!r}]", r)
            it = self[name]
            e = it.up if r > 1 else it.down
            ln += (it.elasticity if math.isnan(e) else e) * math.log(r)
        return math.exp(ln)

    def table(self, title: str = "") -> Table:
        h = f"{self.rel_step:.0%}"
        rows = [{"input": it.name, "base": it.base_text or f"{it.base:.4g}", "elasticity": it.shown(),
                 f"result at -{h}": _pct(it.low), f"result at +{h}": _pct(it.high), "note": it.note}
                for it in self.ranked()]
        return Table(rows, title or f"Elasticities of {self.output} = {self._value_text()}"
                     + (f" ({self.bound}-bound)" if self.bound else ""))

    def _value_text(self) -> str:
        return fmt(self.value, "s") if _is_time(self.output) else f"{self.value:.4g}"

    def rows(self) -> list[tuple[str, str]]:
        return [(it.name, it.shown() + (f" ({it.note})" if it.note else "")) for it in self.ranked()]

    def __str__(self) -> str:
        return str(self.table())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()


# --- evaluation helpers ---------------------------------------------------------
def _values(res, output, n: int):
    """(values, feasible, bound labels or None, reason) of a solver result over n points."""
    if callable(output):
        y = output(res)
        name = getattr(output, "__name__", "output")
    elif isinstance(res, (int, float, np.ndarray, np.floating)):
        y, name = res, "result"
    else:
        if not hasattr(res, output):
            raise MlsysimError(f"the solver's result ({type(res).__name__}) has no field {output!r}; "
                               f"pass output= a field name or a function of the result")
        y, name = getattr(res, output), output
    y = np.asarray(y, dtype=float)
    if y.size == 1:
        y = np.full(n, float(y.reshape(())))
    if y.shape != (n,):
        raise MlsysimError(f"the solver must return one value per input point (shape ({n},)); got shape "
                           f"{y.shape}: call it with one device and one precision")
    ok = np.broadcast_to(np.asarray(getattr(res, "feasible", True), dtype=bool), (n,)) & np.isfinite(y)
    bound = getattr(res, "bound", None)
    bound = np.broadcast_to(np.asarray(bound), (n,)) if bound is not None and np.size(bound) in (1, n) else None
    return y, ok, bound, getattr(res, "reason", ""), name


def _evaluate(fn, points: dict, n: int, output, vectorized: bool = True, base_raises: bool = True):
    """Call ``fn`` on n points: once with arrays, or point by point (``vectorized=False``, or when
    the vectorised call raises TypeError — a solver that broadcasts over its arguments but not over
    array-valued hardware fields). In the loop an infeasible point is NaN, except the base point
    (index 0) when ``base_raises``. Returns (values, feasible, bound labels or None, reason, name).
    Counts are continuous here (:func:`~mlsysim.errors.continuous_counts`): a derivative, or a
    bracket, needs the points between whole batches."""
    with continuous_counts():
        return _evaluate_points(fn, points, n, output, vectorized, base_raises)


def _evaluate_points(fn, points: dict, n: int, output, vectorized: bool, base_raises: bool):
    if vectorized:
        try:
            return _values(fn(**points), output, n)
        except TypeError:
            pass                                       # a genuine bug raises again below
    y, ok = np.full(n, np.nan), np.zeros(n, dtype=bool)
    bound, reason = np.full(n, "", dtype=object), ""
    name = output if isinstance(output, str) else getattr(output, "__name__", "output")
    for j in range(n):
        try:
            res = fn(**{k: float(v[j]) for k, v in points.items()})
        except InfeasibleError as e:
            if j == 0 and base_raises:
                raise
            reason = reason or str(e)
            continue
        yj, okj, bj, _, name = _values(res, output, 1)
        y[j], ok[j] = yj[0], okj[0]
        bound[j] = "" if bj is None else str(bj[0])
    return y, ok, (bound if any(bound) else None), reason, name


def sensitivity(fn: Callable, inputs: Mapping[str, float], rel_step: float = 0.1, output="time_s",
                vectorized: bool = True) -> Sensitivity:
    """Elasticities of ``fn(**inputs)`` to every input, in one vectorised call of ``fn``.

    Parameters
    ----------
    fn : solver taking the inputs as keyword arguments; it must accept arrays and
        broadcast (all mlsysim solvers do). With ``vectorized=False`` it is called
        2k + 1 times with floats instead.
    inputs : base value (> 0) of each input to perturb, e.g. ``{"batch": 8}``.
    rel_step : relative step h in (0, 0.5]; the one-sided values show what a ±h
        change does, the central value is exact for power laws whatever h.
    output : field of the result to differentiate ("time_s", "tokens_per_s", …) or a
        function of the result.

    An infeasible base configuration raises :class:`~mlsysim.errors.InfeasibleError`
    (its sensitivity is undefined); an infeasible perturbed point leaves that side
    NaN and says so in the input's note (a capacity cliff).

    >>> import mlsysim as ms
    >>> h100 = ms.hardware("h100")
    >>> s = sensitivity(lambda peak, bandwidth: ms.roofline(
    ...     "llama-3-8b", ms.scale_hardware(h100, peak=peak, bandwidth=bandwidth)),
    ...     {"peak": 1.0, "bandwidth": 1.0})
    >>> round(s["bandwidth"].elasticity, 3), round(s["peak"].elasticity, 3)
    (-1.0, 0.0)
    """
    if not callable(fn):
        raise MlsysimError(f"fn must be a callable solver, got {fn!r}")
    if not isinstance(inputs, Mapping) or not inputs:
        raise MlsysimError("inputs must be a non-empty mapping of input name to base value")
    if not (isinstance(rel_step, (int, float)) and 0 < rel_step <= 0.5):
        raise MlsysimError(f"rel_step must lie in (0, 0.5], got {rel_step!r}")
    names = list(inputs)
    base = np.empty(len(names))
    for i, name in enumerate(names):
        if np.ndim(inputs[name]) != 0:
            raise MlsysimError(f"inputs[{name!r}] must be one number (the base point), got an array")
        check_positive(f"inputs[{name!r}]", float(inputs[name]))
        base[i] = float(inputs[name])
    k, n, h = len(names), 2 * len(names) + 1, float(rel_step)
    grid = np.repeat(base[:, None], n, axis=1)
    idx = np.arange(k)
    grid[idx, 1 + 2 * idx] *= 1.0 + h
    grid[idx, 2 + 2 * idx] *= 1.0 - h
    y, ok, bound, reason, out_name = _evaluate(fn, {name: grid[i] for i, name in enumerate(names)}, n,
                                               output, vectorized)
    if not ok[0]:
        if vectorized:  # a scalar call at the base point says why, in the solver's own words
            try:
                fn(**{name: float(v) for name, v in zip(names, base)})
            except InfeasibleError as e:
                reason = str(e)
        raise InfeasibleError(f"the base configuration is infeasible, so its sensitivity is undefined"
                              f"{': ' + reason if reason else ''}")
    if np.any(y[ok] <= 0):
        raise MlsysimError(f"elasticities need a positive {out_name}; got {y[ok].min():g}")
    with np.errstate(invalid="ignore", divide="ignore"):
        ln = np.where(ok, np.log(np.where(ok, y, 1.0)), np.nan)
    lu, ld = math.log1p(h), -math.log1p(-h)
    items = []
    for i, name in enumerate(names):
        hi, lo = 1 + 2 * i, 2 + 2 * i
        up, down = (ln[hi] - ln[0]) / lu, (ln[0] - ln[lo]) / ld
        central = (ln[hi] - ln[lo]) / (lu + ld)
        note = ""
        if not (ok[hi] and ok[lo]):
            central = up if ok[hi] else down
            note = f"infeasible at {'+' if not ok[hi] else '-'}{h:.0%}"
        if bound is not None and ok[hi] and ok[lo]:
            kink = bool(bound[hi] != bound[0] or bound[lo] != bound[0])
        else:
            kink = bool(ok[hi] and ok[lo] and abs(up - down) > KINK_TOL * (1 + abs(central)))
        if kink and not note:
            note = "kink: the binding term changes within the step"
        items.append(Elasticity(name=name, base=float(base[i]), elasticity=float(central), up=float(up),
                                down=float(down), low=float(y[lo] / y[0] - 1) if ok[lo] else math.nan,
                                high=float(y[hi] / y[0] - 1) if ok[hi] else math.nan, kink=kink, note=note))
    b0 = "" if bound is None else str(bound[0])
    return Sensitivity(output=out_name, value=float(y[0]), rel_step=h, bound=b0, items=tuple(items))


def _precision_of(solver, kwargs: dict) -> str:
    """The precision a solver call uses: the keyword given, else the solver's default."""
    return kwargs["precision"] if "precision" in kwargs else _default_precision(solver)


@functools.lru_cache(maxsize=64)
def _default_precision(solver) -> str:
    import inspect  # here, not at import time: it costs milliseconds
    try:
        p = inspect.signature(solver).parameters.get("precision")
    except (TypeError, ValueError):
        p = None
    return p.default if p is not None and isinstance(p.default, str) else "bf16"


def hardware_sensitivity(solver: Callable, workload, hardware, specs=("peak", "bandwidth", "capacity"),
                         inputs: Mapping[str, float] | None = None, rel_step: float = 0.1,
                         output="time_s", **kwargs) -> Sensitivity:
    """Elasticities of ``solver(workload, hardware, **kwargs)`` to hardware specs and numeric inputs.

    ``specs`` are names from ``SPECS`` (peak, bandwidth, capacity, link,
    host_link), perturbed through :func:`scale_hardware`; ``inputs`` are numeric
    keyword arguments of the solver to perturb too (e.g. ``{"batch": 8}``); the
    other ``kwargs`` stay fixed. One vectorised solver call.

    >>> import mlsysim as ms
    >>> s = hardware_sensitivity(ms.roofline, "llama-3-8b", "h100", phase="prefill", seq_len=2048)
    >>> round(s["peak"].elasticity, 3), round(s["bandwidth"].elasticity, 3), s.bound
    (-1.0, 0.0, 'compute')
    """
    hw = _hardware(hardware)
    specs, inputs = tuple(specs), dict(inputs or {})
    for s in specs:
        if s not in SPECS:
            raise UnknownNameError("hardware spec", s, SPECS)
        if getattr(hw, SPECS[s][0]) is None:
            raise MlsysimError(f"{hw.name} has no {SPECS[s][2]}: drop {s!r} from specs")
    clash = (set(specs) & set(inputs)) | ((set(specs) | set(inputs)) & set(kwargs))
    if clash:
        raise MlsysimError(f"{', '.join(sorted(clash))} given twice (specs, inputs and fixed keyword arguments)")

    def fn(**x):
        factors = {s: x.pop(s) for s in specs}
        return solver(workload, scale_hardware(hw, **factors), **kwargs, **x)

    res = sensitivity(fn, {**{s: 1.0 for s in specs}, **inputs}, rel_step=rel_step, output=output)
    precision = _precision_of(solver, kwargs)
    items = []
    for it in res.items:
        if it.name in SPECS:
            v = spec_value(hw, it.name, precision)
            it = dataclasses.replace(it, base=float(v), base_text=fmt(v, SPECS[it.name][1]))
        items.append(it)
    return dataclasses.replace(res, items=tuple(items))


# --- inverse design ---------------------------------------------------------------
def solve_for(fn: Callable, name: str, target: float, inputs: Mapping | None = None, output="time_s",
              bracket=(1e-3, 1e3), rtol: float = 1e-9) -> float:
    """Least value of the input ``name`` (within ``bracket``) at which ``fn``'s output reaches ``target``.

    ``fn(**inputs, name=x)`` must accept an array ``x`` and be monotone in it. "Reaches"
    means output ≤ target when the output falls as x grows (a time versus a bandwidth)
    and ≥ target when it rises (a token rate versus a batch). Infeasible points (NaN)
    never count as reaching. The search evaluates a 256-point log grid per call and
    narrows it around the first point that reaches the target, until the relative
    width is below ``rtol`` (about four calls); it returns the end that reaches.

    >>> import mlsysim as ms
    >>> h100 = ms.hardware("h100")
    >>> f = lambda bandwidth: ms.roofline("llama-3-8b", ms.scale_hardware(h100, bandwidth=bandwidth))
    >>> round(solve_for(f, "bandwidth", target=2e-3), 4)     # x the H100's bandwidth
    2.2405
    """
    inputs = dict(inputs or {})
    check_positive("target", target)
    if np.ndim(target) != 0:
        raise MlsysimError("solve_for takes one target; loop or use inverse_roofline for arrays of targets")
    lo, hi = (float(b) for b in bracket)
    check_positive("bracket", [lo, hi])
    if not lo < hi:
        raise MlsysimError(f"bracket must be (low, high) with low < high, got {bracket}")
    if name in inputs:
        raise MlsysimError(f"{name!r} is the input to solve for; do not also pass it in inputs")
    target, grid_n = float(target), 256
    x = np.geomspace(lo, hi, grid_n)
    call = (lambda **p: fn(**inputs, **p))  # noqa: E731
    y, ok, _, reason, out_name = _evaluate(call, {name: x}, grid_n, output, base_raises=False)
    ends = y[ok]
    if ends.size < 2:
        raise InfeasibleError(f"{out_name} is infeasible for almost every {name} in {bracket}"
                              f"{': ' + reason if reason else ''}")
    falling = ends[-1] < ends[0]
    goal = "at most" if falling else "at least"
    for _ in range(12):
        meets = ok & ((y <= target) if falling else (y >= target))
        if not meets.any():
            best = np.nanmin(y[ok]) if falling else np.nanmax(y[ok])
            show = (lambda v: fmt(v, "s")) if _is_time(out_name) else (lambda v: f"{v:,.4g}")  # noqa: E731
            raise InfeasibleError(
                f"no {name} in [{lo:.3g}, {hi:.3g}] makes {out_name} {goal} {show(target)}: the best is "
                f"{show(best)}, so another term (or capacity) binds, not {name}")
        j = int(np.argmax(meets))
        if j == 0:  # only on the first grid: later grids start at a point that does not reach
            raise MlsysimError(f"{out_name} already reaches {target:.4g} at the lower end of the bracket "
                               f"({name} = {lo:.3g}); lower it")
        a, b = x[j - 1], x[j]
        if b / a - 1 <= rtol:
            return float(b)
        x = np.geomspace(a, b, grid_n)
        y, ok, _, _, _ = _evaluate(call, {name: x}, grid_n, output, base_raises=False)
    return float(b)


@dataclass(frozen=True, repr=False)
class Requirement(Record):
    """Result of :func:`inverse_roofline`: the specs a target needs, beside those given.

    Factors are required / given (> 1: the target needs a better spec than the device
    has). Scalar targets give floats; array targets give arrays, NaN where no value of
    the solved-for spec can meet the target (``feasible`` False).
    """

    workload: str
    hardware: str
    phase: str
    solve_for: str
    target_s: object
    time_s: object            # the pass on the given hardware (capacity aside)
    compute_s: object
    memory_s: object
    peak_factor: object
    bandwidth_factor: object
    peak_flops: object        # required dense peak in the result's precision
    bandwidth_Bps: object     # required main-memory bandwidth
    capacity_B: object        # memory the pass needs
    given_capacity_B: float
    precision: str
    feasible: object
    reason: str = ""

    @property
    def fits(self):
        """Whether the given device holds the pass (capacity is the third requirement)."""
        return self.capacity_B <= self.given_capacity_B

    def _other(self) -> str:
        other = self.time_s - max(self.compute_s, self.memory_s)
        return f", other terms {fmt(other, 's')}" if other > 1e-9 * self.time_s else ""

    def rows(self) -> list[tuple[str, str]]:
        if np.ndim(self.target_s):
            return [("shape", str(np.shape(self.target_s)))]
        return [("workload", self.workload), ("target time", fmt(self.target_s, "s")),
                (f"on {self.hardware}", f"{fmt(self.time_s, 's')} (compute {fmt(self.compute_s, 's')}, "
                                        f"memory {fmt(self.memory_s, 's')}{self._other()})"),
                ("solving for", self.solve_for),
                (f"peak ({self.precision})", f"{fmt(self.peak_flops, 'FLOP/s')} ({self.peak_factor:.3g}x)"),
                ("bandwidth", f"{fmt(self.bandwidth_Bps, 'B/s')} ({self.bandwidth_factor:.3g}x)"),
                ("capacity", f"{fmt(self.capacity_B, 'B')} ({'fits' if self.fits else 'does not fit'} in "
                             f"{fmt(self.given_capacity_B, 'B')})")]

    __repr__ = Record.__str__


_SOLVE = ("bandwidth", "peak", "both")


def inverse_roofline(workload, hardware, target_s=None, tokens_per_s=None, solve_for: str = "bandwidth",
                     solver: Callable = roofline, **kwargs) -> Requirement:
    """The peak FLOP/s, bandwidth and capacity that a target time (or token rate) requires.

    The pass is evaluated on ``hardware`` with its capacity set aside; then, with
    T = max(W/P, Q/B) and T* the target:

    * ``solve_for="bandwidth"`` (peak fixed): B* = B·T_mem/T*, possible only if
      T_compute ≤ T* — otherwise the compute term alone exceeds the target;
    * ``solve_for="peak"`` (bandwidth fixed): P* = P·T_compute/T*, possible only if
      T_mem ≤ T*;
    * ``solve_for="both"``: both scaled by T/T* (a uniformly faster device).

    The capacity required is the pass's footprint whatever the target. ``tokens_per_s``
    instead of ``target_s`` sets T* = tokens per pass / rate. ``solver`` is any
    function ``(workload, hardware, **kwargs)`` whose result has ``compute_s``,
    ``memory_s``, ``time_s`` and ``footprint_B`` (e.g. :func:`~mlsysim.roofline`); if its
    time is not max(compute, memory) the factor is found by :func:`solve_for`.

    A scalar target that no value can meet raises :class:`~mlsysim.errors.InfeasibleError`;
    an array of targets gives NaN there with ``feasible`` False.

    >>> import mlsysim as ms
    >>> r = inverse_roofline("llama-3-8b", "h100", target_s=2e-3, batch=1)
    >>> round(r.bandwidth_Bps / 1e12, 2), round(r.bandwidth_factor, 2)
    (7.51, 2.24)
    """
    if solve_for not in _SOLVE:
        raise UnknownNameError("quantity to solve for", solve_for, _SOLVE)
    if (target_s is None) == (tokens_per_s is None):
        raise MlsysimError("give exactly one of target_s and tokens_per_s")
    hw = _hardware(hardware)
    unlimited = _with(hw, {"memory_B": 1e30})  # capacity is reported, not imposed
    r = solver(workload, unlimited, **kwargs)
    if np.ndim(r.time_s):
        raise MlsysimError("inverse_roofline inverts one configuration; pass arrays only as targets")
    if target_s is not None:
        check_positive("target_s", target_s)
        target = target_s if np.ndim(target_s) == 0 else np.asarray(target_s, dtype=float)
    else:
        check_positive("tokens_per_s", tokens_per_s)
        rate = tokens_per_s if np.ndim(tokens_per_s) == 0 else np.asarray(tokens_per_s, dtype=float)
        target = r.tokens_per_s * r.time_s / rate
    precision = _precision_of(solver, kwargs)
    scalar = np.ndim(target) == 0
    closed = math.isclose(r.time_s, max(r.compute_s, r.memory_s), rel_tol=1e-9)
    why = ""
    if solve_for == "both":
        kp = kb = r.time_s / target
        ok = True if scalar else np.ones(np.shape(target), dtype=bool)
    elif closed:
        other, own = (r.compute_s, r.memory_s) if solve_for == "bandwidth" else (r.memory_s, r.compute_s)
        ok = other <= target * (1 + 1e-12)
        k = (own / target if ok else math.nan) if scalar else np.where(ok, own / target, np.nan)
        kb, kp = (k, 1.0) if solve_for == "bandwidth" else (1.0, k)
        if not np.all(ok):
            term = "compute" if solve_for == "bandwidth" else "memory"
            why = (f"the {term} term alone takes {fmt(other, 's')} on {hw.name}, more than the target; "
                   f"no {solve_for} can meet it")
    else:  # more terms than one max(): bracket the factor on the vectorised solver
        k, ok, why = _bracketed_factor(solver, workload, unlimited, solve_for, target, scalar, kwargs)
        kb, kp = (k, 1.0) if solve_for == "bandwidth" else (1.0, k)
    if scalar:
        if not ok:
            raise InfeasibleError(f"{r.workload} {r.phase}: cannot reach {fmt(target, 's')}: {why}")
        kb, kp, ok = float(kb), float(kp), True
    else:
        kb, kp = kb * np.ones(np.shape(target)), kp * np.ones(np.shape(target))
    return Requirement(workload=r.workload, hardware=hw.name, phase=r.phase, solve_for=solve_for,
                       target_s=target, time_s=r.time_s, compute_s=r.compute_s, memory_s=r.memory_s,
                       peak_factor=kp, bandwidth_factor=kb, peak_flops=kp * hw.peak(precision),
                       bandwidth_Bps=kb * hw.memory_bw_Bps, capacity_B=r.footprint_B,
                       given_capacity_B=hw.memory_B, precision=precision, feasible=ok,
                       reason="" if scalar or np.all(ok) else why)


def _bracketed_factor(solver, workload, hw: Hardware, spec: str, target, scalar: bool, kwargs: dict):
    """Factor on ``spec`` that meets each target (NaN where none does), whether it exists, and why not."""
    ks, oks, why = [], [], ""
    for t in np.atleast_1d(target):
        try:
            ks.append(_spec_factor(solver, workload, hw, spec, float(t), kwargs))
            oks.append(True)
        except InfeasibleError as e:
            ks.append(math.nan)
            oks.append(False)
            why = str(e)
    k = ks[0] if scalar else np.reshape(ks, np.shape(target))
    ok = oks[0] if scalar else np.reshape(oks, np.shape(target))
    return k, ok, why


def _spec_factor(solver, workload, hw: Hardware, spec: str, target_s: float, kwargs: dict) -> float:
    """Factor on ``spec`` of ``hw`` at which ``solver``'s time reaches ``target_s`` (see :func:`solve_for`)."""
    def f(**factor):
        return solver(workload, scale_hardware(hw, **factor), **kwargs)
    return solve_for(f, spec, target_s, bracket=(1e-4, 1e4))
