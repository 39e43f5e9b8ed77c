"""Serving under load: an iteration-level scheduler over the iteration model, request by request.

:func:`serve` runs a stream of requests through a continuous-batching engine the way vLLM and
TensorRT-LLM schedule them (Yu et al. 2022, Orca; Kwon et al. 2023, vLLM) and reports what their
benchmarks report: TTFT, inter-token latency (ITL) and end-to-end latency per request (mean, p50,
p90, p99), output and total tokens per second, the batch and KV-cache occupancy over time and
the number of preemptions.

**Load.** ``concurrency=C``: a closed loop, as genai-perf and NIM's benchmarks run it — C requests
in flight, a new one sent the moment one finishes. ``rate=R``: Poisson arrivals at R requests/s
(seeded). ``rate=inf``: every request queued at time 0, as ``trtllm-bench throughput`` does.

**Each iteration** (:mod:`mlsysim.serving.engines` for the limits):

1. Every running sequence that is decoding contributes one token; prompts being prefilled take
   what is left of the token budget (max_tokens), whole, or in chunks with chunked prefill.
2. Waiting requests are admitted first come, first served while the batch has room, the budget
   has room for the prompt (or a chunk of it) and the KV cache has free pages — for the prompt
   and every output token when the engine reserves whole requests, else for what it holds now.
3. The iteration's time comes from :class:`~mlsysim.serving.iteration.IterationModel`; a
   decode-only iteration is padded to the next captured CUDA-graph batch size.
4. A prompt whose last chunk ran emits its first token at the iteration's end (TTFT); a decoding
   sequence emits one token per iteration. With pages allocated as sequences grow, a full cache
   preempts the newest request: its pages are freed and it later recomputes its tokens as a
   prompt (vLLM's recompute preemption).

ITL of a request is (e2e − TTFT)/(output − 1), as genai-perf and trtllm-bench (TPOT) report it.

**Speed.** A stretch of decode-only iterations in which nothing can be admitted and nothing
finishes has a fixed batch and a context that grows by one token per sequence per iteration, so
its time is summed in closed form: the simulation advances event by event, not token by token
(benchmarks/bench_serving.py times 10,000 requests: about half a second on one core). A discrete-event
simulator driven by profiled operators (Vidur, Agrawal et al. 2024) times every iteration from
measured kernels of the target GPU; this one needs no GPU and no profile, at the price of
analytical kernel times.

Worked number (tested): Llama-3.1-8B in fp8 on one H100 SXM behind ``trtllm-bench``, 128
tokens in and 128 out, 30,000 requests queued at once: about 28,400 output tokens/s
(TensorRT-LLM's performance page measured 28,312 with the same requests).
"""
from __future__ import annotations

import math
import numbers
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ..errors import InfeasibleError, MlsysimError, check_count
from ..registry import hardware as _hardware
from ..tables import Record
from ..units import bytes_per, fmt
from .engines import Engine, engine as _engine, trtllm_bench_limits
from .iteration import IterationModel, iteration_model, prompt_blocks
from .step import _tp_layout, _transformer

MAX_ITERATIONS = 5_000_000
"""Bound on the iterations of one simulation: a run that has not ended by then raises."""

PERCENTILES = (50, 90, 99)


def _stats(x: np.ndarray) -> dict:
    if len(x) == 0:
        return {"mean": math.nan, **{f"p{p}": math.nan for p in PERCENTILES}}
    return {"mean": float(np.mean(x)), **{f"p{p}": float(np.percentile(x, p)) for p in PERCENTILES}}


