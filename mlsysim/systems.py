"""Hardware, node, fabric, cluster and grid records.

Units live in the field names: ``*_B`` bytes, ``*_Bps`` bytes per second,
``*_W`` watts, ``*_s`` seconds. Link bandwidths are **per direction**: a
vendor's "900 GB/s NVLink" (both directions added) is stored as 450e9.
Peaks are dense (no 2:4 sparsity), in FLOP/s (OP/s for integer formats).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

import numpy as np

from .errors import InfeasibleError, MlsysimError, UnknownNameError, check_integer, check_positive


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """One accelerator (or CPU, SoC, microcontroller) with its dense peaks.

    >>> h = Hardware(name="toy", kind="gpu", peak_flops={"bf16": 1e15}, memory_B=80e9,
    ...              memory_bw_Bps=2e12)
    >>> h.ridge("bf16")   # FLOP per byte at which compute and memory time are equal
    500.0
    """

    name: str
    kind: str                      # gpu, tpu, wafer, npu, soc, cpu, mcu
    vendor: str = ""
    peak_flops: Mapping[str, float]
    memory_B: float
    memory_bw_Bps: float
    memory_type: str = ""
    tdp_W: float | None = None
    host_link: str = ""
    host_link_Bps: float | None = None     # per direction
    scaleup_link: str = ""
    scaleup_Bps: float | None = None       # per direction, per device
    sram_B: float | None = None            # on-chip SRAM (L2, shared memory, wafer SRAM)
    sram_bw_Bps: float | None = None
    sms: int | None = None                 # streaming multiprocessors / compute units that share a GEMM
    matmul_efficiency: float | None = None  # best achieved fraction of the bf16 dense peak in a GEMM
    attention_efficiency: float | None = None  # fraction of the dense peak a fused attention kernel reaches
    fp8_matmul_efficiency: float | None = None  # the same as matmul_efficiency for fp8 GEMMs, where measured
    kernel_source: str = ""                # source and date of sms and matmul_efficiency
    year: int | None = None
    source: str = ""
    date: str = ""
    notes: str = ""

    def __post_init__(self):
        if not self.peak_flops:
            raise MlsysimError(f"{self.name}: peak_flops needs at least one precision")
        # a peak may be an array (a sweep or a sensitivity perturbs specs); solvers broadcast over it
        peaks = {str(k).lower(): float(v) if np.ndim(v) == 0 else np.asarray(v, dtype=float)
                 for k, v in dict(self.peak_flops).items()}
        for k, v in peaks.items():
            check_positive(f"{self.name}.peak_flops[{k!r}]", v)
        object.__setattr__(self, "peak_flops", MappingProxyType(peaks))
        check_positive(f"{self.name}.memory_B", self.memory_B)
        check_positive(f"{self.name}.memory_bw_Bps", self.memory_bw_Bps)
        if self.sms is not None:
            check_integer(f"{self.name}.sms", self.sms)
        if self.matmul_efficiency is not None and not 0 < self.matmul_efficiency <= 1:
            raise MlsysimError(f"{self.name}.matmul_efficiency must lie in (0, 1], got {self.matmul_efficiency!r}")
        if self.fp8_matmul_efficiency is not None and not 0 < self.fp8_matmul_efficiency <= 1:
            raise MlsysimError(f"{self.name}.fp8_matmul_efficiency must lie in (0, 1], "
                               f"got {self.fp8_matmul_efficiency!r}")
        if self.attention_efficiency is not None and not 0 < self.attention_efficiency <= 1:
            raise MlsysimError(f"{self.name}.attention_efficiency must lie in (0, 1], "
                               f"got {self.attention_efficiency!r}")

    def peak(self, precision: str) -> float:
        """Dense peak FLOP/s in ``precision``; a missing precision is an error, never a fallback."""
        key = str(precision).lower()
        if key not in self.peak_flops:
            raise UnknownNameError(f"precision for {self.name} (it has a peak only for "
                                   f"{', '.join(self.peak_flops)})", precision, self.peak_flops)
        return self.peak_flops[key]

    def ridge(self, precision: str) -> float:
        """Ridge point (FLOP/byte) = peak / memory bandwidth."""
        return self.peak(precision) / self.memory_bw_Bps

    @property
    def precisions(self) -> tuple[str, ...]:
        return tuple(self.peak_flops)

    def describe(self) -> dict:
        return {"name": self.name, "kind": self.kind, **{f"{p} FLOP/s": v for p, v in self.peak_flops.items()},
                "memory B": self.memory_B, "memory B/s": self.memory_bw_Bps, "TDP W": self.tdp_W,
                "source": self.source}


@dataclass(frozen=True, kw_only=True)
class Fabric:
    """A scale-out (or scale-up) network technology: one port's rate per direction and latency."""

    name: str
    kind: str                 # infiniband, roce, ethernet, nvlink, ici
    port_Bps: float           # per direction, one port / link
    latency_s: float          # one-way small-message latency, end to end through one switch hop
    description: str = ""
    source: str = ""
    date: str = ""


