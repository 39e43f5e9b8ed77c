"""Sensitivity (six inputs in one vectorised call), inverse design and the wafer models."""
import numpy as np

import mlsysim as ms
from run import Bench

_model, _hw, _cs3 = ms.model("llama-3-8b"), ms.hardware("h100"), ms.hardware("cs-3")
_batches = np.geomspace(1, 64, 1_000_000)
_six = {"peak": 1.0, "bandwidth": 1.0, "capacity": 1.0, "link": 1.0, "batch": 8.0, "context_tokens": 1024.0}


def _decode(peak, bandwidth, capacity, link, batch, context_tokens):
    hw = ms.scale_hardware(_hw, peak=peak, bandwidth=bandwidth, capacity=capacity, link=link)
    return ms.roofline(_model, hw, batch=batch, context_tokens=context_tokens)


def _solve():
    return ms.solve_for(lambda bandwidth: ms.roofline(_model, ms.scale_hardware(_hw, bandwidth=bandwidth)),
                        "bandwidth", 2e-3)


BENCHMARKS = [
    Bench("sensitivity(), 6 inputs of one decode step (one call)", lambda: ms.sensitivity(_decode, _six),
          "<= 1 ms"),
    Bench("hardware_sensitivity(), 4 specs + 2 inputs", lambda: ms.hardware_sensitivity(
        ms.roofline, _model, _hw, specs=("peak", "bandwidth", "capacity", "link"),
        inputs={"batch": 8, "context_tokens": 1024}), "<= 1 ms"),
    Bench("inverse_roofline(), closed form", lambda: ms.inverse_roofline(_model, _hw, target_s=2e-3),
          "<= 50 µs"),
    Bench("solve_for(), bracketing to 1e-9", _solve, "<= 1 ms"),
    Bench("weight_streaming(), one training step", lambda: ms.weight_streaming(_model, _cs3, batch=8,
                                                                                 recompute="full"), "<= 50 µs"),
    Bench("weights_resident(), one decode step", lambda: ms.weights_resident(_model, _cs3, batch=8,
                                                                              context_tokens=2048), "<= 50 µs"),
    Bench("weight_streaming() sweep over 1e6 batches", lambda: ms.weight_streaming(
        _model, ms.scale_hardware(_cs3, capacity=100), batch=_batches, recompute="full"), ">= 1e6 points/s",
          points=_batches.size, calls=1),
]