@dataclass(frozen=True)
class ServingRun(Record):
    """Result of :func:`serve` (times in s)."""

    workload: str
    hardware: str
    tp: int
    precision: str
    engine: str
    load: str                       # "concurrency 8", "rate 2 req/s", "all queued"
    requests: int
    prompt_tokens: float            # mean
    output_tokens: float            # mean
    max_batch: int
    max_tokens: int
    kv_capacity_tokens: int
    duration_s: float
    ttft_s: dict
    itl_s: dict
    e2e_s: dict
    output_tokens_per_s: float
    total_tokens_per_s: float
    requests_per_s: float
    preemptions: int
    iterations: int
    timeline: dict = field(repr=False, default_factory=dict)   # t_s, batch, kv_used (fractions)

    def to_json(self) -> dict:
        """Plain JSON-ready fields (the timeline as lists)."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "timeline"}
        out["timeline"] = {k: [float(v) for v in vals] for k, vals in self.timeline.items()}
        return out

    def rows(self):
        pct = lambda d: f"mean {fmt(d['mean'], 's')}, p50 {fmt(d['p50'], 's')}, p99 {fmt(d['p99'], 's')}"  # noqa: E731
        return [("workload", self.workload), ("hardware", f"{self.hardware} x {self.tp}, {self.precision}"),
                ("engine", f"{self.engine}: max batch {self.max_batch:,}, max tokens {self.max_tokens:,}, "
                           f"KV cache {self.kv_capacity_tokens:,} tokens"),
                ("load", f"{self.load}, {self.requests:,} requests of {self.prompt_tokens:,.0f} in / "
                         f"{self.output_tokens:,.0f} out"),
                ("TTFT", pct(self.ttft_s)), ("ITL", pct(self.itl_s)), ("end to end", pct(self.e2e_s)),
                ("output tokens/s", f"{self.output_tokens_per_s:,.0f}"),
                ("total tokens/s", f"{self.total_tokens_per_s:,.0f}"),
                ("preemptions", f"{self.preemptions:,}")]


# --- set-up -------------------------------------------------------------------------------
def _lengths(name, mean, std, n, rng, limit):
    if isinstance(mean, (list, tuple, np.ndarray)):
        x = np.asarray(mean)
        if x.shape != (n,):
            raise MlsysimError(f"{name} lengths: one per request ({n}), got shape {x.shape}")
        check_count(name, x)
        if not np.all(x == np.round(x)):
            raise MlsysimError(f"{name} lengths must be whole numbers of tokens")
        return x.astype(np.int64)
    check_count(name, mean)
    if isinstance(std, (bool, np.bool_)) or not isinstance(std, numbers.Real) or not math.isfinite(std) or std < 0:
        raise MlsysimError(f"{name}_std must be a number >= 0 (a spread of lengths in tokens), got {std!r}")
    if std == 0:
        return np.full(n, int(mean), dtype=np.int64)
    return np.clip(np.rint(rng.normal(mean, std, n)), 1, limit).astype(np.int64)


def _load(concurrency, rate, requests):
    if (concurrency is None) == (rate is None):
        raise MlsysimError("give exactly one of concurrency (a closed loop) and rate (arrivals per second, "
                           "or inf: every request queued at once)")
    if concurrency is not None:
        check_count("concurrency", concurrency)
        return f"concurrency {concurrency}"
    if isinstance(rate, (bool, np.bool_)) or not isinstance(rate, numbers.Real) or math.isnan(rate) or rate <= 0:
        raise MlsysimError(f"rate must be a positive number of requests per second (or inf), got {rate!r}")
    return "all queued" if math.isinf(rate) else f"rate {rate:g} req/s"


def _capacity(m, hw, it: IterationModel, eng: Engine, tp: int, tokens: int) -> float:
    """KV-cache bytes per GPU: the engine's fraction of what the weights and the largest
    iteration's live activations (residual, norm output and the widest intermediate, 16-bit) leave."""
    widest = max(m.d_model, 2 * m.d_ff / tp if m.d_ff else 0.0, (m.heads + 2 * m.kv_heads) * m.head_dim / tp)
    activations = tokens * (2 * m.d_model + widest) * 2.0
    free = hw.memory_B - it.weights_B - activations
    return eng.kv_fraction * free


@dataclass
class _Plan:
    """Resolved limits of one run."""

    max_batch: int
    max_tokens: int
    pages: int
    it: IterationModel


