"""Serving: single calls, a (batch x context x device) decode sweep of one million points, and
simulations of 10,000 requests under load (Llama-3.1-8B in fp8 on one H100, 1,000 tokens in and
1,000 out: all queued at once, as trtllm-bench runs, about 13.7 requests/s; and Poisson arrivals at
12 requests/s, 88 % of that)."""
import numpy as np

import mlsysim as ms
from run import Bench

_m, _h = ms.model("llama-3-8b"), ms.hardware("h100")
_devices = ["a100-80gb", "h100", "h200", "b200"]
_batch = np.arange(1, 251, dtype=float)[:, None]          # 250 batches
_context = np.linspace(0, 32768, 1000)[None, :]            # x 1,000 contexts x 4 devices = 1e6 points
_pbatch = np.arange(1, 65, dtype=float)[:, None]           # 64 batches
_prompts = np.arange(8, 8193, 8, dtype=float)[None, :]     # x 1,024 prompts x 4 devices = 262,144 points
_load = dict(precision="fp8", prompt=1000, output=1000, requests=10_000)

BENCHMARKS = [
    Bench("decode(), one step", lambda: ms.decode(_m, _h, batch=8, context_tokens=1024), "<= 50 µs"),
    Bench("decode(), by names, tp=8", lambda: ms.decode("llama-3-70b", "h100", tp=8), "<= 50 µs"),
    Bench("prefill(), 2,048 tokens (GEMMs by shape, memoised)", lambda: ms.prefill(_m, _h, prompt_tokens=2048),
          "<= 50 µs"),
    Bench("prefill(), 2,048 tokens, efficiency=0.70", lambda: ms.prefill(_m, _h, prompt_tokens=2048, efficiency=0.70),
          "<= 50 µs"),
    Bench("kv_cache_bytes()", lambda: ms.kv_cache_bytes(_m, 8192), "<= 50 µs"),
    Bench("max_batch()", lambda: ms.max_batch(_m, _h, context_tokens=8192), "<= 50 µs"),
    Bench("min_tp(), Llama-3-70B", lambda: ms.min_tp("llama-3-70b", "h100"), "<= 50 µs"),
    Bench("paged_kv(), 3-length mix", lambda: ms.paged_kv(_m, _h, lengths=[100, 2000, 4000], max_tokens=4096),
          "<= 50 µs"),
    Bench("generate(), 2,048 in / 256 out", lambda: ms.generate(_m, _h), "<= 50 µs"),
    Bench("speculative_decode(), 70B / 7B", lambda: ms.speculative_decode(
        "llama-2-70b", "h100", draft="llama-2-7b", tp=4), "<= 50 µs"),
    Bench("serving_plan(), 70B on 5 devices x 4 tp (a search)", lambda: ms.serving_plan(
        "llama-3-70b", ["a100-80gb", "h100", "h200", "b200", "mi300x"]), "<= 50 ms", calls=1),
    Bench("prefill() sweep by GEMM shape, 64 batches x 1,024 prompts x 4 devices",
          lambda: ms.prefill(_m, _devices, batch=_pbatch, prompt_tokens=_prompts),
          ">= 1e6 points/s", points=_pbatch.size * _prompts.size * len(_devices), calls=1),
    Bench("decode() sweep, 250 batches x 1,000 contexts x 4 devices",
          lambda: ms.decode(_m, _devices, batch=_batch, context_tokens=_context),
          ">= 1e6 points/s", points=_batch.size * _context.size * len(_devices), calls=1),
    Bench("serve(), 10,000 requests all queued (trtllm-bench), 1,000 in / 1,000 out",
          lambda: ms.serving.serve("llama-3.1-8b", "h100", rate=float("inf"), **_load), "<= 0.25 s", calls=1,
          repeats=3),
    Bench("serve(), 10,000 requests, Poisson 12 req/s (near saturation), 1,000 in / 1,000 out",
          lambda: ms.serving.serve("llama-3.1-8b", "h100", rate=12.0, **_load), "<= 0.25 s", calls=1, repeats=3),
    Bench("serve(), 10,000 requests, Poisson 12 req/s, vLLM (pages grow, chunked prefill)",
          lambda: ms.serving.serve("llama-3.1-8b", "h100", rate=12.0, engine="vllm", **_load), "<= 0.25 s",
          calls=1, repeats=3),
]
