"""Exercises of notebook 03 (the KV cache)."""
import dataclasses

from ..registry import model
from ..serving import kv_cache_bytes, length_mix, max_batch, paged_kv
from . import Exercise


def _gqa_factor() -> float:
    gqa = model("llama-3-8b")
    mha = dataclasses.replace(gqa, name="llama-3-8b-mha", kv_heads=gqa.heads)
    return kv_cache_bytes(mha, 1) / kv_cache_bytes(gqa, 1)


def _paged(block: int):
    lengths, probs = length_mix(1000, 8192)
    return paged_kv("llama-3-8b", "h100", lengths, probs, block_tokens=block, max_tokens=8192)


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
]
