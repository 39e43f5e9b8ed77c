"""Quantization: fewer bytes per number, and when that makes a pass faster.

A quantization scheme stores weights in ``w`` bits, computes (and keeps activations) in
``a`` bits and stores the KV cache in ``k`` bits: W4A16 keeps 4-bit weights but computes
in bf16 (GPTQ, Frantar et al. ICLR 2023; AWQ, Lin et al. MLSys 2024), W8A8 computes in
int8 (LLM.int8(), Dettmers et al. NeurIPS 2022; SmoothQuant, Xiao et al. ICML 2023;
integer-only inference, Jacob et al. CVPR 2018), FP8 computes in 8-bit floating point
(Micikevicius et al. 2022). The pass time comes from the roofline with
``weight_precision``/``precision``/``kv_precision`` set by the scheme:

    T = max(W / P_a,  (Q_w·β_w/β_16 + Q_kv·β_k/β_16 + Q_act·β_a/β_16) / B) + T_0

so the speed-up over a 16-bit baseline depends on the regime:

* memory-bound (small-batch decode): S ≈ bytes before / bytes after — up to 16/w when
  weight reads dominate, whatever the compute format;
* compute-bound (prefill, large batches): S = P_a / P_16, i.e. 1 for weight-only schemes
  (they compute in bf16) and about 2 for int8/fp8 on devices with those peaks.

Grouped scales add ``group_B`` bytes per ``group_size`` weights: int4 with one 2-byte scale
per 128 weights stores 4.125 bits, so the ideal weight-read speed-up over fp16 is
16/4.125 = 3.88 (the "3.87x" that the Marlin kernel reaches). ``overhead_s`` is a fixed
time per pass that quantization does not shorten (kernel launches, norms, sampling):
by Amdahl's law it caps the measured speed-up. A device without a peak in the scheme's
compute format is an error, never a silent fall-back.

The accuracy cost is not modelled: :func:`accuracy_table` lists published figures from
``data/quantization.yaml`` — literature numbers, each on its own paper's benchmark.

Worked numbers (tested): Llama-2-7B decode at batch 1 on an A100-80GB speeds up 2.00x
with W8A16 and 4.00x with W4A16 (weights dominate the bytes); a 2,048-token Llama-3-8B
prefill on an H100 gains 1.00x from W4A16 and 2.00x from FP8. Llama-3-70B needs 141 GB in
bf16 but 35.3 GB of weights in int4, which fit on one 80 GB H100.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .errors import InfeasibleError, MlsysimError, UnknownNameError, check_integer, check_positive
from .registry import _read, hardware as _hardware, model as _model
from .roofline import PHASES, Roofline, pass_cost, roofline
from .tables import Record, Table, table
from .units import BYTES_PER_ELEMENT, GB, bytes_per, fmt
from .workloads import CNN


@dataclass(frozen=True)
class Scheme:
    """Formats of the weights, of the compute (and activations) and of the KV cache."""

    name: str
    weights: str
    compute: str
    kv: str
    description: str


SCHEMES = {s.name: s for s in (
    Scheme("fp32", "fp32", "fp32", "fp32", "32-bit floats everywhere"),
    Scheme("bf16", "bf16", "bf16", "bf16", "16-bit baseline"),
    Scheme("fp16", "fp16", "fp16", "fp16", "16-bit baseline (devices without bf16)"),
    Scheme("w8a16", "int8", "bf16", "bf16", "int8 weights, bf16 compute (weight-only)"),
    Scheme("w4a16", "int4", "bf16", "bf16", "int4 weights, bf16 compute (weight-only: GPTQ, AWQ)"),
    Scheme("w8a8", "int8", "int8", "bf16", "int8 weights and activations (LLM.int8(), SmoothQuant)"),
    Scheme("fp8", "fp8", "fp8", "bf16", "fp8 weights and activations, bf16 KV cache"),
    Scheme("fp8-kv8", "fp8", "fp8", "fp8", "fp8 weights, activations and KV cache"),
    Scheme("fp4", "fp4", "fp4", "fp8", "fp4 weights and activations, fp8 KV cache"),
)}


def quant_scheme(name) -> Scheme:
    """A quantization scheme by name (``"w4a16"``, ``"w8a8"``, ``"fp8"``, …); see ``SCHEMES``."""
    if isinstance(name, Scheme):
        return name
    key = str(name).lower().replace("_", "-")
    if key not in SCHEMES:
        raise UnknownNameError("quantization scheme", name, SCHEMES)
    return SCHEMES[key]


def weight_bytes_per_param(precision: str, group_size=None, group_B: float = 2.0):
    """Bytes stored per weight: the format's bytes plus ``group_B`` bytes of scale (and zero
    point) shared by ``group_size`` weights (``None``: per-channel scales, negligible).

    >>> weight_bytes_per_param("int4", group_size=128)      # 4 bits + a 2-byte scale per 128
    0.515625
    >>> round(2 / weight_bytes_per_param("int4", 128), 2)   # ideal speed-up over fp16 weights
    3.88
    """
    b = bytes_per(precision)
    check_positive("group_B", group_B)
    if group_size is None:
        return b
    check_integer("group_size", group_size, minimum=1)
    return b + group_B / np.asarray(group_size, dtype=float) if np.ndim(group_size) else b + group_B / group_size


def precision_table(hardware=None) -> Table:
    """Bits and bytes per element of each format, parameters per GB, and (given a device) its
    dense peak in that format — "no peak" where the device has none."""
    hw = None if hardware is None else _hardware(hardware)
    rows = []
    for p, b in BYTES_PER_ELEMENT.items():
        row = {"format": p, "bits": f"{b * 8:g}", "bytes per element": f"{b:g}",
               "parameters per GB": fmt(GB / b)}
        if hw is not None:
            row[f"{hw.name} dense peak"] = fmt(hw.peak_flops[p], "FLOP/s") if p in hw.peak_flops else "no peak"
        rows.append(row)
    return table(rows, title="Bytes per element by format" + (f" and peaks of {hw.name}" if hw else ""))


# --- speed-up ----------------------------------------------------------------
@dataclass(frozen=True)
class Quantized(Record):
    """Result of :func:`quantized`: one pass under a scheme next to the same pass at a baseline.
    Times in seconds, bytes in bytes; arrays for array inputs, NaN where infeasible."""

    workload: str
    hardware: str
    scheme: str
    baseline: str
    phase: str
    batch: object
    time_s: object
    baseline_s: object
    weight_B: object              # weight bytes read per pass (scales included)
    baseline_weight_B: object
    footprint_B: object           # memory the pass needs
    baseline_footprint_B: object
    capacity_B: float
    bound: object
    baseline_bound: object
    quantized_pass: Roofline
    baseline_pass: Roofline
    feasible: object
    reason: str = ""

    @property
    def speedup(self):
        """Baseline time / quantized time."""
        return self.baseline_s / self.time_s

    @property
    def memory_saved_B(self):
        return self.baseline_footprint_B - self.footprint_B

    @property
    def weight_ratio(self):
        """Weight bytes read at the baseline / under the scheme."""
        return self.baseline_weight_B / self.weight_B

    def rows(self) -> list[tuple[str, str]]:
        if np.ndim(self.time_s):
            return [("shape", str(np.shape(self.time_s))), ("reason", self.reason or "-")]
        return [("workload", self.workload), ("hardware", self.hardware), ("phase", self.phase),
                ("batch", f"{self.batch:g}"), ("scheme", f"{self.scheme} vs {self.baseline}"),
                ("time per pass", f"{fmt(self.time_s, 's')} vs {fmt(self.baseline_s, 's')}"),
                ("bound", f"{self.bound} vs {self.baseline_bound}"),
                ("speed-up", f"{self.speedup:.3g}x"),
                ("weights read", f"{fmt(self.weight_B, 'B')} vs {fmt(self.baseline_weight_B, 'B')}"),
                ("memory needed", f"{fmt(self.footprint_B, 'B')} vs {fmt(self.baseline_footprint_B, 'B')}"
                                  f" of {fmt(self.capacity_B, 'B')}")]

    __repr__ = Record.__str__


def _scales_B(weight_read_B, precision, group_size, group_B):
    """Bytes of group scales read with ``weight_read_B`` bytes of weights stored in ``precision``."""
    if group_size is None:
        return 0.0
    return weight_read_B / bytes_per(precision) * (weight_bytes_per_param(precision, group_size, group_B)
                                                  - bytes_per(precision))


def _pass(m, hw, s: Scheme, args: dict, group_size, group_B, overhead_s):
    """Roofline of one pass under scheme ``s``, with group scales added to the weight traffic."""
    r = roofline(m, hw, precision=s.compute, weight_precision=s.weights, kv_precision=s.kv, **args)
    scales = _scales_B(r.weight_bytes, s.weights, group_size, group_B)
    memory_s = r.memory_s + scales / r.bandwidth_Bps
    footprint = r.footprint_B
    if group_size is not None:
        footprint = footprint + m.params * (weight_bytes_per_param(s.weights, group_size, group_B)
                                            - bytes_per(s.weights))
    if isinstance(memory_s, float) and isinstance(r.compute_s, float):   # scalar fast path
        bound = "compute" if r.compute_s >= memory_s else "memory"
        return r, max(r.compute_s, memory_s) + overhead_s, r.weight_bytes + scales, footprint, bound
    time_s = np.maximum(r.compute_s, memory_s) + overhead_s
    bound = np.where(np.isnan(time_s), "infeasible", np.where(r.compute_s >= memory_s, "compute", "memory"))
    return r, time_s, r.weight_bytes + scales, footprint, bound


def quantized(workload, hardware, scheme="w4a16", baseline="bf16", phase=None, batch=1, context_tokens=0,
              seq_len=None, group_size=None, group_B=2.0, overhead_s=0.0, efficiency=1.0,
              mem_efficiency=1.0) -> Quantized:
    """Time of one pass under a quantization ``scheme`` and under a ``baseline`` scheme, on the roofline.

    Parameters
    ----------
    workload, hardware : name or record.
    scheme, baseline : names in ``SCHEMES`` (e.g. ``"w8a16"``, ``"w4a16"``, ``"w8a8"``, ``"fp8"``).
    phase : ``"decode"`` (default) or ``"prefill"`` for a Transformer, ``"inference"`` for a CNN.
    batch, context_tokens, seq_len : as in :func:`~mlsysim.roofline.roofline` (arrays broadcast).
    group_size, group_B : weights sharing one scale, and the bytes of that scale (and zero point);
        ``None`` means per-channel scales, whose bytes are negligible.
    overhead_s : fixed time per pass that no format changes (added to both passes).
    efficiency, mem_efficiency : achievable fractions of peak and bandwidth.

    Both passes must fit in memory: a scalar call raises
    :class:`~mlsysim.errors.InfeasibleError` naming the one that does not (see
    :func:`quantized_footprint` for what fits); an array call returns NaN with ``feasible`` False.

    >>> q = quantized("llama-2-7b", "a100-80gb", "w4a16")
    >>> q.bound, round(q.speedup, 2)
    ('memory', 4.0)
    >>> round(quantized("llama-3-8b", "h100", "fp8", phase="prefill", seq_len=2048).speedup, 2)
    2.0
    """
    m, hw = _model(workload), _hardware(hardware)
    s, b = quant_scheme(scheme), quant_scheme(baseline)
    phase = PHASES[type(m)][0] if phase is None else phase
    if phase == "training":
        raise MlsysimError("quantized() models inference passes; phase must be decode, prefill or inference")
    check_positive("overhead_s", overhead_s, allow_zero=True)
    check_positive("group_B", group_B)
    overhead_s = overhead_s if type(overhead_s) is float else (
        float(overhead_s) if np.ndim(overhead_s) == 0 else np.asarray(overhead_s, dtype=float))
    args = dict(phase=phase, batch=batch, efficiency=efficiency, mem_efficiency=mem_efficiency,
                context_tokens=context_tokens, seq_len=seq_len)
    passes = []
    for label, sch in (("scheme", s), ("baseline", b)):
        try:
            passes.append(_pass(m, hw, sch, args, group_size if sch is s else None, group_B, overhead_s))
        except InfeasibleError as e:
            hint = ". quantized_footprint() shows what fits" if "memory" in str(e) else ""
            raise InfeasibleError(f"{label} {sch.name}: {e}{hint}") from None
    (rq, tq, wq, fq, bq), (rb, tb, wb, fb, bb) = passes
    if rq.feasible is True and rb.feasible is True and isinstance(fq, float):
        feasible = fq <= hw.memory_B
    else:
        feasible = np.logical_and(rq.feasible, rb.feasible) & (np.asarray(fq) <= hw.memory_B)
    reason = ""
    if np.ndim(feasible) == 0:
        if not feasible:
            raise InfeasibleError(f"{s.name} with group scales needs {fmt(fq, 'B', 4)} but {hw.name} "
                                  f"has {fmt(hw.memory_B, 'B', 4)}")
        feasible = True
    elif not np.all(feasible):
        tq, tb = np.where(feasible, tq, np.nan), np.where(feasible, tb, np.nan)
        bq, bb = np.where(feasible, bq, "infeasible"), np.where(feasible, bb, "infeasible")
        reason = "the scheme's or the baseline's pass needs more memory than the device has where feasible is False"
    return Quantized(workload=m.name, hardware=hw.name, scheme=s.name, baseline=b.name, phase=rq.phase,
                     batch=rq.batch, time_s=tq, baseline_s=tb, weight_B=wq, baseline_weight_B=wb,
                     footprint_B=fq, baseline_footprint_B=fb, capacity_B=hw.memory_B, bound=bq,
                     baseline_bound=bb, quantized_pass=rq, baseline_pass=rb, feasible=feasible, reason=reason)


# --- memory ------------------------------------------------------------------
@dataclass(frozen=True)
class Footprint:
    """Memory one decode step needs under a scheme, and whether it fits on the device."""

    workload: str
    hardware: str
    scheme: str
    weights_B: object
    kv_B: object
    footprint_B: object
    capacity_B: float

    @property
    def fits(self):
        return self.footprint_B <= self.capacity_B

    @property
    def other_B(self):
        """Everything but weights and KV cache (the live activations of the step)."""
        return self.footprint_B - self.weights_B - self.kv_B

    @property
    def headroom_B(self):
        """Memory left over (negative when it does not fit)."""
        return self.capacity_B - self.footprint_B


def quantized_footprint(workload, hardware, scheme="bf16", batch=1, context_tokens=0, group_size=None,
                        group_B=2.0) -> Footprint:
    """Weights, KV cache and total memory of a decode step under ``scheme`` (never raises for size:
    ``fits`` says whether it fits).

    >>> f = quantized_footprint("llama-3-70b", "h100", "w4a16", context_tokens=4096)
    >>> round(f.weights_B / 1e9, 1), bool(f.fits)
    (35.3, True)
    """
    m, hw, s = _model(workload), _hardware(hardware), quant_scheme(scheme)
    per_param = weight_bytes_per_param(s.weights, group_size, group_B)
    if isinstance(m, CNN):
        _, c, _ = pass_cost(m, batch=batch, context_tokens=context_tokens, precision=s.compute,
                            weight_precision=s.weights)
        kv = 0.0 * c.footprint_B
    else:
        _, c, _ = pass_cost(m, phase="decode", batch=batch, context_tokens=context_tokens, precision=s.compute,
                            weight_precision=s.weights, kv_precision=s.kv)
        kv = np.asarray(batch, dtype=float) * (np.asarray(context_tokens, dtype=float) + 1.0) \
            * m.kv_bytes_per_token(s.kv)
        kv = float(kv) if np.ndim(kv) == 0 else kv
    weights = m.params * per_param
    footprint = c.footprint_B + m.params * (per_param - bytes_per(s.weights))
    return Footprint(workload=m.name, hardware=hw.name, scheme=s.name, weights_B=weights, kv_B=kv,
                     footprint_B=footprint, capacity_B=hw.memory_B)


# --- accuracy (literature figures, not a model) ----------------------------------
@dataclass(frozen=True)
class AccuracyResult:
    """One published comparison of a quantized model with its unquantized baseline."""

    method: str
    scheme: str
    model: str
    metric: str
    better: str
    baseline_format: str
    baseline: float
    quantized: float
    source: str
    date: str

    @property
    def cite(self) -> str:
        """Short citation: first author and year."""
        head = self.source.split(",")[0].replace(" et al.", "").replace(" & Alistarh", "")
        return head

    @property
    def change(self) -> float:
        """Quantized minus baseline, in the metric's unit."""
        return self.quantized - self.baseline

    @property
    def worse_by(self) -> float:
        """How much worse the quantized model is (positive = worse), in the metric's unit."""
        return self.change if self.better == "lower" else -self.change


