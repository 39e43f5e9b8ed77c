"""Test-time compute: what K reasoning steps cost a service sized for a request rate (notebook 08).

A request brings p prompt tokens and generates n = K·τ + a tokens: K reasoning steps of τ tokens
("thinking", as in chain-of-thought; Wei et al. 2022) and an answer of a tokens. One replica is a
group of tp GPUs (``tp``: by default the smallest that holds the model and one request at its last
token, :func:`mlsysim.serving.min_tp`) serving B requests together, with B the largest batch whose
KV cache still fits at context p + n (:func:`mlsysim.serving.max_batch`) and whose prompts fit when
prefilled together, capped at ``max_num_seqs`` (the server's limit on running requests; default
:data:`MAX_BATCH`, 256). The latency of a request is that of the batch (:func:`mlsysim.serving.generate`):

    e2e(B) = TTFT(B) + Σ_{c = p}^{p+n−2} ITL(B, c)

A replica completes X = B / e2e requests per second, so a service of λ requests per second at
utilisation ρ needs R = ⌈λ / (ρ·X)⌉ replicas and G = R·tp GPUs (Little's law: λ·e2e requests in
flight, B per replica). At a price c per GPU-hour it costs G·c per hour, 8,760·G·c per year and
G·c / (3,600·λ) per request. With a latency target, B shrinks to the candidate batch (powers of two
up to the largest) with the highest throughput whose e2e meets it; none → infeasible.

Longer reasoning costs more than in proportion to its tokens: every extra token is a decode step
that re-reads a longer KV cache, and the longer cache leaves room for fewer requests per replica.

Routing (Ong et al. 2024, RouteLLM) sends a fraction f of the requests to a small model and the
rest to a large one, each deployment sized for its share of λ.

Assumptions: the requests of a batch are identical and start together (a continuous-batching server
interleaves them; the mean cost per token matches to first order); no queueing delay beyond ρ.

Worked numbers (tested): Llama-3-70B on H100s at $2.99 per GPU-hour, 10 requests/s of 1,024 prompt
and 256 answer tokens: replicas of 4 GPUs at batch 190, 4 GPUs, $105 k a year. With 8 steps of 512
thinking tokens: replicas of 8 GPUs at batch 256, 40 GPUs, $1.05 M a year; held to a 60 s latency
target, batch 28 and 176 GPUs, $4.61 M a year.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .tables import Record
from .economics import cloud_offer
from .errors import InfeasibleError, MlsysimError, check_count, check_fraction, check_positive, check_single_count
from .registry import hardware as _hardware, model as _model
from .serving import _valid_tp, generate, max_batch, min_tp, prefill
from .units import fmt

MAX_BATCH = 256
"""Default ``max_num_seqs`` of :func:`reasoning_service`, the most sequences one replica batches:
the default of vLLM's V0 engine (``EngineArgs.max_num_seqs = 256``, vLLM 0.6 and 0.7, 2024).
Current vLLM, whose V1 engine is the default since v0.8 (March 2025), sets 1,024 on GPUs with at
least 70 GiB other than the A100 (``EngineArgs.get_batch_defaults``; H100, H200, B200) and keeps
256 elsewhere: pass ``max_num_seqs=1024`` to model such a server."""

HOURS_PER_YEAR = 8760.0


@dataclass(frozen=True, repr=False)
class ReasoningService(Record):
    """Result of :func:`reasoning_service`: latency of one request and the deployment for ``qps``.

    Scalar inputs give floats; arrays give arrays, NaN where infeasible (``feasible`` False, ``reason``).
    """

    workload: str
    hardware: str
    tp: object
    steps: object
    tokens_per_step: object
    prompt_tokens: object
    answer_tokens: object
    output_tokens: object
    batch: object
    ttft_s: object
    itl_s: object
    e2e_s: object
    requests_per_s_per_replica: object
    qps: object
    replicas: object
    gpus: object
    usd_per_gpu_hour: object
    feasible: object
    reason: str = ""

    @property
    def usd_per_hour(self):
        return self.gpus * self.usd_per_gpu_hour

    @property
    def usd_per_year(self):
        return self.usd_per_hour * HOURS_PER_YEAR

    @property
    def usd_per_request(self):
        return self.usd_per_hour / (3600.0 * self.qps)

    @property
    def usd_per_million_tokens(self):
        """Cost of a million generated tokens (thinking plus answer), as
        :func:`mlsysim.economics.usd_per_million_tokens` (NaN where infeasible)."""
        return self.usd_per_hour * 1e6 / (3600.0 * self.qps * self.output_tokens)

    @property
    def utilization(self):
        """Share of the deployment's request capacity that ``qps`` uses."""
        return self.qps / (self.replicas * self.requests_per_s_per_replica)

    def rows(self) -> list[tuple[str, str]]:
        if np.ndim(self.e2e_s):
            return [("shape", str(np.shape(self.e2e_s)))]
        return [("model", f"{self.workload} on {self.hardware} x {self.tp:g}"),
                ("request", f"{self.prompt_tokens:g} in, {self.steps:g} steps x {self.tokens_per_step:g} "
                            f"+ {self.answer_tokens:g} out"),
                ("batch per replica", f"{self.batch:g}"), ("TTFT", fmt(self.ttft_s, "s")),
                ("mean ITL", fmt(self.itl_s, "s")), ("end to end", fmt(self.e2e_s, "s")),
                ("replicas for the load", f"{self.replicas:g} for {self.qps:g} requests/s"),
                ("GPUs", f"{self.gpus:g}"), ("cost per year", "$" + fmt(self.usd_per_year, "", 3)),
                ("cost per request", f"${self.usd_per_request:.3g}"),
                ("cost per million tokens", f"${self.usd_per_million_tokens:.3g}")]

    __repr__ = Record.__str__


