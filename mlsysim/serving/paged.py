"""Paged KV cache (Kwon et al. 2023, vLLM) against a contiguous, max-length reservation.

Memory in blocks of ``block_tokens`` tokens; a request of length ℓ holds ⌈ℓ/B⌉ blocks,
wasting ⌈ℓ/B⌉·B − ℓ slots in its last block, against a contiguous allocator that
reserves ``max_tokens`` per request.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InfeasibleError, MlsysimError, check_fraction, check_integer, check_positive
from ..registry import hardware as _hardware
from ..tables import Record
from ..units import bytes_per, fmt
from .step import DEFAULT_MEMORY_FRACTION, _num, _shape_row, _tp_layout, _transformer


@dataclass(frozen=True)
class PagedKV(Record):
    """Result of :func:`paged_kv`: KV memory and concurrent requests, paged vs contiguous."""

    workload: str
    hardware: str
    block_tokens: object
    max_tokens: float
    kv_budget_B: float
    kv_bytes_per_token: float
    mean_tokens: float            # E[ℓ]
    mean_blocks: object           # E[⌈ℓ/B⌉]
    waste_tokens: object          # E[⌈ℓ/B⌉·B − ℓ]
    requests_paged: object
    requests_contiguous: float

    @property
    def fragmentation(self):
        """Share of the allocated KV slots that hold no token (internal fragmentation)."""
        return self.waste_tokens / (self.mean_blocks * self.block_tokens)

    @property
    def contiguous_waste_fraction(self):
        """Share of a max-length reservation that holds no token, on average."""
        return 1.0 - self.mean_tokens / self.max_tokens

    @property
    def gain(self):
        """Concurrent requests, paged over contiguous."""
        return self.requests_paged / self.requests_contiguous

    def rows(self):
        return _shape_row(self.requests_paged) or [
            ("workload", self.workload), ("hardware", self.hardware),
            ("KV budget", fmt(self.kv_budget_B, "B")),
            ("KV per token", fmt(self.kv_bytes_per_token, "B")),
            ("mean request", f"{self.mean_tokens:,.4g} tokens"),
            ("block", f"{self.block_tokens:g} tokens"),
            ("waste per request", f"{self.waste_tokens:.3g} tokens ({self.fragmentation:.1%})"),
            ("concurrent requests, paged", f"{self.requests_paged:,.0f}"),
            ("concurrent requests, contiguous", f"{self.requests_contiguous:,.0f} "
                                                 f"(reserving {self.max_tokens:,.0f} tokens each)"),
            ("gain", f"{self.gain:.3g}x")]



def paged_kv(model, hardware, lengths, probabilities=None, block_tokens=16, max_tokens=None,
             precision: str = "bf16", tp=1, weight_precision: str | None = None,
             kv_precision: str | None = None, memory_fraction=DEFAULT_MEMORY_FRACTION) -> PagedKV:
    """Concurrent requests whose KV cache fits, paged (blocks) against contiguous (max-length).

    A request that ends with ℓ tokens (prompt + output) holds ⌈ℓ/B⌉ blocks of B =
    ``block_tokens`` tokens; the unused slots of its last block, ⌈ℓ/B⌉·B − ℓ, are its
    internal fragmentation (Kwon et al. 2023, vLLM §4.2). A contiguous allocator must
    reserve ``max_tokens`` slots per request because the output length is unknown
    (vLLM §3, Orca, FasterTransformer). With lengths drawn from a mix (``lengths``
    with ``probabilities``, uniform by default) and a KV budget
    K = memory_fraction·capacity − weights/tp per GPU:

        requests_paged      = K / (E[⌈ℓ/B⌉] · B · KV per token)
        requests_contiguous = ⌊K / (max_tokens · KV per token)⌋

    The paged count is an expectation (a steady state over many requests), so it is
    not rounded. ``block_tokens`` may be an array (it broadcasts); ``max_tokens``
    defaults to the model's context window. Paged capacity is at least the contiguous
    one whenever B divides ``max_tokens``.

    >>> p = paged_kv("llama-3-8b", "h100", lengths=range(1, 4097), block_tokens=16, max_tokens=4096)
    >>> round(p.waste_tokens, 1), int(p.requests_contiguous), round(p.gain, 2)
    (7.5, 104, 2.0)
    """
    m, hw = _transformer(model), _hardware(hardware)
    lengths = np.asarray(list(lengths) if not isinstance(lengths, (np.ndarray, int, float)) else lengths,
                         dtype=float).ravel()
    check_positive("lengths", lengths)
    if probabilities is None:
        probs = np.full(lengths.size, 1.0 / lengths.size)
    else:
        probs = np.asarray(probabilities, dtype=float).ravel()
        if probs.shape != lengths.shape:
            raise MlsysimError(f"probabilities has {probs.size} entries but lengths has {lengths.size}")
        check_positive("probabilities", probs, allow_zero=True)
        if probs.sum() <= 0:
            raise MlsysimError("probabilities must not all be 0")
        probs = probs / probs.sum()
    check_integer("block_tokens", block_tokens)
    check_fraction("memory_fraction", memory_fraction)
    longest = float(lengths.max())
    max_tokens = float(m.max_context if max_tokens is None else max_tokens)
    check_positive("max_tokens", max_tokens)
    if longest > max_tokens:
        raise InfeasibleError(f"a request of {longest:,.0f} tokens exceeds max_tokens = {max_tokens:,.0f}")
    if longest > m.max_context:
        raise InfeasibleError(f"a request of {longest:,.0f} tokens exceeds {m.name}'s context window "
                              f"of {m.max_context:,} tokens")
    tp, share, ok = _tp_layout(m, tp)
    if ok is not None or np.ndim(tp):
        raise MlsysimError("paged_kv takes one tp (a whole number that splits the heads)")
    kv_tok = m.kv_bytes_per_token(kv_precision or precision) * share
    budget = memory_fraction * hw.memory_B - m.params * bytes_per(weight_precision or precision) / tp
    if budget <= 0:
        raise InfeasibleError(f"{m.name} weights with tp={tp} leave no KV memory on {hw.name} "
                              f"(memory_fraction={memory_fraction:g})")
    b = _num(block_tokens)
    bb = np.expand_dims(b, -1)
    blocks = np.ceil(lengths / bb)                                     # (..., mix)
    mean_blocks = np.sum(blocks * probs, axis=-1)
    waste = np.sum((blocks * bb - lengths) * probs, axis=-1)           # empty slots of the last block
    paged = budget / (mean_blocks * b * kv_tok)
    if np.ndim(paged) == 0:
        mean_blocks, waste, paged = float(mean_blocks), float(waste), float(paged)
    return PagedKV(workload=m.name, hardware=hw.name, block_tokens=b, max_tokens=max_tokens, kv_budget_B=budget,
                   kv_bytes_per_token=kv_tok, mean_tokens=float(np.dot(lengths, probs)), mean_blocks=mean_blocks,
                   waste_tokens=waste, requests_paged=paged,
                   requests_contiguous=float(math.floor(budget / (max_tokens * kv_tok))))


def length_mix(mean_tokens, max_tokens):
    """A request-length mix for :func:`paged_kv`: P(ℓ) ∝ exp(−(ℓ − 1)/mean), ℓ = 1 … max_tokens.

    Returns ``(lengths, probabilities)``. Chat traffic has many short and few long
    requests (vLLM §6.1 shows such skewed length histograms for ShareGPT and Alpaca);
    the truncated exponential is the simplest mix with that shape. Its actual mean is
    a little below ``mean_tokens`` when the truncation bites.

    >>> lengths, p = length_mix(500, 2048)
    >>> len(lengths), round(float(p.sum()), 6), round(float(lengths @ p))
    (2048, 1.0, 466)
    """
    check_positive("mean_tokens", mean_tokens)
    check_integer("max_tokens", max_tokens)
    lengths = np.arange(1.0, float(max_tokens) + 1.0)
    weights = np.exp(-(lengths - 1.0) / float(mean_tokens))
    return lengths, weights / weights.sum()