@functools.cache
def accuracy_results() -> tuple[AccuracyResult, ...]:
    """Every published figure in ``data/quantization.yaml`` (literature numbers, not a model)."""
    out = []
    for e in _read("quantization.yaml")["accuracy"]:
        for field in ("method", "source", "date", "baseline", "quantized"):
            if e.get(field) in (None, ""):
                raise MlsysimError(f"quantization accuracy entry {e.get('method', '?')!r} has no {field}")
        if e["better"] not in ("lower", "higher"):
            raise MlsysimError(f"{e['method']}: better must be 'lower' or 'higher', got {e['better']!r}")
        out.append(AccuracyResult(**{**e, "date": str(e["date"]), "baseline": float(e["baseline"]),
                                     "quantized": float(e["quantized"])}))
    return tuple(out)


def accuracy_table(scheme_filter: str | None = None) -> Table:
    """Published accuracy cost of quantization (literature figures, each on its paper's benchmark);
    ``scheme_filter`` keeps rows whose scheme starts with it (e.g. ``"W4"``)."""
    rows = [{"method": f"{a.method} {a.scheme}", "model": a.model, "metric": a.metric,
             "baseline": f"{a.baseline:g}", "quantized": f"{a.quantized:g}",
             "worse by": f"{a.worse_by:+.3g}", "source": a.cite}
            for a in accuracy_results() if scheme_filter is None or a.scheme.startswith(scheme_filter)]
    if not rows:
        raise UnknownNameError("scheme prefix in the accuracy table", scheme_filter,
                               sorted({a.scheme for a in accuracy_results()}))
    return table(rows, title="Accuracy cost of quantization: published figures, not a model")
