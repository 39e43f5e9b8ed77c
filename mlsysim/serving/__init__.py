"""LLM inference on one device or one tensor-parallel node: prefill, decode, KV cache.

One model, built on the pass counts of :mod:`mlsysim.roofline` (``transformer_cost``,
the FLOP, memory traffic and footprint behind ``roofline`` and ``pass_cost``), adds what
serving needs. Each concept, with its formula, lives in one module of this package:

* :mod:`mlsysim.serving.step` — the time and memory of one pass on ``tp`` GPUs
  (roofline terms, tensor-parallel all-reduces, fixed per-layer cost) and the defaults
  behind them (:data:`~mlsysim.serving.step.DEFAULT_EFFICIENCY` …).
* :mod:`mlsysim.serving.phases` — :func:`prefill` (TTFT) and :func:`decode` (ITL).
* :mod:`mlsysim.serving.capacity` — KV-cache bytes and what fits: :func:`kv_cache_bytes`,
  :func:`serving_memory`, :func:`min_tp`, :func:`max_batch`, :func:`max_context`.
* :mod:`mlsysim.serving.paged` — paged KV cache against contiguous reservation:
  :func:`paged_kv`, :func:`length_mix`.
* :mod:`mlsysim.serving.generation` — a whole request, prompt to last token: :func:`generate`.
* :mod:`mlsysim.serving.speculative` — speculative decoding: :func:`speculative_decode`,
  :func:`expected_accepted_tokens`.
* :mod:`mlsysim.serving.plan` — which device and tp meet a TTFT and an ITL target:
  :func:`serving_plan`.
* :mod:`mlsysim.serving.iteration` — one continuous-batching iteration (prompt chunks and
  decoding sequences together), component by component: :func:`iteration_model`.
* :mod:`mlsysim.serving.engines` — the scheduler settings of TensorRT-LLM, vLLM and static
  batching: :data:`ENGINES`, :func:`engine`.
* :mod:`mlsysim.serving.simulate` — serving under load (concurrency, request rate or every
  request at once): :func:`serve`, with TTFT / ITL / end-to-end percentiles and tokens/s.

Every name is importable from ``mlsysim.serving`` (and the public ones from ``mlsysim``).

Worked number (tested): Llama-2-7B decode on an A100-80GB at batch 1 (13.2 GB of
weights read per token at 0.83 × 2,039 GB/s, plus 32 × 40 µs): ITL 9.1 ms,
110 tokens/s — gpt-fast measured 104.9 tokens/s.

>>> from mlsysim.serving import decode
>>> round(decode("llama-2-7b", "a100-80gb", context_tokens=0).tokens_per_s)
110
"""
from .step import (ALLREDUCE_BASE_S, ALLREDUCE_STEP_S, DEFAULT_EFFICIENCY, DEFAULT_LAYER_OVERHEAD_S,
                   DEFAULT_MEM_EFFICIENCY, DEFAULT_MEMORY_FRACTION, _valid_tp)  # _valid_tp: mlsysim.reasoning
from .phases import InferenceStep, decode, prefill
from .capacity import ServingMemory, kv_cache_bytes, max_batch, max_context, min_tp, serving_memory
from .paged import PagedKV, length_mix, paged_kv
from .generation import Generation, generate
from .speculative import Speculative, expected_accepted_tokens, speculative_decode
from .plan import ServingPlan, serving_plan
from .iteration import IterationModel, iteration_model
from .engines import ENGINES, Engine, engine, trtllm_bench_limits
from .simulate import ServingRun, serve

