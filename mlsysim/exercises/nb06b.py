"""Exercises of the PyTorch lab (``06b_lab_pytorch``, after the checkpoint lab). Ids 06b.1 onwards.

The seed study's model: a decoder-only transformer of 32 layers, width 4096, 32 heads, 8 KV
heads, a SwiGLU feed-forward of width 6144, trained with AdamW in fp32 (12 bytes per
parameter); its vocabulary is not stated, the exercises take 32,000 tokens (Llama 2's). Its
state took about 35 s to save and 12 s to load with ``torch.save``. The given machine is the
checkpoint lab's: memory copy 20 GB/s, write with fsync 1.5 GB/s, read 3 GB/s, and 256 GB of
host memory (a snapshot of the state must fit).
"""
from . import Exercise

LAYERS, D_MODEL, HEADS, KV_HEADS, D_FF, VOCAB = 32, 4096, 32, 8, 6144, 32_000
SAVE_S, LOAD_S = 35.0, 12.0
COPY_BPS, WRITE_BPS, READ_BPS = 20e9, 1.5e9, 3e9
HOST_MEMORY_B = 256e9  # room for a snapshot of the 48 GB state
INTERVAL_S = 600.0    # a checkpoint every 10 minutes of compute
CACHE_WRITE_BPS, TORCH_CRC_BPS = 4e9, 4e9   # the given machine's page-cache write and torch.save's CRC-32
PASS_S = 1.5          # the seed model's forward and backward pass on the given machine (a round figure)


def seed_model(vocab: int = VOCAB):
    """The seed study's transformer as an :class:`mlsysim.Transformer` record."""
    from ..workloads import Transformer
    return Transformer(name=f"seed study, vocab {vocab:,}", layers=LAYERS, d_model=D_MODEL, heads=HEADS,
                       kv_heads=KV_HEADS, d_ff=D_FF, vocab=vocab, gated_mlp=True)


def machine():
    from ..lab.predict import machine_from
    return machine_from(COPY_BPS, WRITE_BPS, READ_BPS, host_memory_B=HOST_MEMORY_B)


def state_B(vocab: int = VOCAB) -> float:
    """Bytes of weights and AdamW moments in fp32, as :func:`mlsysim.checkpoint` counts them."""
    from ..checkpoint import checkpoint
    return checkpoint(seed_model(vocab), machine().cluster, optimizer="adamw", precision="fp32", tp=1, pp=1,
                      dp=1, zero_stage=0, interval_s=INTERVAL_S).size_B


def _concurrent_stall() -> float:
    from ..lab.predict import predict
    return predict(state_B(), machine(), interval_s=INTERVAL_S).concurrent_stall_s


EXERCISES = [
    Exercise("06b.1", "Bytes of the seed model's training state (fp32 weights and AdamW moments, 32,000-token "
             "vocabulary), as ms.checkpoint counts them", state_B, rtol=0.05, unit="B",
             hint="ms.checkpoint(ms.Transformer(...), cluster, optimizer='adamw', precision='fp32', dp=1, "
                  "zero_stage=0).size_B; gated_mlp=True for SwiGLU."),
    Exercise("06b.2", "Effective bandwidth (B/s) of the seed study's torch.save: state size over 35 s",
             lambda: state_B() / SAVE_S, rtol=0.05, unit="B/s",
             hint="Bandwidth is bytes over seconds: the state of 06b.1 over the 35 s the save took."),
    Exercise("06b.3", "Predicted stall (s) of the concurrent engine for the seed model's state on the given "
             "machine (copy 20 GB/s, write 1.5 GB/s, read 3 GB/s, 256 GB of host memory), one checkpoint every "
             "10 minutes",
             _concurrent_stall, rtol=0.05, unit="s",
             hint="predict(state, machine_from(20e9, 1.5e9, 3e9, host_memory_B=256e9), interval_s=600).concurrent_stall_s: "
                  "the write hides behind 10 minutes of compute, the copy does not."),
    Exercise("06b.4", "Which loader refused the checkpoint with a flipped byte: 'torch.load', 'dcp' or "
             "'load_latest'?", lambda: "load_latest",
             hint="Only a loader that checks a checksum can tell a changed byte from a right one."),
    Exercise("06b.5", "Refined model: torch.save's stall (s) for the seed state on the given machine, whose "
             "page-cache write runs at 4 GB/s and torch.save's own CRC-32 at 4 GB/s",
             lambda: state_B() / TORCH_CRC_BPS + state_B() / CACHE_WRITE_BPS, rtol=0.05, unit="s",
             hint="S/t + S/p: torch.save checksums every record, then hands it to the page cache; it never "
                  "waits for the disk."),
    Exercise("06b.6", "Stall (s) of the pipelined engine in training for the seed state on the given machine, "
             "its forward and backward pass taking 1.5 s",
             lambda: max(0.0, state_B() / COPY_BPS - PASS_S), rtol=0.05, unit="s",
             hint="max(0, d - tau): the copy d = S / 20 GB/s runs beside the pass; training waits before the "
                  "optimizer step for what is left."),
]
