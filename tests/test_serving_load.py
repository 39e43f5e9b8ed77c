"""Serving under load (mlsysim.serving.serve): worked numbers, determinism, queueing laws, the
schedulers' policies and bad input.

The docstrings' ``>>>`` examples (iteration_model's 11.7 ms, serve's 27,900 tokens/s,
trtllm_bench_limits' (4096, 8192)) run as doctests (pytest's ``--doctest-modules``); this file
checks the worked numbers that are written in prose, the rules behind them and the behaviour
under load. Runs are small (a few hundred requests) so that the file takes a few seconds.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

from mlsysim.errors import InfeasibleError, MlsysimError, UnknownNameError
from mlsysim.serving import engines, iteration, serve, simulate
from mlsysim.serving import iteration_model, trtllm_bench_limits

M, H = "llama-3.1-8b", "h100-sxm"


def _serve(**kw):
    return serve(kw.pop("model", M), H, **{"precision": "fp8", **kw})


# --- the worked numbers in prose ---------------------------------------------------------------

def test_iteration_docstring_breakdown():
    """iteration.py: 256 sequences decoding at 1,024 tokens of context each, fp8 on one H100."""
    found = re.search(r"linear ([\d.]+) ms, decode attention ([\d.]+) ms, ([\d.]+) ms in all",
                      " ".join(iteration.__doc__.split()))
    assert found, "the worked number's sentence moved"
    linear, attention, total = (float(x) for x in found.groups())
    it = iteration_model(M, H, precision="fp8")
    parts = it.breakdown(256, 256, 256 * 1024, 0, 256)
    assert round(parts["linear"] * 1e3, 1) == linear
    assert round(parts["decode attention"] * 1e3, 1) == attention
    assert sum(parts.values()) == pytest.approx(float(it.time(256, 256, 256 * 1024, 0, 256, graph=True)))
    assert round(sum(parts.values()) * 1e3, 1) == total


@pytest.mark.parametrize("kv_token, capacity, isl, osl, longest, expected", [
    # 70e9 / (65,536 · 2,000) = 534 requests: a multiple of 128 -> 640; 534 · 2 tokens -> at least 2,048
    (65536, 70e9, 1000, 1000, 1000, (640, 2048)),
    # 10e9 / (131,072 · 2,000) = 38 requests: at least 64; 76 tokens -> at least 2,048
    (131072, 10e9, 1000, 1000, 1000, (64, 2048)),
    # 50e9 / (65,536 · 256) = 2,980 requests: a multiple of 256 -> 3,072; 5,960 tokens -> 512s -> 6,144
    (65536, 50e9, 128, 128, 128, (3072, 6144)),
    # 70e9 / (65,536 · 22,000) = 49 -> 64; no chunked prefill: the longest prompt + max_batch = 20,064
    (65536, 70e9, 20000, 2000, 20000, (64, 20064)),
    # capped at 4,096 requests and 32,768 tokens (then rounded to 1,024s)
    (1024, 1e12, 1000, 100, 1000, (4096, 32768)),
])
def test_trtllm_bench_limits_each_rounding_band(kv_token, capacity, isl, osl, longest, expected):
    assert trtllm_bench_limits(kv_token, capacity, isl, osl, longest) == expected


def test_the_trtllm_engine_takes_the_bench_limits():
    r = _serve(prompt=1000, output=1000, rate=math.inf, requests=20)
    assert (r.max_batch, r.max_tokens) == (640, 2048)
    assert engines.ENGINES["vllm"].max_batch == _serve(prompt=128, output=128, rate=1, requests=5,
                                                       engine="vllm").max_batch == 1024


# --- determinism, definitions ------------------------------------------------------------------

def test_a_seed_gives_the_same_run_and_another_seed_another():
    kw = dict(prompt=512, output=128, prompt_std=100, output_std=40, rate=30, requests=150)
    a, b, c = _serve(seed=7, **kw).to_json(), _serve(seed=7, **kw).to_json(), _serve(seed=8, **kw).to_json()
    assert a == b
    assert a["ttft_s"] != c["ttft_s"] and a["prompt_tokens"] != c["prompt_tokens"]


def test_itl_is_the_time_after_the_first_token_over_the_tokens_after_it():
    r = _serve(prompt=1000, output=200, concurrency=1, requests=1)
    assert r.e2e_s["mean"] == pytest.approx(r.ttft_s["mean"] + 199 * r.itl_s["mean"], rel=1e-12)
    assert r.output_tokens_per_s == pytest.approx(200 / r.e2e_s["mean"])


def test_output_of_one_token_has_no_itl():
    r = _serve(prompt=100, output=1, concurrency=2, requests=4)
    assert math.isnan(r.itl_s["p50"]) and r.ttft_s["mean"] == pytest.approx(r.e2e_s["mean"])


def test_the_timeline_stays_within_the_limits():
    r = _serve(model="llama-3.3-70b", prompt=500, output=1500, output_std=600, rate=math.inf, requests=60,
               engine="vllm")
    t, batch, kv = (np.asarray(r.timeline[k]) for k in ("t_s", "batch", "kv_used"))
    assert len(t) <= 400 and np.all(np.diff(t) >= 0)
    assert batch.max() <= r.max_batch and 0 <= kv.min() and kv.max() <= 1
    assert kv.max() > 0.9           # the cache fills: that is what preempts


# --- queueing --------------------------------------------------------------------------------

def test_littles_law_from_the_timeline():
    """Little's law on a finite run, L = X · W.

    L: the time-average number of requests the engine runs, from the timeline: ``batch[k]`` requests
    run through the iteration (or decode-only stretch) that ends at ``t_s[k]``, which starts where the
    previous one ended; the first starts at the first arrival (last end − duration). Every point is
    kept (the run has fewer than 400 steps) and, at this load, the engine never idles (about 20
    requests in flight). X: completed requests per second over the same window (requests_per_s),
    W: mean end-to-end time. Over a window from the first arrival to the last finish, the
    time-average number of requests *in the system* is exactly X·W; the batch leaves out only the
    time requests wait in the queue for the running iteration to end (a few ms of a ~1 s stay).
    Without the overlap scheduler, whose finished requests stay in the batch one step after their
    last token (they are out of the system but still in the batch).
    """
    r = _serve(prompt=512, output=256, rate=20, requests=120, seed=1, overlap=False)
    t, batch = np.asarray(r.timeline["t_s"]), np.asarray(r.timeline["batch"])
    assert len(t) < 400, "the timeline was thinned: its points no longer tile the run"
    start = t[-1] - r.duration_s
    held = np.diff(np.concatenate([[start], t]))
    L = float((batch * held).sum()) / r.duration_s
    assert L == pytest.approx(r.requests_per_s * r.e2e_s["mean"], rel=0.01)
    assert L > 10                   # many in flight: a real test of the accounting, not of one request


def test_ttft_grows_with_the_arrival_rate():
    p50 = [_serve(prompt=128, output=128, rate=rate, requests=400).ttft_s["p50"]
           for rate in (20, 60, 120, 180, 240, 300)]
    assert all(a <= b for a, b in zip(p50, p50[1:])), p50
    assert p50[-1] > 2 * p50[0]


def test_throughput_grows_with_concurrency_up_to_saturation():
    """Closed loop, 4 · C requests each: tokens/s never falls as C rises to 1,024 (below max_batch 4,096)
    and flattens: the last doubling gains less than the first."""
    tps = [_serve(prompt=128, output=128, concurrency=c, requests=4 * c).output_tokens_per_s
           for c in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)]
    assert all(a <= b for a, b in zip(tps, tps[1:])), tps
    assert tps[1] / tps[0] > 1.9 and tps[-1] / tps[-2] < 1.1


def test_all_queued_waits_in_line():
    """rate=inf queues every request at 0 (trtllm-bench): the last admitted wait for whole waves to end."""
    queued = _serve(prompt=1000, output=1000, rate=math.inf, requests=1000)
    alone = _serve(prompt=1000, output=1000, concurrency=1, requests=1)
    assert queued.load == "all queued" and queued.max_batch < 1000
    assert queued.ttft_s["p99"] > 10 * alone.e2e_s["p50"] > 1000 * alone.ttft_s["p50"]
    assert queued.requests_per_s == pytest.approx(1000 / queued.duration_s)


# --- the schedulers' policies -------------------------------------------------------------------

def test_vllm_preempts_when_the_cache_is_tight_and_trtllm_never_does():
    """Llama-3.3-70B in fp8 on one H100 leaves about 50,000 tokens of KV cache: 60 requests of 2,000
    tokens cannot all stay. vLLM allocates pages as sequences grow and preempts the newest;
    TensorRT-LLM reserves prompt + output at admission (GUARANTEED_NO_EVICT) and waits instead."""
    kw = dict(model="llama-3.3-70b", prompt=500, output=1500, output_std=600, rate=math.inf, requests=60)
    v, t = _serve(engine="vllm", **kw), _serve(engine="trtllm", **kw)
    assert v.preemptions > 0 and t.preemptions == 0
    assert v.kv_capacity_tokens < 60 * 2000 and t.kv_capacity_tokens < 60 * 2000
    roomy = _serve(engine="vllm", prompt=500, output=1500, rate=math.inf, requests=60)
    assert roomy.preemptions == 0


def test_chunked_prefill_lowers_the_itl_tail_under_load():
    """8,000-token prompts arriving at 6/s: unchunked, each prompt is one long iteration that every
    decoding sequence waits for; in 2,048-token chunks the decoders advance once per chunk."""
    kw = dict(prompt=8000, output=256, rate=6, requests=200)
    whole = _serve(chunked_prefill=False, **kw)
    chunked = _serve(chunked_prefill=True, max_tokens=2048, **kw)
    assert whole.max_tokens >= 8000 and chunked.max_tokens == 2048
    assert chunked.itl_s["p99"] < 0.8 * whole.itl_s["p99"]
    assert chunked.output_tokens_per_s == pytest.approx(whole.output_tokens_per_s, rel=0.02)


def test_static_batches_wait_for_their_longest_request():
    """32 requests of 64 or 512 tokens out, 16 at a time: a static batch starts when the last of the
    previous one ends, so half the requests wait about one long request's time for their first token;
    continuous batching (Orca) refills a slot as soon as a request ends."""
    kw = dict(prompt=128, output=[64, 512] * 16, rate=math.inf, requests=32, max_batch=16)
    static, continuous = _serve(engine="static", **kw), _serve(engine="trtllm", **kw)
    long_alone = _serve(prompt=128, output=512, concurrency=1, requests=1).e2e_s["mean"]
    assert static.ttft_s["p90"] > 0.9 * long_alone > 2 * continuous.ttft_s["p90"]
    assert static.output_tokens_per_s < 0.9 * continuous.output_tokens_per_s


# --- bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("changes, error, named", [
    (dict(concurrency=0), MlsysimError, "concurrency"),
    (dict(concurrency=2.5), MlsysimError, "concurrency"),
    (dict(concurrency=4, requests=0), MlsysimError, "requests"),
    (dict(rate=0), MlsysimError, "rate"),
    (dict(rate=-3.0), MlsysimError, "rate"),
    (dict(rate=float("nan")), MlsysimError, "rate"),
    (dict(rate="5"), MlsysimError, "rate"),
    (dict(concurrency=2, rate=1.0), MlsysimError, "concurrency"),
    (dict(), MlsysimError, "rate"),
    (dict(concurrency=1, prompt=130000, output=2000), InfeasibleError, "context window of 131,072"),
    (dict(concurrency=1, prompt=[100, 2], requests=3), MlsysimError, "one per request"),
    (dict(concurrency=1, output_std=-1), MlsysimError, "output_std"),
    (dict(concurrency=1, max_batch=0), MlsysimError, "max_batch"),
    (dict(concurrency=1, engine="tensorrt"), UnknownNameError, "trtllm"),
    (dict(concurrency=1, model="llama-3.3-70b", precision="bf16"), InfeasibleError, "141 GB"),
    (dict(concurrency=1, model="llama-3.3-70b", prompt=20000, output=40000), InfeasibleError,
     "fewer than one request needs"),
    (dict(rate=3.0, prompt=1500, engine="static", max_tokens=512), InfeasibleError,   # else never admitted
     "1,500 tokens does not fit the engine's 512 tokens per iteration without chunked prefill"),
])
def test_bad_input_names_the_input_and_the_limit(changes, error, named):
    kw = {"prompt": 128, "output": 128, "requests": 4, **changes}
    with pytest.raises(error, match=re.escape(named)):
        _serve(**kw)


def test_weights_that_leave_no_room_for_a_cache_are_infeasible():
    import dataclasses
    import mlsysim as ms
    heavy = dataclasses.replace(ms.model("llama-3.3-70b"), name="heavy-70b", layers=90, vocab=178256)
    with pytest.raises(InfeasibleError, match="leave no room for a KV cache"):
        serve(heavy, H, precision="fp8", prompt=128, output=128, concurrency=1, requests=1)


def test_a_run_that_cannot_end_is_stopped(monkeypatch):
    monkeypatch.setattr(simulate, "MAX_ITERATIONS", 10)
    with pytest.raises(MlsysimError, match="iterations"):
        _serve(prompt=128, output=128, rate=1, requests=50)


def test_the_overlap_scheduler_costs_a_returning_request_one_step():
    """TensorRT-LLM's overlap scheduler plans iteration n + 1 while n runs: at concurrency 1 the request
    sent when the previous one ends waits for the step already planned (the finished request's extra
    decoding step, one ITL) before its prefill; the first request, sent to an idle engine, does not."""
    kw = dict(model="llama-3.3-70b", tp=2, prompt=5000, output=500, concurrency=1, requests=5)
    on, off = _serve(**kw), _serve(overlap=False, **kw)
    extra = on.ttft_s["p50"] - off.ttft_s["p50"]
    assert extra == pytest.approx(on.itl_s["mean"], rel=1e-3)   # the step at the full context: a hair longer
    assert on.itl_s["mean"] == pytest.approx(off.itl_s["mean"], rel=1e-9)


def test_nim_concurrency_5_note_states_what_the_simulation_gives():
    from mlsysim.validation import serving as v
    note = {c.id: c for c in v.CASES}["nim/llama-3.3-70b/c5/ttft"].note
    kw = dict(model="llama-3.3-70b", tp=2, prompt=5000, output=500, concurrency=5, overlap=False)
    means = {k: _serve(requests=5 * k, **kw).ttft_s for k in (10, 5, 2)}
    assert (f"With 10 requests per user the simulated mean is {means[10]['mean']:.2f} s; with 5, "
            f"{means[5]['mean']:.2f} s; with 2, {means[2]['mean']:.2f} s") in note
    first = _serve(requests=5, **kw)
    assert f"0.38 to 1.9 s" in note and round(means[10]["p50"], 2) == 0.38
    assert round(first.ttft_s["mean"] * 2 - means[10]["p50"], 1) == 1.9   # mean of 1..5 prefills = 3, last = 5
