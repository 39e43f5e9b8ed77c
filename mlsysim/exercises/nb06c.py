"""Exercises of the distributed checkpoint lab (``06c_lab_distributed``). Ids 06c.1 onwards.

The given job: Llama-3-70B trained with mixed-precision AdamW (14 B per parameter) on 128
DGX H100 nodes (1,024 GPUs) with TP 8 x PP 4 x DP 32 and ZeRO-1: the fp32 master weights and
AdamW's moments are sharded over the 32 data-parallel replicas, the bf16 weights are
replicated. Its checkpoint is about 1 TB; it is restored from Meta's Tectonic file system.
"""
from . import Exercise

MODEL, NODE, NODES, TP, PP, ZERO = "llama-3-70b", "dgx-h100", 128, 8, 4, 1
STORAGE = "tectonic"


def job(storage: str = STORAGE):
    """The given job's :class:`mlsysim.checkpoint.Checkpoint` (async saves, Daly's interval)."""
    from ..checkpoint import checkpoint
    from ..registry import cluster
    return checkpoint(MODEL, cluster(NODE, nodes=NODES), tp=TP, pp=PP, zero_stage=ZERO, strategy="async",
                      storage=storage)


def every_rank_reads_B() -> float:
    """Bytes read from storage when every rank reads its own piece: each of the DP replicas reads
    the replicated part (the bf16 weights) again; the sharded part and the per-rank extras once."""
    k = job()
    replicated = k.weights_B                 # ZeRO-1: the weights stay replicated over DP
    return k.dp * replicated + k.master_B + k.optimizer_B + k.extras_B


def amplification() -> float:
    """Bytes read without a broadcast over the checkpoint's size."""
    return every_rank_reads_B() / job().size_B


def restore_without_broadcast_s() -> float:
    """Every rank reads ``rank_B`` itself: the tier's read time of the amplified bytes (each node's
    GPUs reading ``rank_B`` each through its client link), then the copy to the GPU."""
    from ..checkpoint import storage_tier
    from ..registry import cluster
    k, c = job(), cluster(NODE, nodes=NODES)
    node_B = c.node.accelerators * k.rank_B
    return storage_tier(STORAGE).read_s(every_rank_reads_B(), node_B) + k.rank_B / c.accelerator.host_link_Bps


def resume_after_node_loss_s(detection_s: float = 60.0) -> float:
    """Seconds from a node loss until the given job trains again, with NCCL's timeout lowered to
    ``detection_s``: detection + replacement + rendezvous (:func:`mlsysim.reliability.downtime`'s
    defaults for the last two) + the restore from Tectonic."""
    from ..reliability import downtime
    d = downtime(job(), detection_s=detection_s)
    return d.restart_s + d.restore_s


EXERCISES = [
    Exercise("06c.1", "Bytes the busiest rank writes per checkpoint of Llama-3-70B (mixed-precision AdamW) on "
             "1,024 H100s, TP 8 x PP 4 x DP 32, ZeRO-1", lambda: job().rank_B, rtol=0.03, unit="B",
             hint="ms.checkpoint('llama-3-70b', ms.cluster('dgx-h100', nodes=128), tp=8, pp=4, zero_stage=1)"
                  ".rank_B: replicated / (tp pp) + sharded / (tp pp dp) + 16 KB."),
    Exercise("06c.2", "Load amplification of the same job when every rank reads its own piece from storage "
             "(no broadcast): bytes read over the checkpoint's size", amplification, rtol=0.03,
             hint="The replicated bf16 weights are read once per data-parallel replica (32 times); the "
                  "sharded master weights, moments and per-rank extras once."),
    Exercise("06c.3", "Time (s) to restore the job's checkpoint from Tectonic, one read per data-parallel "
             "group and a broadcast of the replicated part, as ms.checkpoint models it",
             lambda: job().restore_s, rtol=0.03, unit="s",
             hint="ms.checkpoint(..., storage='tectonic').restore_s: read + copy to the GPU + broadcast."),
    Exercise("06c.4", "Time (s) to restore it from Tectonic when every rank reads its own piece (no broadcast)",
             restore_without_broadcast_s, rtol=0.03, unit="s",
             hint="ms.storage_tier('tectonic').read_s(total bytes read, bytes the busiest node reads) + "
                  "rank_B / host link; the busiest node's 8 GPUs read rank_B each."),
    Exercise("06c.5", "Seconds from a node loss until the given job trains again (detection, replacement, "
             "rendezvous, restore from Tectonic) when the job lowers NCCL's timeout to 60 s; the replacement "
             "and the rendezvous at ms.reliability.downtime's defaults", resume_after_node_loss_s, rtol=0.03,
             unit="s", hint="d = ms.reliability.downtime(the job's ms.checkpoint, detection_s=60); "
                            "d.restart_s + d.restore_s."),
]
