"""Single calls of the sustainability, economics and reasoning solvers, and vectorised sweeps.

A reasoning_service() call times its deployment with serving.generate, prefill and max_batch for
each candidate tensor-parallel degree, so one scalar call costs several serving calls; a sweep
over depths in one call is the efficient way to use it."""
import numpy as np

import mlsysim as ms
from run import Bench

_cluster, _grid = ms.cluster("dgx-h100", nodes=128), ms.grid("quebec")
_regions = ["montreal", "paris", "ashburn", "warsaw"]
_hours = np.linspace(1.0, 10_000.0, 250_000)
_service = dict(model="llama-3-70b", hardware="h100", qps=10, price=2.99, tokens_per_step=512)
_steps = np.arange(0, 41, dtype=float)

BENCHMARKS = [
    Bench("energy_kwh(), one cluster", lambda: ms.energy_kwh(_cluster, hours=1000, utilization=0.8), "<= 50 µs"),
    Bench("carbon_kg(), one grid", lambda: ms.carbon_kg(_cluster, hours=1000, grid=_grid), "<= 50 µs"),
    Bench("footprint(), by registry names", lambda: ms.footprint("dgx-h100", hours=1000, grid="quebec"),
          "<= 50 µs"),
    Bench("tco(), one grid", lambda: ms.tco(_cluster, days=30, grid="virginia"), "<= 50 µs"),
    Bench("training_run(), Llama-3-70B", lambda: ms.training_run("llama-3-70b", _cluster, 15e12), "<= 50 µs"),
    Bench("footprint() sweep, 4 regions × 250k durations",
          lambda: ms.footprint(_cluster, hours=_hours, grid=_regions), ">= 1e6 points/s",
          points=4 * _hours.size, calls=1),
    Bench("reasoning_service(), tp given", lambda: ms.reasoning_service(**_service, steps=8, tp=8),
          "<= 1 ms (a sizing search)"),
    Bench("reasoning_service(), cheapest tp", lambda: ms.reasoning_service(**_service, steps=8),
          "<= 1 ms (a sizing search)"),
    Bench("reasoning_service() sweep over 41 depths", lambda: ms.reasoning_service(**_service, steps=_steps),
          ">= 1e4 points/s", points=_steps.size, calls=1),
]
