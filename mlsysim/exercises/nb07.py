"""Exercises of notebook 07 (geography): one training run in four cloud regions."""
from ..economics import tco, training_run
from ..registry import cluster
from ..sustainability import footprint
from . import Exercise

MODEL, TOKENS, MFU = "llama-3-70b", 15e12, 0.40
REGIONS = ["Montreal", "Paris", "Ashburn", "Warsaw"]


def _run():
    c = cluster("dgx-h100", nodes=128)
    return c, training_run(MODEL, c, TOKENS, mfu=MFU)


def _footprint():
    c, run = _run()
    return footprint(c, hours=run.hours, grid=REGIONS)


def _breakeven_price() -> float:
    """Carbon price (USD/t) at which the run costs the same in Paris and in Ashburn."""
    c, run = _run()
    t = tco(c, days=run.days, grid=["Paris", "Ashburn"])
    return float((t.total_usd[0] - t.total_usd[1]) / ((t.carbon_kg[1] - t.carbon_kg[0]) / 1e3))


def _days_in_montreal() -> float:
    """Days the cluster may run in Montréal before its total carbon equals the whole run in Warsaw."""
    c, run = _run()
    f = _footprint()
    per_day_montreal = f.total_kg[0] / run.days
    return float(f.total_kg[3] / per_day_montreal)


EXERCISES = [
    Exercise("07.1", "Total carbon (operational + embodied) of the run in Warsaw divided by that in Montréal",
             lambda: float(_footprint().total_kg[3] / _footprint().total_kg[0]), rtol=0.02,
             hint="footprint(..., grid=[...]).total_kg; embodied carbon is the same everywhere."),
    Exercise("07.2", "Carbon price (USD per tCO2e) at which the run costs the same in Paris and in Ashburn",
             _breakeven_price, rtol=0.03,
             hint="Divide the cost gap at zero carbon price by the carbon gap in tonnes."),
    Exercise("07.3", "Share of the run's total carbon in Montréal that is embodied (a fraction)",
             lambda: float(_footprint().embodied_share[0]), rtol=0.02,
             hint="Footprint.embodied_share."),
    Exercise("07.4", "Days the same cluster could run in Montréal before emitting as much as the whole run "
                     "in Warsaw", _days_in_montreal, rtol=0.03,
             hint="Total carbon in Warsaw divided by Montréal's total carbon per day."),
]