def _count(x, name: str, minimum: int = 0):
    """A count as a float (array), and the mask of its whole entries (None when all are whole)."""
    whole = check_count(name, x, minimum=minimum)
    return (float(x) if np.ndim(x) == 0 else np.asarray(x, dtype=float)), whole


def _price(price, hardware) -> object:
    """USD per GPU-hour from a cloud offer (which must rent this hardware) or a number."""
    if isinstance(price, str):
        offer = cloud_offer(price)
        if _hardware(offer.accelerator).name != hardware.name:
            raise MlsysimError(f"cloud offer {offer.name} rents {offer.accelerator}, not {hardware.name}; "
                               f"pass a price in USD per GPU-hour instead")
        return offer.usd_per_accelerator_hour
    check_positive("price (USD per GPU-hour)", price)
    return float(price) if np.ndim(price) == 0 else np.asarray(price, dtype=float)


def _scalar(*xs) -> bool:
    return all(np.ndim(x) == 0 for x in xs)


def reasoning_service(model, hardware, qps, price, steps=0, tokens_per_step=256, prompt_tokens=1024,
                      answer_tokens=256, precision: str = "bf16", tp=None, batch=None, latency_slo_s=None,
                      max_utilization=1.0, max_tp: int = 8, max_num_seqs: int = MAX_BATCH) -> ReasoningService:
    """Latency of a request with ``steps`` reasoning steps and the cost of serving ``qps`` of them.

    ``price``: a cloud offer name (``economics.cloud_offers()``) or USD per GPU-hour. ``tp``
    defaults to the cheapest feasible tensor-parallel degree up to ``max_tp`` (one node), ``batch``
    to the largest that fits (module docstring); ``latency_slo_s`` caps the end-to-end latency;
    ``max_utilization`` (ρ) leaves headroom; ``max_num_seqs`` caps the batch as a server's limit on
    running requests does (:data:`MAX_BATCH`). ``steps``, ``tokens_per_step``, ``prompt_tokens``,
    ``answer_tokens``, ``batch``, ``qps`` and a numeric ``price`` broadcast; a fractional entry of a
    count is NaN with ``feasible`` False (a fractional scalar raises).

    This is a sizing search, like :func:`~mlsysim.serving.serving_plan`: it evaluates every
    tensor-parallel degree with several serving calls each (a few hundred microseconds), so
    sweep depths or loads in one array call rather than a loop.

    >>> s = reasoning_service("llama-3-70b", "h100", qps=10, price=2.99, steps=8, tokens_per_step=512)
    >>> s.tp, s.batch, s.gpus, round(s.usd_per_year / 1e6, 2)
    (8, 256.0, 40.0, 1.05)
    >>> s = reasoning_service("llama-3-70b", "h100", qps=10, price=2.99, steps=8, tokens_per_step=512,
    ...                       latency_slo_s=60)
    >>> s.batch, s.gpus, round(s.usd_per_year / 1e6, 2)
    (28.0, 176.0, 4.61)
    """
    m, hw = _model(model), _hardware(hardware)
    counts = {name: _count(x, name, low) for name, x, low in (
        ("steps", steps, 0), ("tokens_per_step", tokens_per_step, 1), ("prompt_tokens", prompt_tokens, 1),
        ("answer_tokens", answer_tokens, 1), ("batch", batch, 1)) if x is not None}
    (k, _), (tau, _), (p, _), (a, _) = (counts[name] for name in ("steps", "tokens_per_step", "prompt_tokens",
                                                                   "answer_tokens"))
    fractional = [name for name, (_, w) in counts.items() if w is not None]   # array counts with a fraction
    whole = functools.reduce(np.logical_and, (counts[name][1] for name in fractional)) if fractional else None
    check_positive("qps", qps, allow_zero=True)
    check_fraction("max_utilization", max_utilization)
    if latency_slo_s is not None:
        check_positive("latency_slo_s", latency_slo_s)
    rate = _price(price, hw)
    values = dict(steps=k, tokens_per_step=tau, prompt_tokens=p, answer_tokens=a, output_tokens=k * tau + a)
    if whole is not None:   # a fractional count in a sweep: computed as whole, reported as NaN below
        k, tau, p, a = (np.ceil(x) for x in (k, tau, p, a))
    n = k * tau + a
    if np.any(np.asarray(n) < 2):
        raise MlsysimError("a request must generate at least 2 tokens (steps·tokens_per_step + answer_tokens)")
    context = p + n
    qps_ = float(qps) if np.ndim(qps) == 0 else np.asarray(qps, dtype=float)
    if batch is not None:
        batch = counts["batch"][0] if whole is None else np.ceil(counts["batch"][0])
    check_single_count("max_tp", max_tp, why=": the search tries every tensor-parallel degree up to it")
    check_single_count("max_num_seqs", max_num_seqs, why=": one server limit per call")
    if tp is None:
        first = min_tp(m, hw, context_tokens=float(np.min(context)), batch=1, precision=precision, max_tp=max_tp)
        tps = [t for t in range(first, int(max_tp) + 1) if _valid_tp(m, t)]
    else:
        check_single_count("tp", tp, why=": one call per tensor-parallel degree, or tp=None to search")
        tps = [int(tp)]
    shape = np.broadcast_shapes(*(np.shape(v) for v in (k, tau, p, a, qps_, rate, batch)))
    values.update(qps=qps_, usd_per_gpu_hour=rate)
    args = (m, hw, p, n, context, qps_, batch, precision, latency_slo_s, max_utilization, int(max_num_seqs))
    if shape == () and np.ndim(batch) == 0:
        options = [o for o in (_scalar_option(t, *args) for t in tps) if o is not None]
        if not options:
            raise InfeasibleError(f"{m.name} cannot serve requests of {context:,.0f} tokens on {hw.name} "
                                  f"with tp up to {max_tp}" + (f" within {fmt(latency_slo_s, 's')}"
                                                               if latency_slo_s else ""))
        best = min(options, key=lambda o: (o["gpus"], o["e2e_s"]))
        return ReasoningService(workload=m.name, hardware=hw.name, feasible=True, **values, **best)
    options = [o for o in (_option(t, *args, shape) for t in tps) if o is not None]
    if not options:
        raise InfeasibleError(f"{m.name} cannot serve requests of {np.max(context):,.0f} tokens on {hw.name} "
                              f"with tp up to {max_tp}" + (f" within {fmt(latency_slo_s, 's')}" if latency_slo_s
                                                           else ""))
    ok, reason, out = _cheapest(options, shape, whole, fractional, latency_slo_s)
    return ReasoningService(workload=m.name, hardware=hw.name, feasible=ok, reason=reason, **values, **out)


