"""What a cluster costs to own and run, what a training run costs, and what a token costs (07, 08).

Total cost of ownership over ``days`` of a cluster bought for K (nodes × node price × (1 + network
share)), depreciated straight-line over Y years to a residual value r·K (Barroso, Clidaras & Hölzle,
*The Datacenter as a Computer*, 3rd ed., ch. 6):

    depreciation = (1 − r)·K·d / (365·Y)        maintenance = m·K·d / 365
    energy       = E·p                          E = PUE·E_IT at the grid's price p (USD/kWh)
    carbon       = c·C_op / 1000                c: carbon price (USD per tCO2e), C_op in kg
    TCO          = depreciation + maintenance + energy + carbon

E_IT and C_op come from :mod:`mlsysim.sustainability`. The rental alternative is accelerator-hours
× a list price per accelerator-hour. A training run of D tokens on n accelerators with dense peak
P at model-FLOPs utilisation MFU lasts (Kaplan et al. 2020; Narayanan et al. 2021, eq. 4)

    T = 3·D·F_fwd / (n·P·MFU),   F_fwd = 2·N_matmul + attention FLOP at the mean causal context

(3 × forward for forward plus backward; 6·N·D when attention is negligible). A service that
costs H USD per hour and produces R tokens per second costs 1e6·H / (3600·R) per million tokens.

Worked numbers (tested): DeepSeek-V3's 2.788 M H800-hours at $2 cost $5.576 M; 180 K GPU-hours
per trillion tokens on 2,048 GPUs take 3.66 days.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .errors import MlsysimError, UnknownNameError, check_fraction, check_integer, check_positive
from .registry import _key, _read, cluster as _cluster, grid as _grid, model as _model
from .sustainability import _grids, _ndim, _num, _per_grid, _pue, _utilization, it_power_W
from .tables import Record
from .units import fmt

DAYS_PER_YEAR = 365.0


# --- data ------------------------------------------------------------------
@dataclass(frozen=True)
class CloudOffer:
    """A rental price: ``usd_per_hour`` for an instance of ``accelerators`` devices."""

    name: str
    accelerator: str
    accelerators: int
    usd_per_hour: float
    source: str
    date: str

    @property
    def usd_per_accelerator_hour(self) -> float:
        return self.usd_per_hour / self.accelerators


@functools.cache
def _data() -> dict:
    raw = _read("economics.yaml")
    for e in raw["node_prices"] + raw["cloud"]:
        if not e.get("source") or not e.get("date"):
            raise MlsysimError(f"economics.yaml: entry {e.get('node', e.get('name'))!r} has no source or date")
    offers = {_key(e["name"]): CloudOffer(name=e["name"], accelerator=e["accelerator"],
                                          accelerators=int(e["accelerators"]),
                                          usd_per_hour=float(e["usd_per_hour"]), source=e["source"],
                                          date=str(e["date"])) for e in raw["cloud"]}
    return {"node_price": {_key(e["node"]): float(e["price_usd"]) for e in raw["node_prices"]},
            "network": float(raw["network_fraction"]),
            "maintenance": float(raw["maintenance_fraction_per_year"]),
            "years": float(raw["depreciation_years"]), "cloud": offers,
            "basis": {k: raw[f"{k}_basis"] for k in ("network", "maintenance", "depreciation")}}


def assumptions():
    """The default economic inputs of :func:`tco` and where they come from (full sources in
    ``data/economics.yaml``), as a table."""
    from .tables import table
    d = _data()
    return table([{"input": "scale-out network, share of node price", "value": f"{d['network']:.0%}",
                   "basis": d["basis"]["network"]},
                  {"input": "maintenance per year, share of price", "value": f"{d['maintenance']:.0%}",
                   "basis": d["basis"]["maintenance"]},
                  {"input": "depreciation life", "value": f"{d['years']:g} years",
                   "basis": d["basis"]["depreciation"]}], title="Default inputs of tco()")


def cloud_offer(name) -> CloudOffer:
    """A sourced rental price by name (the names: ``cloud_offers()``).

    >>> cloud_offer("aws-p5").usd_per_accelerator_hour
    12.29
    """
    if isinstance(name, CloudOffer):
        return name
    table = _data()["cloud"]
    try:
        return table[_key(name)]
    except KeyError:
        raise UnknownNameError("cloud offer", name, [o.name for o in table.values()]) from None


def cloud_offers() -> list[str]:
    return [o.name for o in _data()["cloud"].values()]


def node_price_usd(cluster) -> float:
    """Purchase price of one node of ``cluster``, USD (sourced list or reported price)."""
    node = _cluster(cluster).node
    table = _data()["node_price"]
    if _key(node.name) not in table:
        raise UnknownNameError(f"node with a sourced price (pass node_price_usd= for {node.name})",
                               node.name, table)
    return table[_key(node.name)]


def capex_usd(cluster, node_price_usd=None, network_fraction=None):
    """Purchase price of the cluster: nodes × node price × (1 + network share), USD.

    >>> capex_usd("dgx-h100") / 1e3   # one DGX H100 and its share of the fabric, k$
    299.7
    """
    c = _cluster(cluster)
    price = _price(node_price_usd, "node_price_usd") if node_price_usd is not None else globals()[
        "node_price_usd"](c)
    net = _data()["network"] if network_fraction is None else _price(network_fraction, "network_fraction")
    return c.nodes * price * (1.0 + net)


def _price(x, name):
    check_positive(name, x, allow_zero=True)
    return float(x) if np.ndim(x) == 0 else np.asarray(x, dtype=float)


# --- total cost of ownership -------------------------------------------------
@dataclass(frozen=True, repr=False)
class TCO(Record):
    """Result of :func:`tco`: costs in USD over ``days``; energy in kWh; carbon in kgCO2e."""

    cluster: str
    grid: object
    days: object
    accelerators: int
    capex_usd: object
    depreciation_usd: object
    maintenance_usd: object
    energy_kWh: object
    price_usd_per_kWh: object
    energy_usd: object
    carbon_kg: object
    carbon_price_usd_per_t: object
    carbon_usd: object

    @property
    def total_usd(self):
        return self.depreciation_usd + self.maintenance_usd + self.energy_usd + self.carbon_usd

    @property
    def accelerator_hours(self):
        return self.accelerators * self.days * 24.0

    @property
    def usd_per_accelerator_hour(self):
        return self.total_usd / self.accelerator_hours

    @property
    def usd_per_hour(self):
        return self.total_usd / (self.days * 24.0)

    @property
    def energy_share(self):
        """Fraction of the TCO paid for electricity."""
        return self.energy_usd / self.total_usd

    def rows(self) -> list[tuple[str, str]]:
        if np.ndim(self.total_usd):
            return [("shape", str(np.shape(self.total_usd)))]
        return [("cluster", self.cluster), ("grid", str(self.grid)), ("duration", fmt(self.days * 86400, "s")),
                ("purchase price", _usd(self.capex_usd)), ("depreciation", _usd(self.depreciation_usd)),
                ("maintenance", _usd(self.maintenance_usd)),
                ("energy", f"{fmt(self.energy_kWh * 1e3, 'Wh')} at ${self.price_usd_per_kWh:.3g}/kWh"),
                ("electricity", _usd(self.energy_usd)),
                ("carbon", f"{self.carbon_kg / 1e3:.3g} tCO2e at ${self.carbon_price_usd_per_t:.3g}/t"),
                ("carbon cost", _usd(self.carbon_usd)), ("total", _usd(self.total_usd)),
                ("per accelerator-hour", f"${self.usd_per_accelerator_hour:.3g}")]

    __repr__ = Record.__str__


def _usd(x) -> str:
    return "$" + fmt(x, "", 3)


def tco(cluster, days, grid, utilization="training", years=None, residual_fraction=0.0,
        maintenance_fraction=None, carbon_price_usd_per_t=0.0, price_usd_per_kWh=None, pue=None,
        node_price_usd=None, network_fraction=None) -> TCO:
    """Total cost of owning and running ``cluster`` for ``days`` on ``grid`` (see the module docstring).

    Defaults: the training utilisation, the grid's PUE and electricity price, 5-year depreciation to
    zero, a support contract of 20 % of the price per year, no carbon price. A list of grids adds a
    leading axis; numeric arguments broadcast.

    >>> t = tco("dgx-h100", days=365, grid="virginia")
    >>> round(t.depreciation_usd), round(t.energy_usd), round(t.usd_per_accelerator_hour, 2)
    (59940, 6663, 1.81)
    """
    c = _cluster(cluster)
    days = _num(days, "days")
    names, gs = _grids(grid)
    one = isinstance(names, str)
    d = _data()
    years = float(d["years"]) if years is None else _positive(years, "years")
    if not (type(residual_fraction) in (int, float) and 0 <= residual_fraction < 1):
        check_positive("residual_fraction", residual_fraction, allow_zero=True)
        a = np.asarray(residual_fraction, dtype=float)
        if not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a >= 1):
            raise MlsysimError(f"residual_fraction must lie in [0, 1), got {residual_fraction!r}")
    m = d["maintenance"] if maintenance_fraction is None else _price(maintenance_fraction, "maintenance_fraction")
    carbon_price = _price(carbon_price_usd_per_t, "carbon_price_usd_per_t")
    k = capex_usd(c, node_price_usd, network_fraction)
    u = _utilization(utilization)
    it = it_power_W(c, u) * days * 24.0 / 1e3
    nd = _ndim(it, k, m, years, residual_fraction, carbon_price, price_usd_per_kWh, pue)
    p = _pue(pue) if pue is not None else _per_grid([g.pue for g in gs], one, nd)
    if price_usd_per_kWh is not None:
        price = _price(price_usd_per_kWh, "price_usd_per_kWh")
    else:
        missing = [g.name for g in gs if g.price_usd_per_kWh is None]
        if missing:
            raise MlsysimError(f"grid {', '.join(missing)} has no sourced electricity price; "
                               f"pass price_usd_per_kWh=")
        price = _per_grid([g.price_usd_per_kWh for g in gs], one, nd)
    ci = _per_grid([g.carbon_g_per_kWh for g in gs], one, nd)
    energy = it * p
    carbon = energy * ci / 1e3
    share = days / DAYS_PER_YEAR
    zero = 0.0 * energy
    return TCO(cluster=c.name, grid=names, days=days, accelerators=c.accelerators, capex_usd=k + zero,
               depreciation_usd=(1.0 - residual_fraction) * k * share / years + zero,
               maintenance_usd=m * k * share + zero, energy_kWh=energy, price_usd_per_kWh=price,
               energy_usd=energy * price, carbon_kg=carbon, carbon_price_usd_per_t=carbon_price,
               carbon_usd=carbon * carbon_price / 1e3)


def _positive(x, name):
    check_positive(name, x)
    return float(x) if np.ndim(x) == 0 else np.asarray(x, dtype=float)


# --- renting instead of owning ----------------------------------------------
def rental_usd(accelerator_hours, offer):
    """Cost of renting ``accelerator_hours`` at a cloud offer (name) or a price per accelerator-hour.

    >>> rental_usd(2.788e6, "deepseek-h800") / 1e6   # DeepSeek-V3: $5.576 M
    5.576
    """
    hours = _num(accelerator_hours, "accelerator_hours")
    if isinstance(offer, (str, CloudOffer)):
        rate = cloud_offer(offer).usd_per_accelerator_hour
    else:
        rate = _price(offer, "offer (USD per accelerator-hour)")
    return hours * rate


# --- a training run ----------------------------------------------------------
@dataclass(frozen=True, repr=False)
class TrainingRun(Record):
    """Result of :func:`training_run`: the work of a run and how long it keeps ``cluster`` busy."""

    model: str
    cluster: str
    tokens: object
    flops: object
    mfu: object
    precision: str
    accelerators: int
    hours: object

    @property
    def days(self):
        return self.hours / 24.0

    @property
    def accelerator_hours(self):
        return self.hours * self.accelerators

    def rows(self) -> list[tuple[str, str]]:
        if np.ndim(self.hours):
            return [("shape", str(np.shape(self.hours)))]
        return [("model", self.model), ("cluster", self.cluster), ("tokens", fmt(self.tokens)),
                ("work", f"{self.flops:.3g} FLOP"), ("MFU", f"{self.mfu:.0%}"),
                ("duration", fmt(self.hours * 3600, "s")),
                ("accelerator-hours", fmt(self.accelerator_hours))]

    __repr__ = Record.__str__


def training_flops(model, tokens, seq_len=4096):
    """Model FLOPs of training on ``tokens`` tokens: 3 · D · (2·N_matmul + attention at (s+1)/2 keys).

    >>> round(training_flops("llama-3-70b", 15e12) / 1e24, 2)    # 6·N_matmul·D = 6.26e24 plus attention
    6.5
    """
    m = _model(model)
    tokens = _num(tokens, "tokens")
    check_integer("seq_len", seq_len)
    return 3.0 * tokens * m.flops_per_token((seq_len + 1) / 2.0)


def training_run(model, cluster, tokens, mfu=0.4, precision: str = "bf16", seq_len=4096) -> TrainingRun:
    """How long ``cluster`` needs to train ``model`` on ``tokens`` at model-FLOPs utilisation ``mfu``.

    A first-order identity (no parallelism layout, bubbles or failures): T = FLOP / (n·P·MFU).

    >>> r = training_run("llama-3-70b", "llama3-24k-h100", 15e12, mfu=0.4)
    >>> round(r.days, 1), round(r.accelerator_hours / 1e6, 2)
    (7.7, 4.56)
    """
    c = _cluster(cluster)
    check_fraction("mfu", mfu)
    check_positive("tokens", tokens)           # a token budget: 1.41e12 need not be whole
    flops = training_flops(model, tokens, seq_len)
    peak = c.accelerator.peak(precision)
    hours = flops / (c.accelerators * peak * mfu) / 3600.0
    return TrainingRun(model=_model(model).name, cluster=c.name, tokens=tokens, flops=flops, mfu=mfu,
                       precision=precision, accelerators=c.accelerators, hours=hours)


# --- serving -----------------------------------------------------------------
def usd_per_million_tokens(usd_per_hour, tokens_per_s):
    """Cost of one million tokens from a service costing ``usd_per_hour`` that emits ``tokens_per_s``.

    >>> round(usd_per_million_tokens(98.32, 10_000), 3)    # one p5 instance at 10k tokens/s
    2.731
    """
    usd = _price(usd_per_hour, "usd_per_hour")
    rate = _num(tokens_per_s, "tokens_per_s")
    check_positive("tokens_per_s", rate)
    return usd * 1e6 / (rate * 3600.0)
