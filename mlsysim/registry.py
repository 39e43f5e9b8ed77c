"""Look-ups into the YAML registries in ``mlsysim/data``.

Names are case-insensitive and ignore spaces and underscores; an unknown name
raises :class:`~mlsysim.errors.UnknownNameError` listing close matches. Files
are read once, on the first look-up, so ``import mlsysim`` stays fast.
Every entry carries ``source`` and ``date``; vendor units are converted to SI
here and nowhere else.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

from .errors import MlsysimError, UnknownNameError
from .systems import Cluster, Fabric, Grid, Hardware, Node
from .units import GB, GiB, Gbps, MB, TB, TFLOP, us
from .workloads import CNN, Optimizer, Transformer

DATA = Path(__file__).parent / "data"


def _key(name: str) -> str:
    return str(name).strip().lower().replace("_", "-").replace(" ", "-")


_EXPONENT = re.compile(r"[-+]?\d+(\.\d*)?[eE][-+]?\d+")


def _floats(node):
    """YAML 1.1 reads 6.7e9 (no dot, no sign) as text; turn such strings into floats."""
    if isinstance(node, dict):
        return {k: _floats(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_floats(v) for v in node]
    if isinstance(node, str) and _EXPONENT.fullmatch(node):
        return float(node)
    return node


def _read(filename: str):
    import yaml
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(DATA / filename, encoding="utf-8") as f:
        return _floats(yaml.load(f, Loader=loader))


class _Table:
    """Records of one kind, indexed by normalised name and by the names in ``also``."""

    def __init__(self, kind: str, entries: list[tuple[object, list[str]]]):
        self.kind = kind
        self.records = [rec for rec, _ in entries]
        self.index = {}
        for rec, also in entries:
            for n in [rec.name, *also]:
                k = _key(n)
                if k in self.index:
                    raise MlsysimError(f"duplicate {kind} name {n!r} in the registry")
                self.index[k] = rec

    def get(self, name):
        try:
            return self.index[_key(name)]
        except KeyError:
            raise UnknownNameError(self.kind, name, self.index) from None

    def names(self) -> list[str]:
        return [r.name for r in self.records]


def _require(entry: dict, kind: str) -> None:
    for field in ("name", "source", "date"):
        if not entry.get(field):
            raise MlsysimError(f"{kind} entry {entry.get('name', '?')!r} has no {field}")


def _hardware_record(e: dict) -> Hardware:
    _require(e, "hardware")
    mem = e["memory_GB"] * GB if "memory_GB" in e else e["memory_GiB"] * GiB
    half = lambda k: e[k] * GB / 2 if k in e else None  # noqa: E731 (bidirectional -> per direction)
    return Hardware(
        name=e["name"], kind=e["kind"], vendor=e.get("vendor", ""), year=e.get("year"),
        peak_flops={p: v * TFLOP for p, v in e["peak_tflops"].items()},
        memory_B=mem, memory_type=e.get("memory_type", ""), memory_bw_Bps=e["memory_bw_GBps"] * GB,
        tdp_W=e.get("tdp_W"), host_link=e.get("host_link", ""), host_link_Bps=half("host_link_bidir_GBps"),
        scaleup_link=e.get("scaleup_link", ""), scaleup_Bps=half("scaleup_bidir_GBps"),
        sram_B=e["sram_MB"] * MB if "sram_MB" in e else None,
        sms=e.get("sms"), matmul_efficiency=e.get("matmul_efficiency"),
        attention_efficiency=e.get("attention_efficiency"),
        fp8_matmul_efficiency=e.get("fp8_matmul_efficiency"), kernel_source=e.get("kernel_source", ""),
        source=e["source"], date=str(e["date"]), notes=e.get("notes", ""))


def _model_record(e: dict):
    _require(e, "model")
    e = dict(e)
    e.pop("also", None)
    kind = e.pop("type")
    e["date"] = str(e["date"])
    if kind == "transformer":
        return Transformer(**e)
    if kind == "cnn":
        e["blocks"] = tuple(e.get("blocks", ()))
        return CNN(**e)
    raise MlsysimError(f"model {e['name']!r}: unknown type {kind!r} (transformer or cnn)")


@functools.cache
def _hardware() -> _Table:
    return _Table("hardware", [(_hardware_record(e), e.get("also", [])) for e in _read("hardware.yaml")])


@functools.cache
def _models() -> _Table:
    return _Table("model", [(_model_record(e), e.get("also", [])) for e in _read("models.yaml")])


@functools.cache
def _clusters() -> dict[str, _Table]:
    raw = _read("clusters.yaml")
    fabrics = []
    for e in raw["fabrics"]:
        _require(e, "fabric")
        fabrics.append((Fabric(name=e["name"], kind=e["kind"], port_Bps=e["port_Gbps"] * Gbps,
                               latency_s=e["latency_us"] * us, description=e.get("description", ""),
                               source=e["source"], date=str(e["date"])), e.get("also", [])))
    nodes = []
    for e in raw["nodes"]:
        _require(e, "node")
        nodes.append((Node(name=e["name"], accelerator=hardware(e["accelerator"]),
                           accelerators=e["accelerators"], host_memory_B=e["host_memory_GB"] * GB,
                           system_power_W=e["system_power_W"], nics=e["nics"], nic_Bps=e["nic_Gbps"] * Gbps,
                           local_storage_B=e.get("local_storage_TB", 0.0) * TB,
                           default_fabric=e.get("default_fabric", ""), cpu=e.get("cpu", ""),
                           source=e["source"], date=str(e["date"]), notes=e.get("notes", "")),
                      e.get("also", [])))
    tables = {"fabric": _Table("fabric", fabrics), "node": _Table("node", nodes)}
    presets = []
    for e in raw["clusters"]:
        _require(e, "cluster")
        presets.append((Cluster(name=e["name"], node=tables["node"].get(e["node"]), nodes=e["nodes"],
                                fabric=tables["fabric"].get(e["fabric"]), source=e["source"]),
                        e.get("also", [])))
    tables["cluster"] = _Table("cluster", presets)
    return tables


@functools.cache
def _grids() -> _Table:
    entries = []
    for e in _read("grids.yaml"):
        _require(e, "grid")
        entries.append((Grid(name=e["name"], region=e["region"], carbon_g_per_kWh=e["carbon_g_per_kWh"],
                             pue=e["pue"], price_usd_per_kWh=e.get("price_usd_per_kWh"),
                             wue_L_per_kWh=e.get("wue_L_per_kWh"), basis=e.get("basis", ""),
                             source=e["source"], date=str(e["date"])), e.get("also", [])))
    return _Table("grid", entries)


@functools.cache
def _optimizers() -> _Table:
    entries = []
    for e in _read("optimizers.yaml"):
        _require(e, "optimizer")
        entries.append((Optimizer(name=e["name"], full_states=e["full_states"], state_bytes=e["state_bytes"],
                                  master_bytes=e.get("master_bytes", 4.0), factored=e.get("factored", False),
                                  source=e["source"], date=str(e["date"])), e.get("also", [])))
    return _Table("optimizer", entries)


# --- public look-ups -------------------------------------------------------
def hardware(name) -> Hardware:
    """An accelerator by name, e.g. ``hardware("H100")``; a :class:`Hardware` passes through."""
    return name if isinstance(name, Hardware) else _hardware().get(name)


def model(name):
    """A workload by name, e.g. ``model("llama-3-8b")``; a record passes through."""
    return name if isinstance(name, (Transformer, CNN)) else _models().get(name)


def node(name) -> Node:
    return name if isinstance(name, Node) else _clusters()["node"].get(name)


def fabric(name) -> Fabric:
    return name if isinstance(name, Fabric) else _clusters()["fabric"].get(name)


def cluster(name, nodes: int | None = None, fabric: str | Fabric | None = None) -> Cluster:
    """A cluster: a named preset, or a node name with ``nodes`` and a ``fabric``.

    ``cluster("dgx-h100", nodes=128, fabric="ib-ndr")`` is 1,024 H100s on NDR
    InfiniBand; ``cluster("megatron-3072-a100")`` is a preset from a published run.
    Omitted ``nodes`` means one node (or the preset's count); omitted ``fabric``
    the node's default.
    """
    if isinstance(name, Cluster):
        base = name
    else:
        tables = _clusters()
        k = _key(name)
        if k in tables["cluster"].index:
            base = tables["cluster"].index[k]
        elif k in tables["node"].index:
            n = tables["node"].index[k]
            base = Cluster(name=n.name, node=n, nodes=1, fabric=globals()["fabric"](n.default_fabric))
        else:
            raise UnknownNameError("cluster or node", name, [*tables["cluster"].index, *tables["node"].index])
    if nodes is None and fabric is None:
        return base
    count = base.nodes if nodes is None else nodes
    fab = base.fabric if fabric is None else globals()["fabric"](fabric)
    return Cluster(name=f"{count} x {base.node.name} ({fab.name})", node=base.node, nodes=count, fabric=fab, source=base.source, notes=base.notes)


def grid(name) -> Grid:
    """An electricity grid by region name, e.g. ``grid("quebec")``."""
    return name if isinstance(name, Grid) else _grids().get(name)


def optimizer(name) -> Optimizer:
    """An optimizer's state layout by name (``adamw``, ``sgd``, ``sgd-momentum``, ``adafactor``, …)."""
    return name if isinstance(name, Optimizer) else _optimizers().get(name)


_KINDS = {
    "hardware": lambda: _hardware(), "models": lambda: _models(), "grids": lambda: _grids(),
    "clusters": lambda: _Table("cluster", [(r, []) for r in (*_clusters()["cluster"].records,
                                                             *_clusters()["node"].records)]),
    "nodes": lambda: _clusters()["node"],
    "fabrics": lambda: _clusters()["fabric"], "optimizers": lambda: _optimizers(),
}


def zoo(kind: str = "hardware", records: bool = False) -> list:
    """Names (or records) in one registry: hardware, models, clusters, nodes, fabrics, grids, optimizers.

    "clusters" lists the presets and then the nodes, since ``cluster()`` accepts both.
    """
    if kind not in _KINDS:
        raise UnknownNameError("registry", kind, _KINDS)
    table = _KINDS[kind]()
    return list(table.records) if records else table.names()