def _plan(m, hw, eng: Engine, tp, precision, kv_precision, isl, osl) -> _Plan:
    kp = kv_precision or precision
    kv_token = m.kv_bytes_per_token(kp) * _tp_layout(m, tp)[1]     # this GPU's share of the KV heads
    weights = m.params * bytes_per(precision) / tp
    if weights >= hw.memory_B:
        raise InfeasibleError(f"{m.name} needs {fmt(weights, 'B')} of {precision} weights per GPU at tp={tp}; "
                              f"{hw.name} holds {fmt(hw.memory_B, 'B')}: use a larger tp or a smaller precision")
    batch, tokens = eng.max_batch, eng.max_tokens
    if eng.static:
        batch = batch or len(isl)
        tokens = tokens or int(batch * isl.max())
    elif batch is None or tokens is None:
        b, t = trtllm_bench_limits(kv_token, eng.kv_fraction * (hw.memory_B - weights), float(isl.mean()),
                                   float(osl.mean()), int(isl.max()))
        batch, tokens = batch or b, tokens or t
    if not eng.chunked_prefill and not eng.static:
        tokens = max(tokens, int(isl.max()))
    graph = [g for g in eng.graph_sizes if g >= min(batch, max(eng.graph_sizes or (0,)))]
    table = max(tokens, min(graph) if graph else 0)
    it = iteration_model(m, hw, tp=tp, precision=precision, kv_precision=kp, max_tokens=table)
    kv_B = _capacity(m, hw, it, eng, tp, tokens)
    if kv_B <= 0:
        raise InfeasibleError(f"{m.name} on {tp} x {hw.name}: {fmt(it.weights_B, 'B')} of weights per GPU and the "
                              f"activations of a {tokens:,}-token iteration leave no room for a KV cache in "
                              f"{fmt(hw.memory_B, 'B')}: use a larger tp, a smaller precision or fewer max_tokens")
    pages = int(kv_B / (kv_token * eng.page_tokens))
    need = int(math.ceil((isl + (osl if eng.reserve_whole else 1)).max() / eng.page_tokens))
    if pages < need:
        raise InfeasibleError(f"{m.name} on {tp} x {hw.name}: the KV cache holds {pages * eng.page_tokens:,} "
                              f"tokens, fewer than one request needs ({need * eng.page_tokens:,})")
    return _Plan(int(batch), int(tokens), pages, it)


