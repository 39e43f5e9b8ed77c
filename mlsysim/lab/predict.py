"""What :func:`mlsysim.checkpoint` predicts for the lab's run on this machine.

The machine is measured (:mod:`mlsysim.measure`) and described with the same
records as the registry's clusters: a :class:`~mlsysim.systems.Hardware` whose
"host link" is the memory copy (the CPU trains, so the device → host copy of a
checkpoint is a memcpy at half the STREAM-style copy bandwidth, which counts each
byte read and written), a one-node :class:`~mlsysim.systems.Cluster`, and a
:class:`~mlsysim.checkpoint.StorageTier` whose write rate is a measured write +
``fsync`` and whose read rate a measured read from the device (page cache dropped).

Predictions (τ = compute time between checkpoints, d = snapshot copy, W = storage write):

* sync stall = d + W (the model's ``"sync"`` strategy);
* concurrent stall = max(d, W − τ) with two or more buffers: the model's ``"async"``
  stall, or, when checkpoints come faster than the disk persists them, the steady state
  of a pool drained by one writer at the disk's rate. The copy into a free buffer
  overlaps the write of the previous one, so a period lasts W and the training, after
  τ of compute, stalls W − τ (copy included). With one buffer nothing overlaps: a
  period lasts d + W and the stall is max(d, d + W − τ);
* load = the model's restore time (read + copy).
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

from ..checkpoint import StorageTier, checkpoint
from ..errors import MlsysimError
from ..systems import Cluster, Fabric, Node
from ..workloads import Transformer
from .train import BYTES_PER_PARAM, LabConfig


@dataclass(frozen=True, kw_only=True)
class LabWorkload(Transformer):
    """The lab's MLP as a workload record for :func:`mlsysim.checkpoint`, which needs only its
    parameter count (the Transformer fields describe its width and depth, it has no attention)."""

    n_params: float

    @property
    def params(self) -> float:
        return float(self.n_params)

    def weight_matrices(self) -> list:
        return []


def workload(state) -> LabWorkload:
    """The record of a :class:`LabConfig`, or of a state of ``state`` bytes (12 B per parameter)."""
    if isinstance(state, LabConfig):
        return LabWorkload(name=f"lab MLP {state.width}x{state.depth}", layers=state.depth, d_model=state.width,
                           heads=1, d_ff=state.width, vocab=state.vocab, n_params=state.params)
    return LabWorkload(name=f"lab MLP, {state:.3g} B", layers=1, d_model=1, heads=1, d_ff=1, vocab=1,
                       n_params=state / BYTES_PER_PARAM)


@dataclass(frozen=True)
class Machine:
    """This machine as measured: copy rate, disk write (with fsync) and read rates, and the records."""

    copy_Bps: float
    write_Bps: float
    read_Bps: float
    cluster: Cluster
    storage: StorageTier


def measure_machine(directory=None, size_B: float = 256e6, repeats: int = 2) -> Machine:
    """Measure memory copy and disk bandwidth (in ``directory``) and build the records."""
    from ..measure import disk_bandwidth, host_memory_B, this_machine
    hw = this_machine(n=512, size_B=size_B)
    copy = hw.memory_bw_Bps / 2.0
    disk = disk_bandwidth(size_B, directory=directory, repeats=repeats)
    return machine_from(copy, disk.write_Bps, disk.read_Bps, hw=hw, host_memory_B=host_memory_B())


def machine_from(copy_Bps: float, write_Bps: float, read_Bps: float, hw=None, host_memory_B: float = 16e9) -> Machine:
    """The records for given rates (measured ones, or a reader's what-if)."""
    from ..systems import Hardware
    today = time.strftime("%Y-%m-%d")
    hw = hw or Hardware(name="this machine", kind="cpu", peak_flops={"fp32": 1e11}, memory_B=host_memory_B,
                        memory_bw_Bps=2 * copy_Bps, source="given", date=today)
    hw = dataclasses.replace(hw, host_link="memory copy", host_link_Bps=copy_Bps)
    # one node, one "accelerator" (the CPU); power and NICs do not enter a one-node checkpoint
    node = Node(name="this machine", accelerator=hw, accelerators=1, host_memory_B=host_memory_B,
                system_power_W=1.0, nics=1, nic_Bps=copy_Bps, source="measured", date=today)
    fabric = Fabric(name="none", kind="ethernet", port_Bps=copy_Bps, latency_s=0.0)
    cluster = Cluster(name="this machine", node=node, nodes=1, fabric=fabric)
    tier = StorageTier(name="this machine's disk", kind="node", write_Bps=write_Bps, read_Bps=read_Bps,
                       client_write_Bps=None, client_read_Bps=None, durable=True,
                       source="measured with mlsysim.measure.disk_bandwidth", date=today)
    return Machine(copy_Bps, write_Bps, read_Bps, cluster, tier)


@dataclass(frozen=True)
class Prediction:
    """Seconds predicted per checkpoint of ``size_B`` bytes taken every ``interval_s`` of compute."""

    size_B: float
    interval_s: float
    copy_s: float
    write_s: float
    sync_stall_s: float
    concurrent_stall_s: float
    restore_s: float


def predict(cfg, m: Machine, interval_s: float, buffers: int = 2) -> Prediction:
    """The model's numbers for checkpointing ``cfg``'s state (a :class:`LabConfig`, or bytes) on ``m``,
    the concurrent engine having ``buffers`` host buffers.

    >>> m = machine_from(copy_Bps=20e9, write_Bps=1.5e9, read_Bps=3e9)
    >>> p = predict(1.2e9, m, interval_s=10.0)
    >>> round(p.copy_s, 3), round(p.write_s, 3), round(p.sync_stall_s, 3), round(p.concurrent_stall_s, 3)
    (0.06, 0.8, 0.86, 0.06)
    >>> round(predict(1.2e9, m, interval_s=0.5).concurrent_stall_s, 3)   # back-pressure: 0.8 - 0.5
    0.3
    >>> round(predict(1.2e9, m, interval_s=0.5, buffers=1).concurrent_stall_s, 3)   # 0.06 + 0.8 - 0.5
    0.36
    """
    if type(buffers) is not int or buffers < 1:
        raise MlsysimError(f"buffers must be a positive integer, got {buffers!r}")
    kw = dict(optimizer="adamw", precision="fp32", tp=1, pp=1, dp=1, zero_stage=0, storage=m.storage,
              restart_s=0.0)
    sync = checkpoint(workload(cfg), m.cluster, strategy="sync", interval_s=interval_s, **kw)
    # the async strategy needs interval >= persist; past that point the pool's back-pressure rules
    asyn = checkpoint(workload(cfg), m.cluster, strategy="async",
                      interval_s=max(interval_s, sync.storage_write_s), **kw)
    # under back-pressure the writer never idles: τ + stall = one writer period per checkpoint
    period = asyn.storage_write_s if buffers >= 2 else asyn.d2h_s + asyn.storage_write_s
    concurrent = max(asyn.stall_s, period - interval_s)
    return Prediction(size_B=sync.size_B, interval_s=interval_s, copy_s=sync.d2h_s,
                      write_s=sync.storage_write_s, sync_stall_s=sync.stall_s, concurrent_stall_s=concurrent,
                      restore_s=sync.restore_s if math.isfinite(sync.restore_s) else math.nan)
