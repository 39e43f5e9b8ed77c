"""One datapipe() and one quantized() call, and one-million-point sweeps of each."""
import numpy as np

import mlsysim as ms
from run import Bench

_resnet, _gpt2, _a100, _h100 = ms.model("resnet-50"), ms.model("gpt-2"), ms.hardware("a100-80gb"), ms.hardware("h100")
_llama = ms.model("llama-2-7b")
_workers = np.arange(1, 1_000_001, dtype=float)
_batches = np.arange(1, 1_000_001, dtype=float)
_decode_batches = _batches % 512 + 1      # batches that fit next to the bf16 baseline

BENCHMARKS = [
    Bench("datapipe(), ResNet-50 on an A100", lambda: ms.datapipe(_resnet, _a100, batch=256, workers=8),
          "<= 50 µs"),
    Bench("datapipe(), GPT-2 with on-the-fly tokenization",
          lambda: ms.datapipe(_gpt2, _h100, batch=16, seq_len=1024, pipeline="text-hf-tokenizers"), "<= 50 µs"),
    Bench("datapipe() sweep over 1e6 worker counts",
          lambda: ms.datapipe(_resnet, _a100, batch=256, workers=_workers), ">= 1e6 points/s",
          points=_workers.size, calls=1),
    Bench("datapipe() sweep over 1e6 batch sizes",
          lambda: ms.datapipe(_resnet, _h100, batch=_batches), ">= 1e6 points/s", points=_batches.size, calls=1),
    Bench("quantized(), Llama-2-7B W4A16 decode (two roofline passes)",
          lambda: ms.quantized(_llama, _a100, "w4a16"), "<= 50 µs"),
    Bench("quantized() sweep over 1e6 batch sizes",
          lambda: ms.quantized(_llama, _a100, "w4a16", batch=_decode_batches), ">= 1e6 points/s",
          points=_decode_batches.size, calls=1),
]
