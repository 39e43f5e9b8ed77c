"""Energy, carbon and water of a cluster that runs for a given time (notebook 07).

Power. An accelerator at utilisation u (0 = idle with work resident, 1 = at its TDP) follows the
linear power model of Fan, Weber & Barroso (ISCA 2007), measured for GPUs by nvidia-smi:

    P_acc(u)  = P_idle + (TDP − P_idle)·u
    P_node(u) = n·P_acc(u) + h·(P_rated − n·TDP) + n·P_net

P_rated is the node's rated system power (``Node.system_power_W``) and P_rated − n·TDP its rated
non-accelerator power (``Node.host_power_W``: CPUs, memory, NICs, fans, PSU losses). The host
really draws only a share h of that rating: an 8 × H100 node rated at 10.2 kW peaks at 8.48 kW
with its GPUs at 700 W (Latif et al. 2025), so h = (8,480 − 5,600) / 4,600 = 0.63. The same node
averages 76 % of its rating while training LLMs (Newkirk et al. 2025), which the model reproduces
at u = 0.84 — ``utilization="training"``. P_net is an optional share of the scale-out switches per
accelerator (0 unless given: no sourced switch power is in the registry).

Energy, carbon, water (Luccioni et al., JMLR 2023; Li et al. 2023; The Green Grid's WUE):

    E_IT = N_nodes·P_node·t          E = PUE·E_IT                 (kWh)
    C_op = E·CI                      location-based, CI in gCO2e/kWh of the grid
    C_emb = N_nodes·C_node·t / (L·8,760 h·f_L)   embodied share, L years at average use f_L
    W_on = WUE·E_IT                  W_off = EWIF·E               (litres)

``scope="accelerators"`` counts only n·P_acc(u), the convention of model cards and of the BLOOM
"dynamic" figure (GPU-hours × TDP). Every numeric argument accepts a NumPy array and broadcasts;
a list of grids adds a leading axis.

Worked numbers (tested): one DGX H100 at full load draws 8.48 kW, and 7.75 kW at the training
utilisation; 384 A100s for 2,820 h at their 400 W TDP use 433 MWh, 24.3 tCO2e on the French grid.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .tables import Record
from .errors import MlsysimError, UnknownNameError, check_positive
from .registry import _key, _read, cluster as _cluster, grid as _grid, hardware as _hardware
from .systems import Cluster, Grid, Hardware
from .units import fmt

SCOPES = ("node", "accelerators")
HOURS_PER_YEAR = 8760.0


# --- data ------------------------------------------------------------------
@dataclass(frozen=True, repr=False)
class Calibration(Record):
    """Host share h and training utilisation u derived from two measurements of an H100 node."""

    host_fraction: float
    training_utilization: float
    node: str
    peak_measured_W: float
    training_mean_W: float
    source: str

    def rows(self) -> list[tuple[str, str]]:
        return [("node", self.node), ("measured peak", fmt(self.peak_measured_W, "W")),
                ("measured training mean", fmt(self.training_mean_W, "W")),
                ("host share h of rated non-GPU power", f"{self.host_fraction:.3f}"),
                ("training utilisation u", f"{self.training_utilization:.3f}")]

    __repr__ = Record.__str__


@functools.cache
def _data() -> dict:
    raw = _read("sustainability.yaml")
    for section in ("idle_power", "embodied", "offsite_water"):
        for e in raw[section]:
            if not e.get("source") or not e.get("date"):
                raise MlsysimError(f"sustainability.yaml: an entry of {section} has no source or date")
    return {
        "idle": {_key(e["accelerator"]): float(e["idle_W"]) for e in raw["idle_power"]},
        "idle_fraction": float(raw["default_idle_fraction"]),
        "embodied": {_key(e["node"]): (float(e["server_kg"]), float(e["per_accelerator_kg"]))
                     for e in raw["embodied"]},
        "ewif": {_key(e["grid"]): float(e["L_per_kWh"]) for e in raw["offsite_water"]},
        "lifetime": (float(raw["embodied_lifetime_years"]), float(raw["embodied_lifetime_utilization"])),
        "measurements": raw["node_measurements"],
    }


def idle_power_W(hardware) -> float:
    """Idle draw of an accelerator with work resident (sourced reading, else 20 % of TDP).

    >>> idle_power_W("h100")
    140.0
    """
    hw = _hardware(hardware)
    d = _data()
    if hw.tdp_W is None:
        raise MlsysimError(f"{hw.name} has no TDP in the registry, so its power cannot be modelled")
    return d["idle"].get(_key(hw.name), d["idle_fraction"] * hw.tdp_W)


@functools.cache
def calibration() -> Calibration:
    """Derive h and the training utilisation from the measured H100 node (see the module docstring).

    >>> c = calibration()
    >>> round(c.host_fraction, 3), round(c.training_utilization, 3)
    (0.626, 0.838)
    """
    m = _data()["measurements"]
    node = _cluster(m["node"]).node
    n, tdp = node.accelerators, node.accelerator.tdp_W
    host_rated = node.system_power_W - n * tdp
    h = (m["peak_measured_W"] - n * tdp) / host_rated
    mean = m["training_mean_fraction_of_rated"] * node.system_power_W
    idle = idle_power_W(node.accelerator)
    u = ((mean - h * host_rated) / n - idle) / (tdp - idle)
    return Calibration(host_fraction=h, training_utilization=u, node=node.name,
                       peak_measured_W=float(m["peak_measured_W"]), training_mean_W=mean,
                       source=f"{m['peak_source']}; {m['training_source']}")


def node_embodied_kg(node) -> float:
    """Manufacturing carbon of one node (server + accelerators), kgCO2e.

    >>> node_embodied_kg("dgx-a100")   # Luccioni et al.: 2,500 + 8 × 150
    3700.0
    """
    nd = _cluster(node).node
    table = _data()["embodied"]
    if _key(nd.name) not in table:
        raise UnknownNameError(f"node with a sourced embodied-carbon estimate (pass embodied_kg_per_node= "
                               f"for {nd.name})", nd.name, table)
    server, per_acc = table[_key(nd.name)]
    return server + nd.accelerators * per_acc


def offsite_water_L_per_kWh(grid) -> float:
    """Water consumed to generate one kWh on this grid (EWIF); NaN where none is sourced."""
    return _data()["ewif"].get(_key(_grid(grid).name), math.nan)


# --- power -----------------------------------------------------------------
def _utilization(u):
    if isinstance(u, str):
        if u != "training":
            raise UnknownNameError("utilization preset", u, ["training"])
        return calibration().training_utilization
    if type(u) in (int, float) and 0.0 <= u <= 1.0:
        return float(u)
    check_positive("utilization", u, allow_zero=True)
    a = np.asarray(u, dtype=float)
    if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a > 1):
        raise MlsysimError(f"utilization must lie in [0, 1] (0 idle, 1 at TDP) or be 'training', got {u!r}")
    return float(a) if a.ndim == 0 else a


def _num(x, name: str):
    check_positive(name, x, allow_zero=True)
    return float(x) if np.ndim(x) == 0 else np.asarray(x, dtype=float)


def accelerator_power_W(hardware, utilization=1.0):
    """P_acc(u) = P_idle + (TDP − P_idle)·u for one accelerator, watts.

    >>> accelerator_power_W("h100", 1.0), accelerator_power_W("h100", 0.5)
    (700.0, 420.0)
    """
    hw = _hardware(hardware)
    idle = idle_power_W(hw)
    return idle + (hw.tdp_W - idle) * _utilization(utilization)


def node_power_W(cluster, utilization=1.0, scope: str = "node", network_W_per_accelerator=0.0):
    """IT power of one node of ``cluster`` (a cluster, preset or node name), watts.

    >>> round(node_power_W("dgx-h100", 1.0)), round(node_power_W("dgx-h100", "training"))
    (8480, 7752)
    """
    c = _cluster(cluster)
    if scope not in SCOPES:
        raise UnknownNameError("power scope", scope, SCOPES)
    net = _num(network_W_per_accelerator, "network_W_per_accelerator")
    n = c.node.accelerators
    acc = n * accelerator_power_W(c.accelerator, utilization)
    if scope == "accelerators":
        return acc
    return acc + calibration().host_fraction * c.node.host_power_W + n * net


def it_power_W(cluster, utilization=1.0, scope: str = "node", network_W_per_accelerator=0.0):
    """IT power of the whole cluster (all nodes), watts."""
    c = _cluster(cluster)
    return c.nodes * node_power_W(c, utilization, scope, network_W_per_accelerator)


# --- energy and carbon -----------------------------------------------------
def energy_kwh(cluster, hours, utilization=1.0, pue=1.0, scope: str = "node",
               network_W_per_accelerator=0.0):
    """Energy of ``cluster`` running ``hours`` at ``utilization``: PUE · N_nodes · P_node · t, kWh.

    With the default ``pue=1`` this is IT energy; pass a grid's PUE for the energy at the meter.

    >>> round(energy_kwh("bloom-384-a100", hours=2820.3, scope="accelerators"))   # BLOOM: 433 MWh
    433198
    """
    hours = _num(hours, "hours")
    pue = _pue(pue)
    return pue * it_power_W(cluster, utilization, scope, network_W_per_accelerator) * hours / 1e3


def _pue(pue):
    if type(pue) in (int, float) and 1.0 <= pue < math.inf:
        return float(pue)
    check_positive("pue", pue)
    a = np.asarray(pue, dtype=float)
    if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a < 1.0):
        raise MlsysimError(f"pue must be >= 1 (facility energy / IT energy), got {pue!r}")
    return float(a) if a.ndim == 0 else a


def _grids(grid):
    """(names, records) for one grid or a list of grids."""
    if isinstance(grid, (str, Grid)):
        return _grid(grid).name, [_grid(grid)]
    gs = [_grid(g) for g in grid]
    if not gs:
        raise MlsysimError("grid list must not be empty")
    return tuple(g.name for g in gs), gs


def _ndim(*values) -> int:
    """Number of axes of the broadcast of ``values`` (the axes that follow a grid axis)."""
    return len(np.broadcast_shapes(*(np.shape(v) for v in values if v is not None)))


def _per_grid(values: list[float], one: bool, ndim: int):
    """One float for a single grid, else an array with a leading grid axis broadcastable to ``ndim``."""
    if one:
        return values[0]
    return np.asarray(values, dtype=float).reshape((-1,) + (1,) * ndim)


def emissions_kg(energy_kWh, grid):
    """Location-based carbon of ``energy_kWh`` drawn from ``grid`` (at the meter), kgCO2e.

    >>> [emissions_kg(1000, g) for g in ("montreal", "paris", "ashburn", "warsaw")]
    [2.0, 34.0, 322.0, 723.0]
    """
    names, gs = _grids(grid)
    energy = _num(energy_kWh, "energy_kWh")
    return energy * _per_grid([g.carbon_g_per_kWh for g in gs], isinstance(names, str), np.ndim(energy)) / 1e3


def carbon_kg(cluster, hours, grid, utilization=1.0, pue=None, scope: str = "node",
              network_W_per_accelerator=0.0):
    """Location-based operational carbon, kgCO2e: E_IT · PUE · CI / 1000.

    ``pue`` defaults to the grid's typical PUE. A list of grids adds a leading axis.

    >>> round(carbon_kg("bloom-384-a100", hours=2820.3, grid="france", pue=1.0,
    ...                 scope="accelerators") / 1e3, 1)     # tCO2e on France's 2023 grid
    24.3
    """
    names, gs = _grids(grid)
    one = isinstance(names, str)
    it = energy_kwh(cluster, hours, utilization, 1.0, scope, network_W_per_accelerator)
    nd = _ndim(it, pue)
    p = _pue(pue) if pue is not None else _per_grid([g.pue for g in gs], one, nd)
    ci = _per_grid([g.carbon_g_per_kWh for g in gs], one, nd)
    return it * p * ci / 1e3


def embodied_kg(cluster, hours, lifetime_years=None, lifetime_utilization=None,
                embodied_kg_per_node=None):
    """Share of the nodes' manufacturing carbon used by ``hours`` of work, kgCO2e.

    C_emb = N_nodes · C_node · t / (L · 8,760 · f_L), with L = 6 years and f_L = 0.85 by default
    (Luccioni et al. 2023).

    >>> round(embodied_kg("bloom-384-a100", hours=2820.3) / 1e3, 1)   # BLOOM: 11.2 t
    11.2
    """
    c = _cluster(cluster)
    hours = _num(hours, "hours")
    years_d, use_d = _data()["lifetime"]
    years = _positive(lifetime_years if lifetime_years is not None else years_d, "lifetime_years")
    use = lifetime_utilization if lifetime_utilization is not None else use_d
    _fraction(use, "lifetime_utilization")
    per_node = (node_embodied_kg(c) if embodied_kg_per_node is None
                else _num(embodied_kg_per_node, "embodied_kg_per_node"))
    return c.nodes * per_node * hours / (years * HOURS_PER_YEAR * use)



def _positive(x, name):
    check_positive(name, x)
    return float(x) if np.ndim(x) == 0 else np.asarray(x, dtype=float)


def _fraction(x, name):
    if type(x) in (int, float) and 0 < x <= 1:
        return
    a = np.asarray(x, dtype=float)
    if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a <= 0) or np.any(a > 1):
        raise MlsysimError(f"{name} must lie in (0, 1], got {x!r}")


# --- the whole footprint ---------------------------------------------------
@dataclass(frozen=True, repr=False)
class Footprint(Record):
    """Result of :func:`footprint`: energy (kWh), carbon (kgCO2e) and water (litres).

    Scalar inputs give floats; arrays (or a list of grids, as a leading axis) give arrays.
    ``water_offsite_L`` is NaN where no water factor of electricity is sourced for the grid.
    """

    cluster: str
    grid: object                 # name, or tuple of names
    scope: str
    hours: object
    utilization: object
    it_power_W: object
    it_energy_kWh: object
    pue: object
    energy_kWh: object           # at the meter: PUE × IT energy
    carbon_g_per_kWh: object
    operational_kg: object
    embodied_kg: object
    wue_L_per_kWh: object
    water_onsite_L: object
    offsite_L_per_kWh: object
    water_offsite_L: object

    @property
    def total_kg(self):
        """Operational plus embodied carbon, kgCO2e."""
        return self.operational_kg + self.embodied_kg

    @property
    def embodied_share(self):
        return self.embodied_kg / self.total_kg

    def rows(self) -> list[tuple[str, str]]:
        if np.ndim(self.total_kg):
            return [("shape", str(np.shape(self.total_kg)))]
        off = (fmt(self.water_offsite_L, "L") if not math.isnan(self.water_offsite_L)
               else f"not sourced for {self.grid}")
        return [("cluster", self.cluster), ("grid", str(self.grid)), ("duration", fmt(self.hours * 3600, "s")),
                ("utilisation", f"{self.utilization:.2f}"), ("IT power", fmt(self.it_power_W, "W")),
                ("IT energy", fmt(self.it_energy_kWh * 1e3, "Wh")), ("PUE", f"{self.pue:.2f}"),
                ("energy at the meter", fmt(self.energy_kWh * 1e3, "Wh")),
                ("grid intensity", f"{self.carbon_g_per_kWh:.4g} gCO2e/kWh"),
                ("operational carbon", fmt_carbon(self.operational_kg)),
                ("embodied carbon", fmt_carbon(self.embodied_kg)), ("total carbon", fmt_carbon(self.total_kg)),
                ("water on site", fmt(self.water_onsite_L, "L")), ("water off site", off)]

    __repr__ = Record.__str__


def fmt_carbon(kg, unit: str = "CO2e") -> str:
    """Carbon mass for a table: kg below a tonne, 3 significant figures, thousands separated.

    >>> fmt_carbon(412.0), fmt_carbon(24_259.0), fmt_carbon(3_514_149.0)
    ('412 kgCO2e', '24.3 tCO2e', '3,514 tCO2e')
    """
    kg = float(kg)
    if math.isnan(kg):
        return "n/a"
    if abs(kg) < 1e3:
        return f"{kg:.3g} kg{unit}"
    t = kg / 1e3
    return f"{t:,.0f} t{unit}" if abs(t) >= 1e3 else f"{t:.3g} t{unit}"


def footprint(cluster, hours, grid, utilization="training", pue=None, scope: str = "node",
              network_W_per_accelerator=0.0, wue_L_per_kWh=None, offsite_L_per_kWh=None,
              lifetime_years=None, lifetime_utilization=None, embodied_kg_per_node=None) -> Footprint:
    """Energy, operational and embodied carbon and water of ``cluster`` running ``hours`` on ``grid``.

    Defaults: the training utilisation, the grid's PUE and WUE, its sourced off-site water factor
    (NaN where none), and the embodied carbon of the node amortised over 6 years at 85 % use.

    >>> f = footprint("dgx-h100", hours=24, grid="quebec")
    >>> round(f.it_energy_kWh), round(f.operational_kg, 2), round(f.embodied_kg, 2)
    (186, 0.41, 1.99)
    """
    c = _cluster(cluster)
    names, gs = _grids(grid)
    one = isinstance(names, str)
    u = _utilization(utilization)
    power = it_power_W(c, u, scope, network_W_per_accelerator)
    hours = _num(hours, "hours")
    it = power * hours / 1e3
    nd = _ndim(it, pue, wue_L_per_kWh, offsite_L_per_kWh, lifetime_years, lifetime_utilization,
               embodied_kg_per_node)
    p = _pue(pue) if pue is not None else _per_grid([g.pue for g in gs], one, nd)
    ci = _per_grid([g.carbon_g_per_kWh for g in gs], one, nd)
    if wue_L_per_kWh is not None:
        wue = _num(wue_L_per_kWh, "wue_L_per_kWh")
    else:
        missing = [g.name for g in gs if g.wue_L_per_kWh is None]
        if missing:
            raise MlsysimError(f"grid {', '.join(missing)} has no WUE in the registry; pass wue_L_per_kWh=")
        wue = _per_grid([g.wue_L_per_kWh for g in gs], one, nd)
    ewif = (_num(offsite_L_per_kWh, "offsite_L_per_kWh") if offsite_L_per_kWh is not None
            else _per_grid([offsite_water_L_per_kWh(g) for g in gs], one, nd))
    energy = it * p
    emb = embodied_kg(c, hours, lifetime_years, lifetime_utilization, embodied_kg_per_node)
    return Footprint(cluster=c.name, grid=names, scope=scope, hours=hours, utilization=u, it_power_W=power,
                     it_energy_kWh=it, pue=p, energy_kWh=energy, carbon_g_per_kWh=ci,
                     operational_kg=energy * ci / 1e3, embodied_kg=emb + 0.0 * energy, wue_L_per_kWh=wue,
                     water_onsite_L=wue * it, offsite_L_per_kWh=ewif, water_offsite_L=ewif * energy)

