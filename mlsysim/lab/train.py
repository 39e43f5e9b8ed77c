"""A small training run whose whole state can be checkpointed: a character-level MLP language model.

The model (Bengio et al., JMLR 2003, without the direct connections) reads ``context``
characters, embeds each in ``embed`` dimensions, passes the concatenation through
``depth`` tanh layers of ``width`` units and predicts the next character with a
softmax. It trains with AdamW (Loshchilov & Hutter, ICLR 2019) under a linear
warm-up and cosine decay of the learning rate, on Shakespeare's sonnets (shipped
with the package), in mini-batches drawn from a per-epoch shuffle of every window
of the text.

Everything training needs to continue exactly is in :meth:`Trainer.state`: the
step, the weights, AdamW's two moments, the schedule's settings, and the data
loader's epoch, position, shuffle order and random generator. A run restored from
that state produces the same losses, bit for bit, as a run that never stopped
(same machine, same NumPy and BLAS threads).

Size: 12 bytes per parameter (fp32 weights, m and v). :meth:`LabConfig.for_size`
picks the width for a target checkpoint size, from kilobytes to gigabytes.

>>> t = Trainer(LabConfig(width=32, depth=1, batch=16, steps=40, seed=0))
>>> losses = [t.step() for _ in range(40)]
>>> losses[-1] < losses[0]          # it learns
True
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources

import numpy as np

from ..errors import MlsysimError

BYTES_PER_PARAM = 12  # fp32 weights + AdamW m + v


@cache
def corpus() -> tuple[str, np.ndarray, str]:
    """(text, characters as int32 indices, alphabet) of the shipped text."""
    text = resources.files("mlsysim.lab").joinpath("data/sonnets.txt").read_text(encoding="utf-8")
    alphabet = "".join(sorted(set(text)))
    index = {c: i for i, c in enumerate(alphabet)}
    return text, np.array([index[c] for c in text], dtype=np.int32), alphabet


@dataclass(frozen=True)
class LabConfig:
    """Shape and hyper-parameters of the run (all plain scalars, stored in every checkpoint)."""

    width: int = 128
    depth: int = 2
    embed: int = 16
    context: int = 8
    batch: int = 32
    lr: float = 3e-3
    min_lr: float = 3e-4
    warmup: int = 10
    steps: int = 200
    weight_decay: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    seed: int = 0

    def __post_init__(self):
        for k in ("width", "depth", "embed", "context", "batch", "steps"):
            v = getattr(self, k)
            if type(v) is not int or v < 1:
                raise MlsysimError(f"LabConfig.{k} must be a positive integer, got {v!r}")
        if not 0 <= self.warmup <= self.steps:
            raise MlsysimError(f"LabConfig.warmup must be between 0 and steps = {self.steps}, got {self.warmup}")

    @property
    def vocab(self) -> int:
        return len(corpus()[2])

    @property
    def params(self) -> int:
        """Parameters: embedding, first layer, depth − 1 square layers, output layer (biases included)."""
        v, w = self.vocab, self.width
        return v * self.embed + (self.context * self.embed + 1) * w + (self.depth - 1) * (w + 1) * w + (w + 1) * v

    @property
    def state_B(self) -> int:
        """Bytes of the arrays of a checkpoint: weights, m and v (the loader's order adds a few KB)."""
        return BYTES_PER_PARAM * self.params

    @classmethod
    def for_size(cls, size_B: float, depth: int = 2, **kw) -> "LabConfig":
        """The config whose weights + AdamW moments take about ``size_B`` bytes (width ≥ 4).

        >>> c = LabConfig.for_size(64e6)
        >>> round(c.state_B / 64e6, 2)
        1.0
        """
        if not size_B > 0:
            raise MlsysimError(f"size_B must be positive, got {size_B!r}")
        base = cls(width=4, depth=depth, **kw)
        v, e, k = base.vocab, base.embed, base.context
        # params(w) = (depth−1)·w² + (k·e + 1 + depth − 1 + v)·w + v·e + v
        a, b, c = depth - 1, k * e + depth + v, v * e + v - size_B / BYTES_PER_PARAM
        w = -c / b if a == 0 else (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)
        return cls(width=max(4, int(round(w))), depth=depth, **kw)


def learning_rate(step: int, cfg: LabConfig) -> float:
    """Linear warm-up to ``lr`` over ``warmup`` steps, then cosine decay to ``min_lr`` at ``steps``."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    span = max(cfg.steps - cfg.warmup, 1)
    progress = min((step - cfg.warmup) / span, 1.0)
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1.0 + math.cos(math.pi * progress))


class Loader:
    """Mini-batches of (context window, next character), reshuffled every epoch by a seeded PCG64."""

    def __init__(self, cfg: LabConfig):
        self.cfg = cfg
        self.windows = len(corpus()[1]) - cfg.context
        if self.windows < cfg.batch:
            raise MlsysimError(f"batch = {cfg.batch} exceeds the {self.windows} windows of the text")
        self.rng = np.random.Generator(np.random.PCG64(cfg.seed))
        self.epoch, self.position = 0, 0
        self.order = self.rng.permutation(self.windows).astype(np.int32)

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        if self.position + self.cfg.batch > self.windows:  # drop the incomplete tail; new shuffle
            self.epoch, self.position = self.epoch + 1, 0
            self.order = self.rng.permutation(self.windows).astype(np.int32)
        starts = self.order[self.position:self.position + self.cfg.batch]
        self.position += self.cfg.batch
        text = corpus()[1]
        x = text[starts[:, None] + np.arange(self.cfg.context)]
        return x, text[starts + self.cfg.context]

    def state(self) -> dict:
        return {"epoch": self.epoch, "position": self.position, "order": self.order,
                "rng": self.rng.bit_generator.state}

    def restore(self, s) -> None:
        self.epoch, self.position = int(s["epoch"]), int(s["position"])
        self.order = np.array(s["order"], dtype=np.int32)
        self.rng.bit_generator.state = s["rng"]


class Trainer:
    """The model, AdamW and the loader; :meth:`step` trains one mini-batch and returns its loss."""

    def __init__(self, cfg: LabConfig):
        self.cfg = cfg
        rng = np.random.default_rng([cfg.seed, 1])
        shapes = {"embed": (cfg.vocab, cfg.embed)}
        fan_in = cfg.context * cfg.embed
        for i in range(cfg.depth):
            shapes[f"w{i}"], shapes[f"b{i}"] = (fan_in, cfg.width), (cfg.width,)
            fan_in = cfg.width
        shapes["w_out"], shapes["b_out"] = (cfg.width, cfg.vocab), (cfg.vocab,)
        self.params = {}
        for k, shape in shapes.items():
            scale = 1.0 if k == "embed" else (0.0 if k.startswith("b") else 1.0 / math.sqrt(shape[0]))
            self.params[k] = (rng.standard_normal(shape, dtype=np.float32) * np.float32(scale))
        self.m = {k: np.zeros_like(p) for k, p in self.params.items()}
        self.v = {k: np.zeros_like(p) for k, p in self.params.items()}
        self.loader = Loader(cfg)
        self.step_count = 0

    # --- training ---------------------------------------------------------------------
    def _loss_and_grads(self, x, y):
        cfg, p = self.cfg, self.params
        n = len(y)
        h = p["embed"][x].reshape(n, -1)
        inputs = [h]
        for i in range(cfg.depth):
            h = np.tanh(h @ p[f"w{i}"] + p[f"b{i}"])
            inputs.append(h)
        logits = h @ p["w_out"] + p["b_out"]
        logits -= logits.max(axis=1, keepdims=True)
        probs = np.exp(logits)
        probs /= probs.sum(axis=1, keepdims=True)
        loss = float(-np.mean(np.log(probs[np.arange(n), y] + np.float32(1e-12))))
        g = {}
        d = probs
        d[np.arange(n), y] -= 1.0
        d /= n
        g["w_out"], g["b_out"] = inputs[-1].T @ d, d.sum(axis=0)
        d = d @ p["w_out"].T
        for i in reversed(range(cfg.depth)):
            d *= 1.0 - inputs[i + 1] ** 2
            g[f"w{i}"], g[f"b{i}"] = inputs[i].T @ d, d.sum(axis=0)
            d = d @ p[f"w{i}"].T
        g["embed"] = np.zeros_like(p["embed"])
        np.add.at(g["embed"], x, d.reshape(n, cfg.context, cfg.embed))
        return loss, g

    def _adamw(self, grads, lr: float):
        cfg, t = self.cfg, self.step_count + 1
        c1, c2 = 1.0 - cfg.beta1 ** t, math.sqrt(1.0 - cfg.beta2 ** t)
        for k, p in self.params.items():
            gk, m, v = grads[k], self.m[k], self.v[k]
            m *= np.float32(cfg.beta1)
            m += np.float32(1.0 - cfg.beta1) * gk
            v *= np.float32(cfg.beta2)
            gk *= gk
            gk *= np.float32(1.0 - cfg.beta2)
            v += gk
            if p.ndim == 2 and k != "embed":  # decoupled weight decay on matrices only
                p *= np.float32(1.0 - lr * cfg.weight_decay)
            denom = np.sqrt(v)
            denom /= np.float32(c2)
            denom += np.float32(cfg.eps)
            np.divide(m, denom, out=denom)
            denom *= np.float32(lr / c1)
            p -= denom

    def step(self, before_update=None) -> float:
        """Train one mini-batch; returns its loss (before the update). ``before_update()``, when
        given, is called after the forward and backward pass, just before AdamW changes the
        weights and moments in place (a pipelined checkpoint's fence)."""
        x, y = self.loader.next()
        loss, grads = self._loss_and_grads(x, y)
        if before_update is not None:
            before_update()
        self._adamw(grads, learning_rate(self.step_count, self.cfg))
        self.step_count += 1
        return loss

    # --- state -----------------------------------------------------------------------
    def state(self) -> dict:
        """The complete training state (arrays are the live ones: a checkpoint must copy them)."""
        return {"step": self.step_count, "config": asdict(self.cfg), "params": self.params,
                "adam_m": self.m, "adam_v": self.v, "loader": self.loader.state()}

    @classmethod
    def from_state(cls, state) -> "Trainer":
        """A trainer that continues exactly where ``state`` (from :meth:`state`) left off."""
        t = cls(LabConfig(**state["config"]))
        for name, target in (("params", t.params), ("adam_m", t.m), ("adam_v", t.v)):
            for k in target:
                target[k] = np.array(state[name][k], dtype=np.float32)
        t.loader.restore(state["loader"])
        t.step_count = int(state["step"])
        return t

    @property
    def state_B(self) -> int:
        """Bytes of the state's arrays."""
        arrays = [*self.params.values(), *self.m.values(), *self.v.values(), self.loader.order]
        return int(sum(a.nbytes for a in arrays))
