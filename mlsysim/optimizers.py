"""Optimizer state and the bytes a training run keeps per parameter.

Mixed-precision training (Micikevicius et al. 2018) keeps 16-bit weights and
gradients plus an fp32 master copy and the optimizer's states. For AdamW that
is 2 + 2 + 12 = 16 bytes per parameter, the "model states" of ZeRO
(Rajbhandari et al., SC'20, §3): a 7.5B-parameter model needs 120 GB before
any activation.

The :class:`~mlsysim.workloads.Optimizer` record (an optimizer's state layout) is defined
with the other records below the registry, which loads it from ``data/optimizers.yaml``;
this module resolves names through the registry and counts the bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import MlsysimError
from .registry import optimizer as _lookup
from .units import bytes_per
from .workloads import Optimizer


@dataclass(frozen=True)
class TrainingState:
    """Bytes of the model states of one full (unsharded) replica."""

    weights_B: float
    grads_B: float
    master_B: float
    optimizer_B: float

    @property
    def total_B(self) -> float:
        return self.weights_B + self.grads_B + self.master_B + self.optimizer_B

    @property
    def checkpoint_B(self) -> float:
        """What a checkpoint of this state holds: weights, master copy, optimizer (no gradients)."""
        return self.weights_B + self.master_B + self.optimizer_B


def optimizer_state_elements(model, optimizer) -> float:
    """Optimizer state elements for ``model``: full-size states, or Adafactor's factored moments.

    Adafactor keeps, for a rows × cols matrix, rows + cols fp32 statistics, and a
    full-size second moment for every vector parameter (Shazeer & Stern 2018, Alg. 4).
    """
    opt = _optimizer(optimizer)
    n = model.params * opt.full_states
    if opt.factored:
        mats = model.weight_matrices()
        matrix_params = sum(r * c * k for r, c, k in mats)
        n += sum((r + c) * k for r, c, k in mats) + (model.params - matrix_params)
    return float(n)


def training_state(model, optimizer: str = "adamw", precision: str = "bf16",
                   grad_precision: str | None = None) -> TrainingState:
    """Model states of one replica: weights and gradients in ``precision``, an fp32
    master copy when ``precision`` is narrower than fp32, and the optimizer states.

    >>> import mlsysim as ms
    >>> s = training_state(ms.model("llama-2-7b"), "adamw", "bf16")
    >>> round(s.total_B / ms.model("llama-2-7b").params, 6)   # ZeRO's 2 + 2 + 12
    16.0
    """
    opt = _optimizer(optimizer)
    p = model.params
    w = bytes_per(precision)
    g = bytes_per(grad_precision or precision)
    master = opt.master_bytes * p if w < 4 else 0.0
    states = optimizer_state_elements(model, opt) * opt.state_bytes
    return TrainingState(weights_B=w * p, grads_B=g * p, master_B=master, optimizer_B=states)


def _optimizer(optimizer) -> Optimizer:
    if isinstance(optimizer, Optimizer):
        return optimizer
    if not isinstance(optimizer, str):
        raise MlsysimError(f"optimizer must be a name or an Optimizer, got {optimizer!r}")
    return _lookup(optimizer)