def _cheapest(options, shape, whole, fractional, latency_slo_s):
    """Per entry, the option with the fewest GPUs (then the lowest latency): feasibility, reason, its fields."""
    gpus = np.stack([np.where(np.isfinite(o["gpus"]), o["gpus"] + 1e-6 * o["e2e_s"], np.inf) for o in options])
    pick = np.argmin(gpus, axis=0)
    fits = np.isfinite(np.min(gpus, axis=0))
    ok = fits if whole is None else fits & whole
    out = {key: np.where(ok, np.choose(pick, [o[key] for o in options]), np.nan) for key in options[0]}
    out["tp"] = np.where(ok, np.choose(pick, [np.full(shape, o["tp"]) for o in options]), np.nan)
    why = [] if fits.all() else ["no tensor-parallel group and batch fit"
                                 + (" within the latency target" if latency_slo_s else "")]
    why += [f"{name} must be a whole number" for name in fractional]
    reason = "; ".join(why) + " where feasible is False" if why else ""
    return ok, reason, out


def _scalar_option(tp, m, hw, p, n, context, qps, batch, precision, slo, rho, cap):
    """:func:`_option` for scalar inputs, in plain floats; None where nothing fits."""
    try:
        bmax = min(max_batch(m, hw, context_tokens=context, precision=precision, tp=tp),
                   float(_prefill_batch(m, hw, p, tp, precision)))
    except InfeasibleError:
        return None
    b = float(min(bmax, cap)) if batch is None else (batch if batch <= bmax else math.nan)
    if not b >= 1:
        return None
    if slo is not None:
        b = _batch_for_slo(m, hw, p, n, b, tp, precision, slo)
        if math.isnan(b):
            return None
    try:
        g = generate(m, hw, prompt_tokens=p, output_tokens=n, batch=b, tp=tp, precision=precision)
    except InfeasibleError:
        return None
    x = b / g.e2e_s
    replicas = float(math.ceil(qps / (rho * x)))
    return dict(tp=tp, batch=b, ttft_s=g.ttft_s, itl_s=g.itl_s, e2e_s=g.e2e_s, requests_per_s_per_replica=x,
                replicas=replicas, gpus=replicas * tp)


