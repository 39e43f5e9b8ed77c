"""The scheduler settings of real serving engines, each with its source and date.

An iteration-level scheduler is set by a few numbers: the most sequences in one iteration
(``max_batch``), the most tokens in one iteration (``max_tokens``), whether a prompt may be
split over iterations (chunked prefill), how much of the free memory becomes KV cache, the
cache's page size, and whether a request's whole cache is reserved when it is admitted (it
then never has to be evicted) or page by page as it grows (more requests fit, and the
scheduler preempts the newest when the pages run out).

* ``trtllm`` — ``trtllm-bench throughput`` with the PyTorch backend (TensorRT-LLM 1.x,
  ``tensorrt_llm/bench/build/tuning.py`` and ``bench/benchmark/utils/general.py``, 2025):
  max_batch and max_tokens from the benchmark's own rule (:func:`trtllm_bench_limits`),
  no chunked prefill (so max_tokens is raised to the longest prompt + max_batch), KV cache
  0.95 of the free memory (the performance page's ``kv_cache_free_gpu_mem_fraction``),
  32-token pages, the capacity scheduler's default ``GUARANTEED_NO_EVICT`` (a request is
  admitted only if its prompt and all its output fit), CUDA graphs for decode-only
  iterations padded to the captured batch sizes 1, 2, 4, …, 8,192, and the overlap scheduler
  (on by default: the host schedules iteration n + 1 and launches it before it has processed
  iteration n's tokens — TensorRT-LLM docs, "Overlap Scheduler", 2025). Its price, which the
  simulation charges: a request that arrives, or a slot that frees, during iteration n can
  only be used from iteration n + 2, and a finished request runs one extra decoding step.
* ``vllm`` — vLLM's V1 engine as an OpenAI server on a GPU of at least 70 GiB other than an
  A100 (``vllm/engine/arg_utils.py`` ``get_batch_defaults``, 2025): 8,192 tokens and 1,024
  sequences per iteration (2,048 and 256 on smaller GPUs and A100s), chunked prefill always on,
  ``gpu_memory_utilization`` 0.90, 16-token pages allocated as sequences grow, preemption by
  recomputation, CUDA graphs captured up to 512 sequences.
* ``static`` — static batching, as gpt-fast, NeMo's and early TensorRT-LLM's batch benchmarks
  run: a batch is admitted whole and the next starts when its last request ends.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..errors import MlsysimError, UnknownNameError

GRAPH_SIZES_TRTLLM = (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192)
GRAPH_SIZES_VLLM = (1, 2, 4) + tuple(range(8, 513, 8))


@dataclass(frozen=True)
class Engine:
    """Scheduler settings of one serving engine (see the module docstring). ``None`` limits are
    chosen per workload, by :func:`trtllm_bench_limits`, when a simulation starts."""

    name: str
    max_batch: int | None
    max_tokens: int | None
    chunked_prefill: bool
    kv_fraction: float          # of the memory left after weights and the iteration's activations
    page_tokens: int
    reserve_whole: bool         # True: prompt + all output reserved at admission (no preemption)
    graph_sizes: tuple          # decode-only batch sizes replayed from CUDA graphs (padded up)
    static: bool = False
    overlap: bool = False       # the host prepares iteration n + 1 while the GPU runs n
    source: str = ""


ENGINES = {
    "trtllm": Engine("trtllm", None, None, False, 0.95, 32, True, GRAPH_SIZES_TRTLLM, overlap=True,
                     source="TensorRT-LLM trtllm-bench (PyTorch backend) and docs/source/performance/"
                            "perf-overview.md, 2025"),
    "vllm": Engine("vllm", 1024, 8192, True, 0.90, 16, False, GRAPH_SIZES_VLLM,
                   source="vLLM V1 engine defaults, vllm/engine/arg_utils.py, 2025"),
    "static": Engine("static", None, None, False, 0.90, 16, True, (), static=True,
                     source="static batching: every request of a batch admitted together"),
}


def trtllm_bench_limits(kv_bytes_per_token: float, kv_capacity_B: float, prompt: float, output: float,
                        longest_prompt: int) -> tuple[int, int]:
    """(max_batch, max_tokens) as ``trtllm-bench`` chooses them when none are given.

    The requests that fit the KV cache at the mean prompt + output, R = capacity / (bytes per
    token · (ISL + OSL)), capped at 4,096, rounded up to a multiple of 32 below 256 (at least 64),
    of 128 below 1,024 and of 256 above; tokens min(R·(1 + ISL/OSL), 32,768) rounded up to 256
    below 4,096 (at least 2,048), to 512 below 8,192 and to 1,024 above; without chunked
    prefill at least the longest prompt + max_batch (TensorRT-LLM ``bench/build/tuning.py``,
    ``finetune_setting``, and ``bench/benchmark/utils/general.py``, 2025).

    >>> trtllm_bench_limits(65536, 70e9, 128, 128, 128)
    (4096, 8192)
    """
    requests = kv_capacity_B / (kv_bytes_per_token * (prompt + output))
    raw_batch = min(requests, 4096.0)
    raw_tokens = min(raw_batch * (1.0 + prompt / output), 32768.0)
    batch = _round_up(raw_batch, 64, ((256, 32), (1024, 128), (math.inf, 256)))
    tokens = _round_up(raw_tokens, 2048, ((4096, 256), (8192, 512), (math.inf, 1024)))
    return batch, max(tokens, longest_prompt + batch)


def _round_up(x: float, least: int, bands) -> int:
    """``x`` rounded up to the step of the first (below, step) band it lies below; at least ``least``
    in the first band."""
    for i, (below, step) in enumerate(bands):
        if x < below:
            return int(max(least, step * math.ceil(x / step)) if i == 0 else step * math.ceil(x / step))
    raise ValueError(f"{x!r} lies above every band")


def engine(name_or_engine, **changes) -> Engine:
    """An :class:`Engine` by name (``trtllm``, ``vllm``, ``static``) or as given, with ``changes``
    (``max_batch=…``, ``chunked_prefill=…``) applied."""
    if isinstance(name_or_engine, Engine):
        e = name_or_engine
    else:
        key = str(name_or_engine).lower()
        if key not in ENGINES:
            raise UnknownNameError("serving engine", name_or_engine, ENGINES)
        e = ENGINES[key]
    e = replace(e, **changes) if changes else e
    for field in ("max_batch", "max_tokens"):
        v = getattr(e, field)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise MlsysimError(f"{field} must be a whole number >= 1, got {v!r}")
    if not 0 < e.kv_fraction <= 1:
        raise MlsysimError(f"kv_fraction must lie in (0, 1], got {e.kv_fraction!r}")
    return e
