"""Quantized decode against gpt-fast's published batch-1 tokens/s, and the ideal int4 speed-up.

gpt-fast (pytorch-labs, README "Benchmarks") runs Llama-2 at batch 1 with a 5-token prompt on
an A100-80GB power-limited to 330 W, with int8 and int4 (group 32) weight-only kernels. The
roofline gives upper bounds on tokens/s and on the speed-up (the byte ratio). A fixed time per
token that no format shortens — calibrated once, from the bf16 row — turns the byte ratio into
an Amdahl estimate of the measured speed-ups of the two other rows.
"""
from __future__ import annotations

from ..quantization import quantized, weight_bytes_per_param
from . import Case

GPT_FAST = ("pytorch-labs/gpt-fast README, Benchmarks: 8xA100-80GB power-limited to 330 W, batch 1, "
            "5-token prompt, one GPU per model")
GPT_FAST_TOKENS_PER_S = {("llama-2-7b", "bf16"): 104.9, ("llama-2-7b", "w8a16"): 155.58,
                         ("llama-2-7b", "w4a16"): 196.80, ("llama-2-70b", "w8a16"): 19.13,
                         ("llama-2-70b", "w4a16"): 25.25}
GROUP_SIZE = {"bf16": None, "w8a16": None, "w4a16": 32}
GROUP_B = 4.0   # gpt-fast int4: a bf16 scale and a bf16 zero point per group of 32 weights
DEVICE = "a100-80gb"


def gpt_fast_decode(model: str, scheme: str, overhead_s: float = 0.0):
    """The roofline decode step of one gpt-fast row (empty cache: 5 + ~200 cached tokens move <1 %).
    Llama-2-70B does not fit on one GPU in bf16, so its rows compare with int8 instead."""
    baseline = "bf16" if model == "llama-2-7b" else "w8a16"
    return quantized(model, DEVICE, scheme, baseline=baseline, group_size=GROUP_SIZE[scheme], group_B=GROUP_B,
                     overhead_s=overhead_s)


def fixed_overhead_s(model: str = "llama-2-7b") -> float:
    """Time per token beyond the bandwidth bound, from the measured bf16 row (the one fitted knob)."""
    return 1.0 / GPT_FAST_TOKENS_PER_S[(model, "bf16")] - gpt_fast_decode(model, "bf16").baseline_s


def _ratio(scheme: str, overhead_s: float) -> float:
    return gpt_fast_decode("llama-2-7b", scheme, overhead_s).speedup


def _measured_ratio(scheme: str) -> float:
    return GPT_FAST_TOKENS_PER_S[("llama-2-7b", scheme)] / GPT_FAST_TOKENS_PER_S[("llama-2-7b", "bf16")]


_AMDAHL = ("A fixed {t:.2g} ms per token (the bf16 row minus its bandwidth bound: hundreds of small "
           "kernels, norms and sampling) does not shrink with the weights, so the speed-up falls short of "
           "the byte ratio as Amdahl's law says.")

CASES = [
    Case(id=f"gpt-fast-speedup-{s}", area="quantization",
         title=f"Llama-2-7B decode speed-up {s} over bf16, A100, batch 1 (fixed overhead from the bf16 row)",
         published=_measured_ratio(s), unit="x", predict=lambda s=s: _ratio(s, fixed_overhead_s()),
         tolerance=0.05, source=GPT_FAST,
         note=_AMDAHL.format(t=fixed_overhead_s() * 1e3) + (" int4 also reads a 4-byte scale and zero point per 32 weights: "
                                       "5 bits per weight, not 4." if s == "w4a16" else ""))
    for s in ("w8a16", "w4a16")
] + [
    Case(id=f"gpt-fast-byte-ratio-{s}", area="quantization",
         title=f"Llama-2-7B decode speed-up {s} over bf16, A100, batch 1 (byte ratio, no overhead)",
         published=_measured_ratio(s), unit="x", predict=lambda s=s: _ratio(s, 0.0),
         kind="bound", direction="upper", tolerance=0.45, source=GPT_FAST,
         note="The byte ratio is the most a weight-only format can gain when decode is memory-bound; the "
              "measured gain is smaller because part of each step is a fixed cost (see the Amdahl cases).")
    for s in ("w8a16", "w4a16")
] + [
    Case(id=f"gpt-fast-tokens-{m.split('-')[-1]}-{s}", area="quantization",
         title=f"{m} decode tokens/s, {s}, A100-80GB, batch 1", published=GPT_FAST_TOKENS_PER_S[(m, s)],
         unit="tok/s", predict=lambda m=m, s=s: 1.0 / gpt_fast_decode(m, s).time_s,
         kind="bound", direction="upper", tolerance=tol, source=GPT_FAST,
         note="The roofline streams the weights at the full 2,039 GB/s; quantized kernels unpack and scale "
              "every weight on the CUDA cores and reach about half of the bound (gpt-fast itself reports "
              "860-1,320 GB/s achieved for its quantized rows), on a GPU capped at 330 W.")
    for (m, s), tol in {("llama-2-7b", "w8a16"): 0.55, ("llama-2-7b", "w4a16"): 0.65,
                        ("llama-2-70b", "w8a16"): 0.40, ("llama-2-70b", "w4a16"): 0.50}.items()
] + [
    Case(id="marlin-ideal-int4", area="quantization",
         title="Ideal int4 (group 128) over fp16 weight-read speed-up", published=3.87, unit="x",
         predict=lambda: weight_bytes_per_param("fp16") / weight_bytes_per_param("int4", 128, 2.0),
         tolerance=0.01, source="IST-DASLab/marlin README: 'the optimal 3.87x (note the 0.125 bits storage "
                                "overhead of the group scales)' (Frantar & Alistarh 2024)",
         note="16 bits / (4 + 16/128) bits = 3.879; Marlin quotes it truncated to 3.87."),
]