def _option(tp, m, hw, p, n, context, qps, batch, precision, slo, rho, cap, shape):
    """One tensor-parallel degree: batch, latency, replicas and GPUs (NaN where infeasible), or None."""
    try:
        bmax = np.minimum(max_batch(m, hw, context_tokens=context, precision=precision, tp=tp),
                          _prefill_batch(m, hw, p, tp, precision))
    except InfeasibleError:          # the weights alone do not fit on tp GPUs
        return None
    b = np.minimum(bmax, cap) if batch is None else np.where(batch <= bmax, batch, np.nan)
    b = np.where(b >= 1, b, np.nan)
    if slo is not None and np.any(np.isfinite(b)):
        b = _batch_for_slo(m, hw, p, n, b, tp, precision, slo)
    if not np.any(np.isfinite(b)):
        return None
    g = generate(m, hw, prompt_tokens=p, output_tokens=n, batch=np.nan_to_num(b, nan=1.0), tp=tp,
                 precision=precision)
    good = np.isfinite(b) & np.asarray(g.feasible)
    x = b / g.e2e_s
    replicas = np.ceil(qps / (rho * x))
    full = lambda v: np.broadcast_to(np.where(good, v, np.nan), shape)  # noqa: E731
    return dict(tp=tp, batch=full(b), ttft_s=full(g.ttft_s), itl_s=full(g.itl_s), e2e_s=full(g.e2e_s),
                requests_per_s_per_replica=full(x), replicas=full(replicas), gpus=full(replicas * tp))


def _prefill_batch(m, hw, prompt_tokens, tp, precision):
    """Largest batch whose prompts fit when prefilled together, as :func:`~mlsysim.serving.generate`
    times them (the footprint is affine in the batch)."""
    one = prefill(m, hw, prompt_tokens=prompt_tokens, batch=1.0, tp=tp, precision=precision).footprint_B
    two = prefill(m, hw, prompt_tokens=prompt_tokens, batch=2.0, tp=tp, precision=precision).footprint_B
    per = two - one
    return np.floor((hw.memory_B - (one - per)) / per)


def _batch_for_slo(m, hw, p, n, b, tp, precision, slo):
    """Batch (≤ ``b``) with the highest throughput whose end-to-end latency meets ``slo``: the best
    power of two first, then every whole batch between it and the next power of two."""
    nd = max(np.ndim(p), np.ndim(n), np.ndim(b))
    b = np.asarray(b, dtype=float)
    top = float(np.nanmax(b)) if np.any(np.isfinite(b)) else 1.0
    grid = np.unique(np.concatenate([2.0 ** np.arange(0, math.floor(math.log2(max(top, 1.0))) + 1), [top]]))
    best = _best_batch(m, hw, p, n, b, tp, precision, slo, grid.reshape((-1,) + (1,) * nd))
    if np.any(np.isfinite(best)):
        span = np.arange(0.0, float(np.nanmax(best))).reshape((-1,) + (1,) * nd)
        finer = np.where(span < np.nan_to_num(best, nan=0.0), np.nan_to_num(best, nan=1.0) + span, np.nan)
        refined = _best_batch(m, hw, p, n, b, tp, precision, slo, finer)
        best = np.where(np.isfinite(refined), np.fmax(refined, best), best)
    return float(best) if np.ndim(best) == 0 else best


