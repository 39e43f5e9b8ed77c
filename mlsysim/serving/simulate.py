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
its time is summed in closed form, and the decoding sequences are kept relative to a common clock:
the simulation advances event by event, not token by token, whatever the batch
(benchmarks/bench_serving.py times 10,000 requests: under a quarter of a second on one core). A
discrete-event simulator driven by profiled operators (Vidur, Agrawal et al. 2024) times every iteration from
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
from heapq import heappop, heappush
from operator import mul

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
    """State of one run: per-request lists, the running set (a dict in admission order), its
    prefilling members (a list, same order), its decoding members and the queue.

    Every decoding sequence gains one cached and one generated token per iteration, so a decoding
    request ``i`` holds ``kv[i] − d`` and ``gen[i] − d`` for a decode clock ``d`` that counts those
    iterations: an iteration or a closed-form stretch advances ``d`` and touches no request. The
    batch's cached tokens are Σ(kv − d) + n·d, the next request to finish tops a heap of the ``d``
    at which each has all its output, and, with pages allocated as sequences grow, the pages of
    the decoding set follow from a histogram of (kv − d) modulo the page size."""

    def __init__(self, plan: _Plan, eng: Engine, isl, osl, arrivals, closed: int | None):
        self.p, self.e = plan, eng
        self.isl, self.osl, self.arrival = isl.tolist(), osl.tolist(), arrivals.tolist()
        n = len(self.isl)
        self.first, self.finish = [math.nan] * n, [math.nan] * n
        self.target = list(self.isl)      # tokens to prefill (prompt; after a preemption, also the output so far)
        self.done = [0] * n               # of target, prefilled
        self.kv = [0] * n                 # tokens in the cache (decoding: minus d)
        self.gen = [0] * n                # tokens generated (decoding: minus d)
        self.pages = [0] * n              # at admission (decoding with growing pages: see _pages_of)
        self.joined = [0] * n             # decoding: d + 1 when its prefill ended
        self.end_at = [0] * n             # decoding: the d at which its output is complete
        self.run, self.pre, self.dec, self.active = {}, [], set(), set()   # active: decoding, not ended
        self.ends = []                    # heap of (end_at, id)
        self.d, self.sx = 0, 0            # the decode clock; Σ(kv − d) over the decoding set
        self.cnt = [0] * eng.page_tokens  # decoding sequences by (kv − d) mod page
        self.rems = {}                    # _rem by e mod page
        self.dec_pages, self.e_pages = 0, 0   # their pages: ⌈(kv − d + max(e_pages, joined))/page⌉ each
        self.queue = deque(range(n) if closed is None else range(closed))
        self.issued = n if closed is None else closed
        self.closed = closed is not None
        self.t, self.used, self.iterations, self.preemptions = 0.0, 0, 0, 0
        self.t_prev = 0.0                 # when the iteration that just ended started
        self.lingering = []               # finished, still in the batch for one step (overlap)
        self.trace = ([], [], [])
        sizes = tuple(eng.graph_sizes)
        self.graphs = sizes if sizes == tuple(sorted(sizes)) else None   # ascending: found by bisection
        it = plan.it
        # the terms of IterationModel.time that depend on the token count alone, added in its order
        self.base = ((it.linear_s + it.norms_s_per_token * np.arange(len(it.linear_s))) + it.comm_s
                     + it.layer_s).tolist()
        self.head = it.head_s.tolist()
        self.blocks = {}                  # prompt_blocks by (chunk, cached tokens)
        self.steps = np.arange(max(self.osl) + 1)   # j of a stretch's iterations (never more than an output)

    # -- the decoding set --
    def _time(self, rows: int, seqs: int, context: float, blocks: float, head: int, graph: bool) -> float:
        """IterationModel.time for one iteration, on plain numbers (the same operations in the same order)."""
        it = self.p.it
        gpu = (self.base[rows] + self.head[head] + it.prefill_attn_s_per_block * blocks
               + it.decode_attn_s_per_token * context + it.decode_attn_s_per_seq * seqs)
        return gpu if graph else max(gpu, it.eager_s)

    def _context(self) -> int:
        """Tokens cached by the decoding sequences."""
        return self.sx + len(self.dec) * self.d

    def _rem(self, e: int) -> list:
        """(−(r + e)) mod page for each residue r: what ⌈(x + e)/page⌉·page adds to x + e."""
        page = self.e.page_tokens
        key = e % page
        if key not in self.rems:
            self.rems[key] = [(-(r + key)) % page for r in range(page)]
        return self.rems[key]

    def _dec_pages_at(self, e: int) -> int:
        """Pages of the decoding set when each covers kv − d + e tokens: Σ ⌈(x + e)/page⌉."""
        return (self.sx + len(self.dec) * e + sum(map(mul, self.cnt, self._rem(e)))) // self.e.page_tokens

    def _pages_of(self, i) -> int:
        if i in self.dec and not self.e.reserve_whole:
            return -(-(self.kv[i] + max(self.e_pages, self.joined[i])) // self.e.page_tokens)
        return self.pages[i]

    def _join(self, i):
        """Request ``i`` ends its prefill: it decodes from the next iteration on."""
        self.pre.remove(i)
        x, g = self.kv[i] - self.d, self.gen[i] - self.d
        self.kv[i], self.gen[i], self.joined[i] = x, g, self.d + 1
        self.dec.add(i)
        self.sx += x
        if not self.e.reserve_whole:
            self.cnt[x % self.e.page_tokens] += 1
            self.dec_pages += self.pages[i]
        self.end_at[i] = self.osl[i] - g
        heappush(self.ends, (self.end_at[i], i))
        self.active.add(i)

    def _leave(self, i):
        """Request ``i`` leaves the running set (it ended or is preempted); frees its pages."""
        pages = self._pages_of(i)
        self.used -= pages
        del self.run[i]
        if i not in self.dec:
            self.pre.remove(i)
            return
        self.dec.remove(i)
        self.active.discard(i)
        self.sx -= self.kv[i]
        if not self.e.reserve_whole:
            self.cnt[self.kv[i] % self.e.page_tokens] -= 1
            self.dec_pages -= pages
        self.kv[i] += self.d
        self.gen[i] += self.d

    def _room(self) -> int:
        """Fewest tokens any decoding sequence can add before it needs a page (page·pages − kv − 1),
        its pages grown for the next token."""
        return min(r for r, c in zip(self._rem(self.d + 1), self.cnt) if c)

    def _min_left(self) -> int:
        """max(fewest output tokens any decoding sequence has left, 1)."""
        if self.lingering:
            return 1
        ends = self.ends
        while ends[0][1] not in self.active or self.end_at[ends[0][1]] != ends[0][0]:
            heappop(ends)
        return max(ends[0][0] - self.d, 1)

    # -- admission and the iteration's tokens --
    def _cutoff(self) -> float:
        """Latest arrival the next iteration can admit: with the overlap scheduler, that iteration was
        scheduled when the one that just ended started."""
        return self.t_prev if self.e.overlap else self.t

    def _pages_for(self, i) -> int:
        tokens = self.isl[i] + self.osl[i] if self.e.reserve_whole else self.target[i] + 1
        return -(-tokens // self.e.page_tokens)

    def _compose(self, n_dec: int):
        """[(id, chunk)] of the next iteration beside ``n_dec`` decoding sequences; admits from the queue."""
        e, p, run = self.e, self.p, self.run
        budget = p.max_tokens - n_dec
        chunks = []
        for i in self.pre:
            left = self.target[i] - self.done[i]
            c = min(left, budget) if e.chunked_prefill else (left if left <= budget else 0)
            if c > 0:
                chunks.append((i, c))
                budget -= c
        if e.static and run:
            return chunks
        queue, cutoff = self.queue, self._cutoff()
        while queue and budget > 0 and len(run) < p.max_batch:
            i = queue[0]
            if self.arrival[i] > cutoff:
                break
            need = self._pages_for(i)
            left = self.target[i]
            if self.used + need > p.pages or (not e.chunked_prefill and left > budget):
                break
            queue.popleft()
            self.used += need
            self.pages[i] = need
            c = min(left, budget)
            chunks.append((i, c))
            run[i] = None
            self.pre.append(i)
            budget -= c
        return chunks

    def _grow_pages(self):
        """Pages for the decoding sequences' next token (allocated as they grow); preempts the newest
        running requests while the cache is short."""
        if self.e.reserve_whole or not self.dec:
            return
        e = self.d + 1
        grow = self._dec_pages_at(e) - self.dec_pages
        while self.used + grow > self.p.pages and len(self.run) > 1:
            self._preempt(next(reversed(self.run)))
            grow = self._dec_pages_at(e) - self.dec_pages
        self.used += grow
        self.dec_pages += grow
        self.e_pages = e

    def _preempt(self, victim):
        """vLLM's recompute preemption: the victim's pages are freed and it waits at the head of the
        queue to prefill its prompt and the output it had so far."""
        if victim in self.lingering:
            self.lingering.remove(victim)
        self._leave(victim)
        self.target[victim] = self.isl[victim] + max(self.gen[victim] - 1, 0)
        self.done[victim] = self.kv[victim] = self.pages[victim] = 0
        self.queue.appendleft(victim)
        self.preemptions += 1

    # -- one iteration, or a stretch of identical decode-only ones --
    def _graph_rows(self, n: int):
        if self.graphs is not None:
            j = bisect_left(self.graphs, n)
            return (self.graphs[j], True) if j < len(self.graphs) else (n, False)
        sizes = [g for g in self.e.graph_sizes if g >= n]
        return (sizes[0], True) if sizes else (n, False)

    def _prompt_blocks(self, chunk: int, before: int) -> float:
        key = (chunk, before)
        if key not in self.blocks:
            self.blocks[key] = prompt_blocks(chunk, before)
        return self.blocks[key]

    def step(self):
        """Run the next iteration (or a closed-form stretch of decode-only iterations)."""
        self._grow_pages()
        n_dec = len(self.dec)
        chunks = self._compose(n_dec)
        if not chunks and n_dec == 0:
            self._idle()
            return
        if not chunks and self._blocked():
            self._stretch(n_dec)
            return
        tokens = n_dec + sum(c for _, c in chunks)
        finishing = [i for i, c in chunks if self.done[i] + c >= self.target[i]]
        rows, graph = self._graph_rows(tokens) if not chunks else (tokens, False)
        blocks = sum(self._prompt_blocks(c, self.done[i]) for i, c in chunks)
        dt = self._time(rows, n_dec, float(self._context() + n_dec), blocks,
                        min(n_dec + len(finishing), rows), graph)
        self.t_prev = self.t
        self.t += dt
        self._record(len(self.run))
        for i, c in chunks:
            self.done[i] += c
            self.kv[i] += c
        self.d += 1                        # every decoding sequence: one more token cached and generated
        for i in finishing:
            if self.gen[i] == 0:           # a first prefill; a recomputed one emits nothing new
                self.gen[i] = 1
                self.first[i] = self.t
            self._join(i)
        self.iterations += 1
        self._retire()

    def _blocked(self) -> bool:
        """True when nothing can be admitted before a running request finishes or a request arrives."""
        if not self.queue:
            return True
        return self.arrival[self.queue[0]] > self._cutoff() or len(self.run) >= self.p.max_batch or self.e.static \
            or self.used + self._pages_for(self.queue[0]) > self.p.pages

    def _stretch(self, n: int):
        """k decode-only iterations at a fixed batch of n, summed in closed form: iteration j has
        Σ(kv + 1) + j·n cached tokens to read, so its time is a + b·j."""
        k = self._min_left()               # 1: a lingering request leaves
        page = self.e.page_tokens
        if not self.e.reserve_whole:       # pages grow with the cache: stop before they could run short
            free = self.p.pages - self.used
            k = min(k, page * (free // n) if free >= n else max(1, self._room() + 1))
        rows, graph = self._graph_rows(n)
        a = self._time(rows, n, float(self._context() + n), 0.0, min(n, rows), graph)
        if k > 1 and self._admits_next() and self.arrival[self.queue[0]] <= self.t + a:
            k = 1                          # the next request arrives during the first iteration
        if k == 1:                         # what the sums of _advance give for one iteration
            self.t_prev = self.t
            self.t += a
        else:
            k = self._advance(a, self.p.it.decode_attn_s_per_token * n, k)
        self._record(n)
        self.d += k
        if not self.e.reserve_whole:
            grown = self._dec_pages_at(self.d)
            self.used += grown - self.dec_pages
            self.dec_pages, self.e_pages = grown, self.d
        self.iterations += k
        self._retire()

    def _advance(self, a: float, b: float, k: int) -> int:
        """Advance the clock over up to k iterations of a + b·j seconds, stopping after the one in which
        the next request arrives when it could then be admitted; returns how many ran."""
        times = a + b * self.steps[:k]
        if self._admits_next():
            ends = self.t + np.cumsum(times)
            k = min(k, int(np.searchsorted(ends, self.arrival[self.queue[0]])) + 1)
            times = times[:k]
        self.t_prev = self.t + float(times[:-1].sum())
        self.t += float(times.sum())
        return k

    def _admits_next(self) -> bool:
        """Whether the head of the queue could join once it has arrived."""
        return bool(self.queue) and len(self.run) < self.p.max_batch and not self.e.static

    def _idle(self):
        """Nothing runs: wait for the next arrival."""
        if not self.queue:
            raise MlsysimError("serving simulation stalled with requests left")
        self.t = self.t_prev = max(self.t, float(self.arrival[self.queue[0]]))   # nothing to overlap with

    def _retire(self):
        """Requests whose last token came out end now (their e2e); they leave the batch now, or, with
        the overlap scheduler, after the one extra step already scheduled for them."""
        for i in self.lingering:
            self._leave(i)
        self.lingering = []
        ends, ended = self.ends, []
        while ends and ends[0][0] <= self.d:
            end, i = heappop(ends)
            if i in self.active and self.end_at[i] == end:
                self.active.remove(i)
                self.finish[i] = self.t
                ended.append(i)
        if self.e.overlap:
            self.lingering = ended
        else:
            for i in ended:
                self._leave(i)
        if self.closed:
            for _ in range(len(ended)):
                if self.issued < len(self.isl):
                    self.arrival[self.issued] = self.t
                    self.queue.append(self.issued)
                    self.issued += 1

    def _record(self, batch: int):
        self.trace[0].append(self.t)
        self.trace[1].append(batch)
        self.trace[2].append(self.used / self.p.pages)

    def finished(self) -> bool:
        return not self.queue and not self.run and self.issued >= len(self.isl)


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
    if not eng.chunked_prefill and int(isl.max()) > plan.max_tokens:
        raise InfeasibleError(f"a prompt of {int(isl.max()):,} tokens does not fit the engine's {plan.max_tokens:,} "
                              f"tokens per iteration without chunked prefill: raise max_tokens or set "
                              f"chunked_prefill=True")
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
    first, finish, arrival = np.asarray(sim.first), np.asarray(sim.finish), np.asarray(sim.arrival)
    isl, osl = np.asarray(sim.isl, dtype=np.int64), np.asarray(sim.osl, dtype=np.int64)
    ttft = first - arrival
    e2e = finish - arrival
    many = osl > 1
    itl = (finish[many] - first[many]) / (osl[many] - 1)
    start = float(arrival.min())
    duration = float(finish.max()) - start
    return ServingRun(
        workload=m.name, hardware=hw.name, tp=int(tp), precision=precision, engine=eng.name, load=load,
        requests=len(isl), prompt_tokens=float(isl.mean()), output_tokens=float(osl.mean()),
        max_batch=plan.max_batch, max_tokens=plan.max_tokens,
        kv_capacity_tokens=plan.pages * eng.page_tokens, duration_s=duration,
        ttft_s=_stats(ttft), itl_s=_stats(itl), e2e_s=_stats(e2e),
        output_tokens_per_s=float(osl.sum()) / duration,
        total_tokens_per_s=float((isl + osl).sum()) / duration,
        requests_per_s=len(isl) / duration, preemptions=sim.preemptions, iterations=sim.iterations,
        timeline=_timeline(sim.trace))
