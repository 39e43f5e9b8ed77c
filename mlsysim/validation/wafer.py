"""Wafer-scale inference: how many wafers a model needs, and the token-rate bound against Cerebras' figures."""
from __future__ import annotations

from ..registry import hardware
from ..wafer import wafers_needed, weights_resident
from . import Case

LAUNCH = ("Cerebras, 'Introducing Cerebras Inference: AI at instant speed' (blog and press release, "
          "2024-08-27): Llama 3.1-8B at 1,800 tok/s and 70B at 450 tok/s with native 16-bit weights; "
          "'20B models fit on a single CS-3 while 70B models fit on as few as four systems'")
LATENCY_NOTE = ("The bound is the compute of a layer pipeline (each layer on its own region of a wafer, "
                "one region busy per token at batch 1) and ignores what sets batch-1 speed on a wafer: "
                "the latency of each layer's dataflow across its region and of the hand-over between "
                "regions and wafers. The measured rate is the smaller share; the model only guarantees "
                "it is a bound.")

# batch-1 generation rates published for Cerebras Inference: (name, registry model, tok/s, tolerance, source)
PUBLISHED_RATES = [
    ("Llama 3.1-8B", "llama-3-8b", 1800.0, 0.96, LAUNCH),
    ("Llama 3.1-70B", "llama-3-70b", 450.0, 0.93, LAUNCH),
    ("Llama 3.1-405B", "llama-3.1-405b", 969.0, 0.70,
     "Tom's Hardware, 2024-11-20, reporting Cerebras: Llama 3.1-405B at 969 tok/s on Cerebras Inference"),
]

CASES = [
    Case(id="W1", area="wafer", title="CS-3 wafers that hold Llama 3.1-70B in 16-bit weights", published=4,
         unit="wafers", predict=lambda: wafers_needed("llama-3-70b", "cs-3", precision="fp16"),
         tolerance=0.01, source=LAUNCH,
         note="141 GB of weights over 44 GB of SRAM per wafer: 3.2, so 4 wafers, leaving 35 GB for the "
              "KV cache (Llama 3.1-70B shares Llama-3-70B's shapes)."),
    Case(id="W2", area="wafer", title="Largest 16-bit dense model whose weights fit one CS-3 (parameters)",
         published=20e9, unit="", predict=lambda: hardware("cs-3").memory_B / 2.0, tolerance=0.15,
         source=LAUNCH,
         note="44 GB holds 22 B 16-bit weights; Cerebras quotes 20B, keeping room for the KV cache, "
              "activations and code."),
] + [
    Case(id=f"W{i}", area="wafer", title=f"{name} decode on CS-3, batch 1 (tokens/s)", published=rate,
         unit="tok/s", predict=lambda m=model: weights_resident(m, "cs-3", batch=1).tokens_per_s,
         kind="bound", direction="upper", tolerance=tol, source=src, note=LATENCY_NOTE)
    for i, (name, model, rate, tol, src) in enumerate(PUBLISHED_RATES, start=3)
]