def _best_batch(m, hw, p, n, b, tp, precision, slo, cands):
    """Among candidate batches (leading axis; NaN = none), the one of highest throughput meeting ``slo``."""
    c = np.broadcast_to(cands, np.broadcast_shapes(np.shape(cands), (1,) + np.shape(b)))
    valid = np.isfinite(c) & (c <= b) & (c >= 1)
    g = generate(m, hw, prompt_tokens=p, output_tokens=n, batch=np.where(valid, c, 1.0), tp=tp, precision=precision)
    e2e = np.asarray(g.e2e_s)
    good = valid & (e2e <= slo) & np.isfinite(e2e)
    thr = np.where(good, np.where(valid, c, 0.0) / np.where(good, e2e, 1.0), -np.inf)
    idx = np.argmax(thr, axis=0)[None]
    best = np.take_along_axis(np.broadcast_to(c, thr.shape), idx, axis=0)[0]
    return np.where(good.any(axis=0), best, np.nan)


# --- routing between a small and a large model --------------------------------------
@dataclass(frozen=True, repr=False)
class Routing(Record):
    """Result of :func:`routing`: two deployments, each sized for its share of the requests."""

    fraction_small: object
    small: ReasoningService
    large: ReasoningService

    @property
    def qps(self):
        return self.small.qps + self.large.qps

    @property
    def gpus(self):
        return self.small.gpus + self.large.gpus

    @property
    def usd_per_year(self):
        return self.small.usd_per_year + self.large.usd_per_year

    @property
    def usd_per_request(self):
        return (self.small.usd_per_hour + self.large.usd_per_hour) / (3600.0 * self.qps)

    def rows(self) -> list[tuple[str, str]]:
        if np.ndim(self.usd_per_year):
            return [("shape", str(np.shape(self.usd_per_year)))]
        return [("to the small model", f"{self.fraction_small:.0%} -> {self.small.workload}, "
                                       f"{self.small.gpus:g} GPUs"),
                ("to the large model", f"{1 - self.fraction_small:.0%} -> {self.large.workload}, "
                                       f"{self.large.gpus:g} GPUs"),
                ("cost per year", "$" + fmt(self.usd_per_year, "", 3)),
                ("cost per request", f"${self.usd_per_request:.3g}")]

    __repr__ = Record.__str__


def routing(small_model, large_model, hardware, qps, fraction_small, price, steps_small=0, steps_large=0,
            **request) -> Routing:
    """Send ``fraction_small`` of ``qps`` to ``small_model`` and the rest to ``large_model``.

    Each side is a :func:`reasoning_service` sized for its share (``steps_small`` and
    ``steps_large`` reasoning steps; other keywords such as ``tokens_per_step`` or ``max_num_seqs`` are shared).
    A side with no traffic has no replicas. ``fraction_small`` broadcasts.

    >>> r = routing("llama-3-8b", "llama-3-70b", "h100", qps=10, fraction_small=0.7, price=2.99,
    ...             steps_large=8, tokens_per_step=512)
    >>> r.small.gpus, r.large.gpus, round(r.usd_per_year / 1e6, 2)
    (1.0, 16.0, 0.45)
    """
    f = fraction_small
    check_positive("fraction_small", f, allow_zero=True)
    if not (type(f) in (int, float) and 0 <= f <= 1):
        a = np.asarray(f, dtype=float)
        if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a > 1):
            raise MlsysimError(f"fraction_small must lie in [0, 1], got {f!r}")
    f = float(f) if np.ndim(f) == 0 else np.asarray(f, dtype=float)
    check_positive("qps", qps)
    check_count("steps_small", steps_small, minimum=0)   # an array: NaN at its fractional entries
    check_count("steps_large", steps_large, minimum=0)
    small = reasoning_service(small_model, hardware, qps * f, price, steps=steps_small, **request)
    large = reasoning_service(large_model, hardware, qps * (1.0 - f), price, steps=steps_large, **request)
    return Routing(fraction_small=f, small=small, large=large)
