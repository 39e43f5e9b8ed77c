"""Exercises of notebook 08 (the nine-million-dollar question): reasoning depth and routing."""
import numpy as np

from ..reasoning import reasoning_service, routing
from . import Exercise

SERVICE = dict(model="llama-3-70b", hardware="h100", qps=10, price="lambda-h100", tokens_per_step=512,
               prompt_tokens=1024, answer_tokens=256)
STEPS = np.arange(0, 41, dtype=float)


def _cost(steps, **kw):
    return reasoning_service(**{**SERVICE, **kw}, steps=steps).usd_per_year


def _first_step_over(usd: float) -> float:
    cost = _cost(STEPS)
    return float(STEPS[np.argmax(cost >= usd)])


def _deepest_within(slo_s: float) -> float:
    ok = reasoning_service(**SERVICE, steps=STEPS, latency_slo_s=slo_s).feasible
    return float(STEPS[ok].max())


def _routing_saving() -> float:
    kw = {k: v for k, v in SERVICE.items() if k not in ("model", "hardware", "qps", "price")}
    r = routing("llama-3-8b", "llama-3-70b", "h100", qps=10, fraction_small=np.array([0.0, 0.7]),
                price="lambda-h100", steps_large=8, **kw)
    return float(r.usd_per_year[0] - r.usd_per_year[1])


EXERCISES = [
    Exercise("08.1", "Yearly cost of the service with 8 reasoning steps divided by its cost with none",
             lambda: float(_cost(8.0) / _cost(0.0)), rtol=0.02,
             hint="Two reasoning_service calls, or one with steps=np.array([0, 8])."),
    Exercise("08.2", "Fewest reasoning steps (of 512 tokens) at which the service costs $9 M a year or more",
             lambda: _first_step_over(9e6), rtol=0.0,
             hint="Sweep steps with an array and find the first cost >= 9e6."),
    Exercise("08.3", "Most reasoning steps the service can afford within a 60 s end-to-end latency target",
             lambda: _deepest_within(60.0), rtol=0.0,
             hint="latency_slo_s=60; infeasible depths come back with feasible False."),
    Exercise("08.4", "Yearly saving (USD) of routing 70 % of requests to Llama-3-8B without reasoning, the rest "
                     "to Llama-3-70B with 8 steps, against sending all to Llama-3-70B with 8 steps",
             _routing_saving, rtol=0.02, unit="USD",
             hint="ms.routing(..., fraction_small=0.7) against fraction_small=0."),
]
