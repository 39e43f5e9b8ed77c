"""Exercises of notebook 06, part 2 (failures and checkpoints). Ids 06.11 onwards."""
from ..checkpoint import checkpoint, checkpoint_bytes
from ..registry import cluster
from ..reliability import cluster_mtbf_h, daly_interval_s
from ..workloads import Transformer
from . import Exercise

SAVE_S, LOAD_S = 35.0, 12.0   # published.md, seed case: torch.save of model + AdamW state


def lsai_model() -> Transformer:
    """The student project's Llama-style model; the vocabulary (Llama 3's 128,256 tokens,
    untied embeddings) is an assumption that goes with its RoPE base of 500,000."""
    return Transformer(name="LSAI-Llama", layers=32, d_model=4096, heads=32, kv_heads=8, d_ff=6144,
                       vocab=128256, max_context=4096)


def lsai_checkpoint_B() -> float:
    """fp32 parameters (PyTorch autocast keeps them in fp32) + AdamW m and v: 12 B per parameter."""
    return sum(checkpoint_bytes(lsai_model(), "adamw", precision="fp32").values())


def _gain_async_over_sync() -> float:
    kw = dict(tp=8, pp=16, storage="lustre")
    c = cluster("dgx-h100", nodes=2048)
    sync = checkpoint("llama-3.1-405b", c, strategy="sync", **kw).goodput
    asyn = checkpoint("llama-3.1-405b", c, strategy="async", **kw).goodput
    return 100.0 * (asyn - sync)


EXERCISES = [
    Exercise("06.11", "Effective write bandwidth (B/s) of the 35 s torch.save of the LSAI model's AdamW checkpoint",
             lambda: lsai_checkpoint_B() / SAVE_S, rtol=0.03, unit="B/s",
             hint="Checkpoint bytes (fp32 weights + m + v) divided by the save time."),
    Exercise("06.12", "Effective read bandwidth (B/s) of its 12 s load",
             lambda: lsai_checkpoint_B() / LOAD_S, rtol=0.03, unit="B/s",
             hint="Same bytes, the load time."),
    Exercise("06.13", "Daly-optimal minutes between checkpoints for a 35 s stall on 128 DGX H100 nodes",
             lambda: daly_interval_s(SAVE_S, cluster_mtbf_h(cluster("dgx-h100", nodes=128)) * 3600) / 60,
             rtol=0.03, hint="ms.daly_interval_s(stall, MTBF in seconds); MTBF from ms.cluster_mtbf_h."),
    Exercise("06.14", "Goodput gain (percentage points) of async over sync checkpoints, Llama-3.1-405B, "
                      "2,048 DGX H100 nodes, TP 8, PP 16, Lustre, each at its best interval",
             _gain_async_over_sync, rtol=0.05,
             hint="ms.checkpoint(..., strategy=...).goodput for both strategies, times 100."),
]
