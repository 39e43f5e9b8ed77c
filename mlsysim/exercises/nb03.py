"""Exercises of notebook 03 (the KV cache, and serving under load)."""
import dataclasses
from functools import lru_cache

from ..registry import model
from ..serving import kv_cache_bytes, length_mix, max_batch, paged_kv, serve
from . import Exercise


def _gqa_factor() -> float:
    gqa = model("llama-3-8b")
    mha = dataclasses.replace(gqa, name="llama-3-8b-mha", kv_heads=gqa.heads)
    return kv_cache_bytes(mha, 1) / kv_cache_bytes(gqa, 1)


def _paged(block: int):
    lengths, probs = length_mix(1000, 8192)
    return paged_kv("llama-3-8b", "h100", lengths, probs, block_tokens=block, max_tokens=8192)


# Serving under load: Llama-3.1-8B in fp8 on one H100 SXM behind the trtllm engine (seed 0)
_LOAD = dict(precision="fp8", prompt=1000, output=1000)
KNEE_RATES = tuple(range(4, 41, 4))          # requests/s tried in 03.9
BUDGETS = (256, 512, 1024, 2048)             # iteration token budgets tried in 03.10


@lru_cache(maxsize=1)
def _little_w() -> float:
    """Mean end-to-end latency of a closed loop of 64 users (640 requests): L / λ by Little's law is
    within a fraction of a per cent of the simulated mean."""
    return serve("llama-3.1-8b", "h100-sxm", concurrency=64, requests=640, **_LOAD).e2e_s["mean"]


@lru_cache(maxsize=1)
def _most_running() -> int:
    """The most requests of 500 + 2,000 tokens the trtllm engine ran at once when 1,000 were queued together."""
    run = serve("llama-3.1-8b", "h100-sxm", precision="fp8", prompt=500, output=2000, rate=float("inf"),
                requests=1000)
    return int(run.timeline["batch"].max())


@lru_cache(maxsize=1)
def _knee_rate() -> int:
    """Lowest rate of KNEE_RATES at which TTFT p99 passes 1 s, 2,000-token prompts and 200-token answers."""
    for rate in KNEE_RATES:
        run = serve("llama-3.1-8b", "h100-sxm", precision="fp8", prompt=2000, output=200, rate=rate,
                    requests=1000)
        if run.ttft_s["p99"] > 1.0:
            return rate
    raise AssertionError("no knee among KNEE_RATES")


@lru_cache(maxsize=1)
def _best_budget() -> int:
    """The budget of BUDGETS with the lowest ITL p99 among those that keep TTFT p99 under 0.2 s at 14 req/s."""
    runs = {b: serve("llama-3.1-8b", "h100-sxm", rate=14, requests=1000, chunked_prefill=True, max_tokens=b,
                     **_LOAD) for b in BUDGETS}
    ok = [b for b, r in runs.items() if r.ttft_s["p99"] < 0.2]
    return min(ok, key=lambda b: runs[b].itl_s["p99"])


EXERCISES = [
    Exercise("03.1", "KV-cache bytes per token of Llama-3-70B in bf16", lambda: kv_cache_bytes("llama-3-70b", 1),
             rtol=0.01, unit="B", hint="2 x layers x KV heads x head dimension x 2 bytes."),
    Exercise("03.2", "Factor by which grouped-query attention shrinks Llama-3-8B's KV cache compared with a "
             "multi-head variant (kv_heads = heads)", _gqa_factor, rtol=0.01,
             hint="Only the number of KV heads changes."),
    Exercise("03.3", "Largest number of Llama-3-8B sequences of 32,768 tokens each that fit on one H100 (bf16)",
             lambda: max_batch("llama-3-8b", "h100", context_tokens=32767), rtol=0.0,
             hint="ms.max_batch with 32,767 cached tokens (the step adds the 32,768th)."),
    Exercise("03.4", "DeepSeek-V3's KV bytes per token as a fraction of Llama-3-70B's (bf16)",
             lambda: kv_cache_bytes("deepseek-v3", 1) / kv_cache_bytes("llama-3-70b", 1), rtol=0.01,
             hint="MLA caches one 512-dimensional latent plus 64 rotary dimensions per layer."),
    Exercise("03.5", "Paged over contiguous concurrent requests for Llama-3-8B on an H100: 16-token blocks, "
             "ms.length_mix(1000, 8192), contiguous reservation 8,192 tokens",
             lambda: _paged(16).gain, rtol=0.02, hint="ms.paged_kv(...).gain"),
    Exercise("03.6", "Expected wasted KV slots per request with 256-token blocks for the same mix",
             lambda: _paged(256).waste_tokens, rtol=0.02,
             hint="The unused slots of each request's last block, averaged over the mix."),
    Exercise("03.7", "Mean end-to-end latency (s) that Little's law gives for a closed loop of 64 users of "
             "Llama-3.1-8B (fp8, one H100 SXM, 1,000 tokens in and 1,000 out, 640 requests): W = L / λ",
             _little_w, rtol=0.02, unit="s",
             hint="L is the concurrency; λ is the run's requests_per_s."),
    Exercise("03.8", "Most requests of 500 + 2,000 tokens that the trtllm engine runs at once for Llama-3.1-8B "
             "in fp8 on one H100 SXM", _most_running, rtol=0.0,
             hint="min(max_batch, KV pages // pages per request), with 32-token pages and the whole request "
                  "reserved: read kv_capacity_tokens and max_batch from a serve() run."),
    Exercise("03.9", "Lowest Poisson rate among 4, 8, ..., 40 requests/s at which TTFT p99 passes 1 s for "
             "Llama-3.1-8B (fp8, one H100 SXM), 2,000-token prompts, 200-token answers, 1,000 requests",
             _knee_rate, rtol=0.0, hint="Sweep rate= and read ttft_s['p99'] of each run."),
    Exercise("03.10", "Token budget (256, 512, 1,024 or 2,048, chunked prefill on) with the lowest ITL p99 among "
             "those that keep TTFT p99 under 0.2 s, at 14 requests/s of 1,000 in / 1,000 out (1,000 requests)",
             _best_budget, rtol=0.0,
             hint="serve(..., chunked_prefill=True, max_tokens=budget); compare ttft_s['p99'] and itl_s['p99']."),
]