# --- the simulation -------------------------------------------------------------------------
class _Sim:
    """State of one run: per-request arrays, the running set (admission order) and the queue."""

    def __init__(self, plan: _Plan, eng: Engine, isl, osl, arrivals, closed: int | None):
        self.p, self.e = plan, eng
        self.isl, self.osl = isl, osl
        n = len(isl)
        self.arrival = arrivals
        self.first = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.target = isl.copy()          # tokens to prefill (prompt; after a preemption, also the output so far)
        self.done = np.zeros(n, np.int64)  # of target, prefilled
        self.kv = np.zeros(n, np.int64)    # tokens in the cache
        self.gen = np.zeros(n, np.int64)   # tokens generated
        self.pages = np.zeros(n, np.int64)
        self.run = np.zeros(0, np.int64)
        self.queue = deque(range(n) if closed is None else range(closed))
        self.issued = n if closed is None else closed
        self.closed = closed is not None
        self.t, self.used, self.iterations, self.preemptions = 0.0, 0, 0, 0
        self.t_prev = 0.0                       # when the iteration that just ended started
        self.lingering = np.zeros(0, np.int64)  # finished, still in the batch for one step (overlap)
        self.trace = ([], [], [])
        sizes = tuple(eng.graph_sizes)
        self.graphs = sizes if sizes == tuple(sorted(sizes)) else None   # ascending: found by bisection

    # -- admission and the iteration's tokens --
    def _cutoff(self) -> float:
        """Latest arrival the next iteration can admit: with the overlap scheduler, that iteration was
        scheduled when the one that just ended started."""
        return self.t_prev if self.e.overlap else self.t

    def _pages_for(self, i) -> int:
        tokens = self.isl[i] + self.osl[i] if self.e.reserve_whole else self.target[i] + 1
        return -(-int(tokens) // self.e.page_tokens)

    def _compose(self, decoding, prefilling=None):
        """[(id, chunk)] of the next iteration beside the ``decoding`` ids; admits from the queue.
        ``prefilling``: the running ids with prompt tokens left, when the caller has them."""
        run, e, p = self.run, self.e, self.p
        budget = p.max_tokens - len(decoding)
        chunks = []
        if prefilling is None:
            prefilling = run[self.done[run] < self.target[run]]
        for i in prefilling:
            left = int(self.target[i] - self.done[i])
            c = min(left, budget) if e.chunked_prefill else (left if left <= budget else 0)
            if c > 0:
                chunks.append((int(i), c))
                budget -= c
        if e.static and len(run):
            return chunks
        new = []
        while self.queue and budget > 0 and len(run) + len(new) < p.max_batch:
            i = self.queue[0]
            if self.arrival[i] > self._cutoff():
                break
            need = self._pages_for(i)
            left = int(self.target[i])
            if self.used + need > p.pages or (not e.chunked_prefill and left > budget):
                break
            self.queue.popleft()
            self.used += need
            self.pages[i] = need
            c = min(left, budget)
            chunks.append((i, c))
            new.append(i)
            budget -= c
        if new:
            self.run = np.concatenate([run, np.asarray(new, np.int64)])
        return chunks

    def _grow_pages(self, decoding) -> np.ndarray:
        """Pages for the decoding sequences' next token (allocated as they grow); preempts the newest
        running requests while the cache is short. Returns the decoding ids that still run."""
        if self.e.reserve_whole or len(decoding) == 0:
            return decoding
        want = -(-(self.kv[decoding] + 1) // self.e.page_tokens)
        extra = np.maximum(want - self.pages[decoding], 0)
        grow = int(extra.sum())
        while self.used + grow > self.p.pages and len(self.run) > 1:
            victim = int(self.run[-1])
            self.run = self.run[:-1]
            self.used -= int(self.pages[victim])
            self.pages[victim] = 0
            self.target[victim] = self.isl[victim] + max(int(self.gen[victim]) - 1, 0)
            self.done[victim] = self.kv[victim] = 0
            self.queue.appendleft(victim)
            self.preemptions += 1
            keep = decoding != victim
            decoding, want, extra = decoding[keep], want[keep], extra[keep]
            grow = int(extra.sum())
        self.pages[decoding] += extra
        self.used += grow
        return decoding

    # -- one iteration, or a stretch of identical decode-only ones --
    def _graph_rows(self, n: int):
        if self.graphs is not None:
            j = bisect_left(self.graphs, n)
            return (self.graphs[j], True) if j < len(self.graphs) else (n, False)
        sizes = [g for g in self.e.graph_sizes if g >= n]
        return (sizes[0], True) if sizes else (n, False)

    def step(self):
        """Run the next iteration (or a closed-form stretch of decode-only iterations)."""
        run = self.run
        prefilled = self.done[run] >= self.target[run]
        decoding = self._grow_pages(run[prefilled])
        # the prefilling ids, unless a preemption changed the running set
        chunks = self._compose(decoding, run[~prefilled] if self.run is run else None)
        if not chunks and len(decoding) == 0:
            self._idle()
            return
        if not chunks and self._blocked():
            self._stretch(decoding)
            return
        it = self.p.it
        n_dec = len(decoding)
        tokens = n_dec + sum(c for _, c in chunks)
        finishing = [i for i, c in chunks if self.done[i] + c >= self.target[i]]
        rows, graph = self._graph_rows(tokens) if not chunks else (tokens, False)
        blocks = sum(prompt_blocks(c, int(self.done[i])) for i, c in chunks)
        dt = float(it.time(rows, n_dec, float(self.kv[decoding].sum() + n_dec), blocks,
                           min(n_dec + len(finishing), rows), graph))
        self.t_prev = self.t
        self.t += dt
        self._record(len(self.run))
        for i, c in chunks:
            self.done[i] += c
            self.kv[i] += c
        self.kv[decoding] += 1
        self.gen[decoding] += 1
        for i in finishing:
            if self.gen[i] == 0:           # a first prefill; a recomputed one emits nothing new
                self.gen[i] = 1
                self.first[i] = self.t
        self.iterations += 1
        self._retire()

    def _blocked(self) -> bool:
        """True when nothing can be admitted before a running request finishes or a request arrives."""
        if not self.queue:
            return True
        return self.arrival[self.queue[0]] > self._cutoff() or len(self.run) >= self.p.max_batch or self.e.static \
            or self.used + self._pages_for(self.queue[0]) > self.p.pages

    def _stretch(self, decoding):
        """k decode-only iterations at a fixed batch, summed in closed form: iteration j has
        Σ(kv + 1) + j·n cached tokens to read, so its time is a + b·j."""
        n = len(decoding)
        k = max(int((self.osl[decoding] - self.gen[decoding]).min()), 1)   # 1: a lingering request leaves
        page = self.e.page_tokens
        if not self.e.reserve_whole:    # pages grow with the cache: stop before they could run short
            free = self.p.pages - self.used
            room = page * self.pages[decoding] - self.kv[decoding] - 1
            k = min(k, page * (free // n) if free >= n else max(1, int(room.min()) + 1))
        rows, graph = self._graph_rows(n)
        c0 = float(self.kv[decoding].sum() + n)
        it = self.p.it
        a = float(it.time(rows, n, c0, 0.0, min(n, rows), graph))
        b = it.decode_attn_s_per_token * n
        times = a + b * np.arange(k)
        if self.queue and len(self.run) < self.p.max_batch and not self.e.static:
            ends = self.t + np.cumsum(times)
            k = min(k, int(np.searchsorted(ends, self.arrival[self.queue[0]])) + 1)
            times = times[:k]
        self.t_prev = self.t + float(times[:-1].sum())
        self.t += float(times.sum())
        self._record(n)
        self.kv[decoding] += k
        self.gen[decoding] += k
        if not self.e.reserve_whole:
            extra = np.maximum(-(-self.kv[decoding] // page) - self.pages[decoding], 0)
            self.pages[decoding] += extra
            self.used += int(extra.sum())
        self.iterations += k
        self._retire()

    def _idle(self):
        """Nothing runs: wait for the next arrival."""
        if not self.queue:
            raise MlsysimError("serving simulation stalled with requests left")
        self.t = self.t_prev = max(self.t, float(self.arrival[self.queue[0]]))   # nothing to overlap with

    def _retire(self):
        """Requests whose last token came out end now (their e2e); they leave the batch now, or, with
        the overlap scheduler, after the one extra step already scheduled for them."""
        run = self.run
        if len(self.lingering):
            self._release(self.lingering)
            run = self.run = run[~np.isin(run, self.lingering)]
            self.lingering = self.lingering[:0]
        ended = run[(self.gen[run] >= self.osl[run]) & np.isnan(self.finish[run])]
        if len(ended) == 0:
            return
        self.finish[ended] = self.t
        if self.e.overlap:
            self.lingering = ended
        else:
            self._release(ended)
            self.run = run[self.gen[run] < self.osl[run]]
        if self.closed:
            for _ in range(len(ended)):
                if self.issued < len(self.isl):
                    self.arrival[self.issued] = self.t
                    self.queue.append(self.issued)
                    self.issued += 1

    def _release(self, ids):
        self.used -= int(self.pages[ids].sum())
        self.pages[ids] = 0

    def _record(self, batch: int):
        self.trace[0].append(self.t)
        self.trace[1].append(batch)
        self.trace[2].append(self.used / self.p.pages)

    def finished(self) -> bool:
        return not self.queue and len(self.run) == 0 and self.issued >= len(self.isl)


def _timeline(trace, points: int = 400) -> dict:
    t, batch, kv = (np.asarray(x, dtype=float) for x in trace)
    if len(t) > points:
        pick = np.unique(np.linspace(0, len(t) - 1, points).round().astype(int))
        t, batch, kv = t[pick], batch[pick], kv[pick]
    return {"t_s": t, "batch": batch, "kv_used": kv}


def serve(model, hardware, *, prompt, output, tp: int = 1, precision: str = "bf16",
          kv_precision: str | None = None, concurrency: int | None = None, rate: float | None = None,
          requests: int = 1000, engine="trtllm", seed: int = 0, prompt_std: float = 0.0,
          output_std: float = 0.0, **engine_changes) -> ServingRun:
    """Simulate ``requests`` requests of ``prompt`` tokens in and ``output`` out (plain numbers, or one
    per request; ``*_std`` > 0 draws them from a seeded normal) served by ``engine`` (``trtllm``,
    ``vllm``, ``static`` or an :class:`~mlsysim.serving.engines.Engine`; ``engine_changes`` such as
    ``max_batch=256`` or ``chunked_prefill=True`` override its settings) under ``concurrency`` or
    ``rate`` (see the module docstring). Deterministic for a seed.

    >>> r = serve("llama-3.1-8b", "h100-sxm", precision="fp8", prompt=128, output=128, rate=float("inf"),
    ...           requests=30000)
    >>> round(r.output_tokens_per_s, -2)
    28400.0
    """
    m = _transformer(model)
    hw = _hardware(hardware)
    check_count("requests", requests)
    check_count("tp", tp)
    load = _load(concurrency, rate, requests)
    eng = _engine(engine, **engine_changes)
    check_count("seed", seed, minimum=0)
    rng = np.random.default_rng(seed)
    isl = _lengths("prompt", prompt, prompt_std, requests, rng, m.max_context)
    osl = _lengths("output", output, output_std, requests, rng, m.max_context)
    longest = int((isl + osl).max())
    if longest > m.max_context:
        raise InfeasibleError(f"{m.name} has a context window of {m.max_context:,} tokens; prompt + output "
                              f"reaches {longest:,}")
    plan = _plan(m, hw, eng, tp, precision, kv_precision, isl, osl)
    if concurrency is not None:
        arrivals = np.full(requests, np.inf)
        arrivals[:min(concurrency, requests)] = 0.0
    elif math.isinf(rate):
        arrivals = np.zeros(requests)
    else:
        arrivals = np.cumsum(rng.exponential(1.0 / rate, requests))
    sim = _Sim(plan, eng, isl, osl, arrivals, None if concurrency is None else min(concurrency, requests))
    while not sim.finished():
        if sim.iterations > MAX_ITERATIONS:
            raise MlsysimError(f"serving simulation passed {MAX_ITERATIONS:,} iterations without ending")
        sim.step()
    return _result(m, hw, tp, precision, eng, load, plan, sim)


def _result(m, hw, tp, precision, eng, load, plan: _Plan, sim: _Sim) -> ServingRun:
    ttft = sim.first - sim.arrival
    e2e = sim.finish - sim.arrival
    many = sim.osl > 1
    itl = (sim.finish[many] - sim.first[many]) / (sim.osl[many] - 1)
    start = float(sim.arrival.min())
    duration = float(sim.finish.max()) - start
    return ServingRun(
        workload=m.name, hardware=hw.name, tp=int(tp), precision=precision, engine=eng.name, load=load,
        requests=len(sim.isl), prompt_tokens=float(sim.isl.mean()), output_tokens=float(sim.osl.mean()),
        max_batch=plan.max_batch, max_tokens=plan.max_tokens,
        kv_capacity_tokens=plan.pages * eng.page_tokens, duration_s=duration,
        ttft_s=_stats(ttft), itl_s=_stats(itl), e2e_s=_stats(e2e),
        output_tokens_per_s=float(sim.osl.sum()) / duration,
        total_tokens_per_s=float((sim.isl + sim.osl).sum()) / duration,
        requests_per_s=len(sim.isl) / duration, preemptions=sim.preemptions, iterations=sim.iterations,
        timeline=_timeline(sim.trace))
