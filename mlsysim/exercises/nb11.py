"""Exercises of notebook 11 (full-stack audit): the baseline of ``examples/llama3_70b_audit.yaml``."""
import math

from ..audit import Audit, audit
from ..registry import cluster
from . import Exercise

#: The scenario of examples/llama3_70b_audit.yaml (a test keeps the two equal).
BASELINE = dict(model="llama-3-70b", tokens="chinchilla", grid="virginia", global_batch=512, seq_len=8192,
                storage="lustre")
NODES = 64
#: The share of cost or time a proposal must save (exercise 11.5).
TARGET = 0.20


def baseline(nodes: int = NODES, **changes) -> Audit:
    kw = {**BASELINE, **changes}
    return audit(kw.pop("model"), cluster("dgx-h100", nodes=nodes, fabric="ib-ndr"), **kw)


def meets_target(proposal, base: Audit | None = None, target: float = TARGET) -> bool:
    """True when ``proposal`` is an audit of the same model, on at least the same tokens, under
    the same kernel-efficiency and failure assumptions, that cuts the baseline's cost or wall
    clock by at least ``target``. Changing an assumption (η, failure rate) is not a proposal."""
    base = base or baseline()
    if not isinstance(proposal, Audit):
        return False
    same = (proposal.model == base.model and proposal.tokens >= base.tokens * (1 - 1e-9)
            and proposal.step.efficiency == base.step.efficiency
            and math.isclose(proposal.goodput.mtbf_s * proposal.accelerators,   # failures per GPU-hour
                             base.goodput.mtbf_s * base.accelerators, rel_tol=1e-9))
    faster = proposal.days <= (1 - target) * base.days
    cheaper = proposal.cost_usd <= (1 - target) * base.cost_usd
    return bool(same and (faster or cheaper))


def _failures_doubled() -> float:
    return baseline(2 * NODES).metrics()["failures"]


def _sync_hours() -> float:
    return (baseline(strategy="sync").wall_s - baseline().wall_s) / 3600.0


EXERCISES = [
    Exercise("11.1", "How many times longer than the ideal time at peak is the baseline's wall clock?",
             lambda: baseline().wall_s / baseline().waterfall["ideal at peak"], rtol=0.02,
             hint="Audit.wall_s over Audit.waterfall['ideal at peak']; or 1 / effective MFU."),
    Exercise("11.2", "Moving the baseline from Virginia to Québec divides its total carbon by what factor?",
             lambda: baseline().carbon_kg / baseline(grid="quebec").carbon_kg, rtol=0.02,
             hint="Audit.carbon_kg counts operational and embodied carbon."),
    Exercise("11.3", "How many failures does the run expect on 128 nodes instead of 64?",
             _failures_doubled, rtol=0.03,
             hint="metrics()['failures'] is the wall clock over the cluster MTBF; both halve."),
    Exercise("11.4", "How many hours longer does the baseline take with synchronous checkpoints than with "
                     "the strategy the audit picks?", _sync_hours, rtol=0.05,
             hint="audit(..., strategy='sync').wall_s minus the baseline's wall_s, in hours."),
    Exercise("11.5", "Propose a change that cuts the baseline's cost or wall clock by at least 20 % and "
                     "answer with its audit", lambda: baseline(2 * NODES), accept=meets_target,
             hint="Answer with an Audit of the same model and tokens, efficiency and failure rate unchanged; "
                  "e.g. more nodes, or fp8 training."),
]
