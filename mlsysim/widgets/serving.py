"""Explorer of serving under load (notebook 03): a stream of requests through a continuous-batching
engine, :func:`mlsysim.serving.serve`, with its TTFT, ITL and throughput and the batch and KV-cache
occupancy over time."""
from __future__ import annotations

import math

import ipywidgets as W
import numpy as np

from .. import plots
from ..errors import MlsysimError
from ..units import fmt
from ._common import Explorer, _dropdown, _transformers

LOADS = ("rate", "concurrency", "all queued")
"""How requests arrive: Poisson at a rate, a closed loop of fixed concurrency, or all at time 0."""

ENGINE_CHOICES = {"trtllm": {"engine": "trtllm"},
                  "trtllm, chunked prefill": {"engine": "trtllm", "chunked_prefill": True},
                  "vllm": {"engine": "vllm"},
                  "static": {"engine": "static"}}
"""Engine choices of the explorer, as the arguments they pass to :func:`~mlsysim.serving.serve`."""

MAX_REQUESTS = 300
"""Most requests one update simulates, so that dragging a slider stays responsive."""

_STYLE = {"description_width": "8em"}


def _pow2_slider(description: str, value: float, lo: int, hi: int, step: float = 1.0) -> W.FloatLogSlider:
    return W.FloatLogSlider(value=value, base=2, min=lo, max=hi, step=step, description=description,
                            readout_format=".3g", style=_STYLE)


def _controls(workload, hardware, tp, precision, engine, load, rate, concurrency, prompt, output) -> dict:
    return {
        "workload": _dropdown("models", workload, "model", options=_transformers()),
        "hardware": _dropdown("hardware", hardware, "device"),
        "tp": W.Dropdown(options=[1, 2, 4, 8], value=tp, description="GPUs (tp)", style=_STYLE),
        "precision": W.Dropdown(options=["bf16", "fp8"], value=precision, description="precision", style=_STYLE),
        "engine": W.Dropdown(options=list(ENGINE_CHOICES), value=engine, description="engine", style=_STYLE),
        "load": W.Dropdown(options=list(LOADS), value=load, description="load", style=_STYLE),
        "rate": _pow2_slider("rate (req/s)", rate, -2, 7, 0.25),
        "concurrency": _pow2_slider("concurrency", concurrency, 0, 10),
        "prompt": _pow2_slider("prompt tokens", prompt, 5, 15, 0.5),
        "output": _pow2_slider("output tokens", output, 3, 13, 0.5),
    }


def _check(engine: str, load: str, requests) -> None:
    if engine not in ENGINE_CHOICES:
        raise MlsysimError(f"engine must be one of {', '.join(ENGINE_CHOICES)}, got {engine!r}")
    if load not in LOADS:
        raise MlsysimError(f"load must be one of {', '.join(LOADS)}, got {load!r}")
    if isinstance(requests, bool) or not isinstance(requests, int) or not 1 <= requests <= MAX_REQUESTS:
        raise MlsysimError(f"requests must be a whole number from 1 to {MAX_REQUESTS} (each update simulates "
                           f"them all), got {requests!r}")


def _rows(r) -> list:
    pct = lambda d: f"p50 {fmt(d['p50'], 's')}, p99 {fmt(d['p99'], 's')}"  # noqa: E731
    whole = r.kv_capacity_tokens / (r.prompt_tokens + r.output_tokens)
    return [("load", f"{r.load}, {r.requests:,} requests on {r.engine}"),
            ("TTFT", pct(r.ttft_s)), ("ITL", pct(r.itl_s)), ("end to end", pct(r.e2e_s)),
            ("output tokens/s per GPU", f"{r.output_tokens_per_s / r.tp:,.0f}"),
            ("requests finished per s", f"{r.requests_per_s:.3g}"),
            ("most requests running", f"{max(r.timeline['batch'], default=0):.0f} (max batch {r.max_batch:,})"),
            ("KV cache", f"{r.kv_capacity_tokens:,} tokens, {math.floor(whole):,} whole requests; "
                         f"peak {max(r.timeline['kv_used'], default=0):.0%} used"),
            ("preemptions", f"{r.preemptions:,}")]


def serving_load_explorer(workload: str = "Llama-3-8B", hardware: str = "H100-SXM", tp: int = 1,
                          precision: str = "fp8", engine: str = "trtllm", load: str = "rate", rate: float = 8.0,
                          concurrency: int = 64, prompt: int = 1024, output: int = 1024,
                          requests: int = MAX_REQUESTS, seed: int = 0) -> Explorer:
    """Explore :func:`mlsysim.serving.serve`: model, device, TP degree, precision, engine
    (``ENGINE_CHOICES``), the load (``LOADS``: a Poisson ``rate`` in requests/s, a closed loop
    of ``concurrency`` requests, or every request queued at once) and the prompt and output lengths →
    TTFT, ITL and end-to-end percentiles, throughput, and the running batch and KV-cache use over time.
    Each update simulates ``requests`` (at most ``MAX_REQUESTS``) requests with a fixed ``seed``."""
    from ..serving import serve
    _check(engine, load, requests)
    controls = _controls(workload, hardware, tp, precision, engine, load, rate, concurrency, prompt, output)

    def compute(workload, hardware, tp, precision, engine, load, rate, concurrency, prompt, output):
        arrival = {"rate": {"rate": float(rate)}, "concurrency": {"concurrency": int(round(concurrency))},
                   "all queued": {"rate": math.inf}}[load]
        return serve(workload, hardware, tp=tp, precision=precision, prompt=int(round(prompt)),
                     output=int(round(output)), requests=requests, seed=seed, **arrival,
                     **ENGINE_CHOICES[engine])

    def render(r):
        t = r.timeline["t_s"]
        fig = plots.side_by_side(
            t, {"running requests": r.timeline["batch"], "max batch": np.full(len(t), r.max_batch)},
            {"KV cache used (%)": 100 * r.timeline["kv_used"], "full": np.full(len(t), 100.0)},
            xlabel="time (s)", left_ylabel="requests in the batch", right_ylabel="KV cache used (%)",
            title=f"{r.workload} on {r.tp} x {r.hardware}, {r.load}")
        return _rows(r), fig

    return Explorer(controls, compute, render, title="Serving under load: TTFT, ITL and throughput")