@dataclass(frozen=True, kw_only=True)
class Node:
    """A server: accelerators joined by a scale-up link, a host, NICs and local storage."""

    name: str
    accelerator: Hardware
    accelerators: int
    host_memory_B: float
    system_power_W: float          # maximum system power, accelerators included
    nics: int                      # scale-out NICs (compute fabric)
    nic_Bps: float                 # per NIC per direction
    local_storage_B: float = 0.0
    default_fabric: str = ""
    cpu: str = ""
    source: str = ""
    date: str = ""
    notes: str = ""

    def __post_init__(self):
        check_integer(f"{self.name}.accelerators", self.accelerators)
        check_positive(f"{self.name}.host_memory_B", self.host_memory_B)
        check_positive(f"{self.name}.system_power_W", self.system_power_W)

    @property
    def host_power_W(self) -> float:
        """Power of everything but the accelerators at full load (CPUs, NICs, fans, storage)."""
        return self.system_power_W - self.accelerators * (self.accelerator.tdp_W or 0.0)


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """``nodes`` identical nodes on one scale-out fabric.

    >>> import mlsysim as ms
    >>> c = ms.cluster("dgx-h100", nodes=128, fabric="ib-ndr")
    >>> c.accelerators, c.scaleout_Bps_per_accelerator / 1e9   # 400 Gb/s per GPU
    (1024, 50.0)
    """

    name: str
    node: Node
    nodes: int
    fabric: Fabric
    source: str = ""
    notes: str = ""

    def __post_init__(self):
        check_integer(f"{self.name}.nodes", self.nodes)

    @property
    def accelerator(self) -> Hardware:
        return self.node.accelerator

    @property
    def accelerators_per_node(self) -> int:
        return self.node.accelerators

    @property
    def accelerators(self) -> int:
        return self.nodes * self.node.accelerators

    @property
    def scaleup_Bps(self) -> float:
        """Per-accelerator, per-direction bandwidth inside a node."""
        if self.accelerator.scaleup_Bps is None:
            raise InfeasibleError(f"{self.accelerator.name} has no scale-up link inside {self.node.name}")
        return self.accelerator.scaleup_Bps

    @property
    def scaleout_Bps_per_accelerator(self) -> float:
        """Per-accelerator, per-direction bandwidth leaving the node: NICs × min(NIC, fabric port) / accelerators."""
        return self.node.nics * min(self.node.nic_Bps, self.fabric.port_Bps) / self.node.accelerators

    @property
    def peak_flops(self) -> Mapping[str, float]:
        return MappingProxyType({p: v * self.accelerators for p, v in self.accelerator.peak_flops.items()})

    def describe(self) -> dict:
        return {"name": self.name, "node": self.node.name, "nodes": self.nodes,
                "accelerators": self.accelerators, "fabric": self.fabric.name,
                "scale-out B/s per accelerator": self.scaleout_Bps_per_accelerator}


@dataclass(frozen=True, kw_only=True)
class Grid:
    """An electricity supply: location-based carbon intensity, a typical data-centre PUE
    there, and (where sourced) a price of electricity."""

    name: str
    region: str
    carbon_g_per_kWh: float
    pue: float
    price_usd_per_kWh: float | None = None
    wue_L_per_kWh: float | None = None
    basis: str = ""
    source: str = ""
    date: str = ""

    def __post_init__(self):
        check_positive(f"{self.name}.carbon_g_per_kWh", self.carbon_g_per_kWh, allow_zero=True)
        if not self.pue >= 1.0:
            raise MlsysimError(f"{self.name}.pue must be >= 1, got {self.pue}")
