"""The lab's PyTorch training run: a small decoder-only transformer checkpointed as a student would.

Needs the optional extra (``pip install -e .[torch]``); nothing else in the package imports
this module. The model is of the seed study's family (PCcheck's replication: 32 layers,
d = 4096, 32 heads, 8 KV heads, FFN 6144): pre-norm blocks of RMSNorm (Zhang & Sennrich
2019), causal attention with rotary position embeddings (RoPE, Su et al. 2021) and
grouped-query attention (GQA, Ainslie et al. 2023), and a SwiGLU feed-forward (Shazeer
2020); untied input and output embeddings; no biases. It reads Shakespeare's sonnets
(shipped with the package) one character at a time.

Everything needed to continue exactly is in :meth:`TorchTrainer.state`: the weights and
AdamW's moments (as :func:`torch.distributed.checkpoint.state_dict.get_state_dict` gives
them, keyed by parameter name), the warm-up + cosine ``LambdaLR`` schedule, the data
sampler's epoch and position, and the torch, NumPy and Python random states (dropout draws
from torch's). With deterministic algorithms on and the thread count fixed in the
config, a run restored from that state produces the same losses, bit for bit, as one that
never stopped.

Size: 12 bytes per parameter (fp32 weights, AdamW m and v), as :func:`mlsysim.checkpoint`
counts for ``optimizer="adamw", precision="fp32"``; :meth:`TorchConfig.for_size` picks the
width for a target size, from about 16 MB to several GB.

>>> cfg = TorchConfig(layers=2, d_model=64, heads=4, kv_heads=2, d_ff=96, steps=8, warmup=2)
>>> cfg.params == int(cfg.workload().params)      # the same count as ms.Transformer's
True
>>> t = TorchTrainer(cfg)
>>> losses = [t.step() for _ in range(8)]
>>> losses[-1] < losses[0]
True
"""
from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ...errors import MlsysimError
from ..train import corpus

BYTES_PER_PARAM = 12  # fp32 weights + AdamW m + v


@dataclass(frozen=True)
class TorchConfig:
    """Shape and hyper-parameters of the run (plain scalars, stored in every checkpoint)."""

    layers: int = 2
    d_model: int = 128
    heads: int = 4
    kv_heads: int = 2
    d_ff: int = 192
    context: int = 32
    batch: int = 8
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup: int = 4
    steps: int = 40
    weight_decay: float = 0.01
    dropout: float = 0.1
    seed: int = 0
    threads: int = 1

    def __post_init__(self):
        for k in ("layers", "d_model", "heads", "kv_heads", "d_ff", "context", "batch", "steps", "threads"):
            v = getattr(self, k)
            if type(v) is not int or v < 1:
                raise MlsysimError(f"TorchConfig.{k} must be a positive integer, got {v!r}")
        if self.d_model % self.heads or (self.d_model // self.heads) % 2:
            raise MlsysimError(f"TorchConfig.d_model = {self.d_model} must split into heads = {self.heads} "
                               f"heads of an even size (RoPE rotates pairs)")
        if self.heads % self.kv_heads:
            raise MlsysimError(f"TorchConfig.kv_heads = {self.kv_heads} must divide heads = {self.heads}")
        if not 0 <= self.warmup <= self.steps:
            raise MlsysimError(f"TorchConfig.warmup must be between 0 and steps = {self.steps}, got {self.warmup}")
        if not 0 <= self.dropout < 1:
            raise MlsysimError(f"TorchConfig.dropout must be in [0, 1), got {self.dropout!r}")

    @property
    def vocab(self) -> int:
        return len(corpus()[2])

    @property
    def params(self) -> int:
        """Parameters: embeddings in and out, per layer Q, K, V, O, gate, up, down and two norms, a final norm."""
        d, kv = self.d_model, self.d_model // self.heads * self.kv_heads
        per_layer = 2 * d * d + 2 * d * kv + 3 * d * self.d_ff + 2 * d
        return self.layers * per_layer + 2 * self.vocab * d + d

    @property
    def state_B(self) -> int:
        """Bytes of weights, m and v."""
        return BYTES_PER_PARAM * self.params

    def workload(self):
        """The same shape as an :class:`mlsysim.Transformer` record (for :func:`mlsysim.checkpoint`)."""
        from ...workloads import Transformer
        return Transformer(name=f"lab transformer {self.layers}x{self.d_model}", layers=self.layers,
                           d_model=self.d_model, heads=self.heads, kv_heads=self.kv_heads, d_ff=self.d_ff,
                           vocab=self.vocab, gated_mlp=True, norm="rms", source="mlsysim.lab.pytorch.train",
                           date="2026-11-25")

    @classmethod
    def for_size(cls, size_B: float, layers: int = 4, **kw) -> "TorchConfig":
        """The config of the seed's proportions (head size 64, about a quarter as many KV heads,
        FFN 1.5 d) whose weights + AdamW moments come closest to ``size_B`` bytes (d a multiple of 64).

        >>> c = TorchConfig.for_size(1e9)
        >>> c.d_model, c.heads, c.kv_heads, c.d_ff, round(c.state_B / 1e9, 3)
        (1728, 27, 3, 2592, 0.966)
        """
        if not size_B > 0:
            raise MlsysimError(f"size_B must be positive, got {size_B!r}")
        # params(d) ~ layers * 7 d^2 + (2 vocab + 2 layers + 1) d   (kv ~ d/4, d_ff = 1.5 d)
        a, b = 7 * layers, 2 * len(corpus()[2]) + 2 * layers + 1
        d = (-b + math.sqrt(b * b + 4 * a * size_B / BYTES_PER_PARAM)) / (2 * a)
        candidates = [cls._of_width(64 * k, layers, **kw) for k in {max(1, int(d // 64)), int(d // 64) + 1}]
        return min(candidates, key=lambda c: abs(c.state_B - size_B))

    @classmethod
    def _of_width(cls, d: int, layers: int, **kw) -> "TorchConfig":
        heads = d // 64
        kv = max(k for k in range(1, heads + 1) if heads % k == 0 and k <= max(1, heads // 4))
        return cls(layers=layers, d_model=d, heads=heads, kv_heads=kv, d_ff=3 * d // 2, **kw)


def learning_rate_factor(step: int, cfg: TorchConfig) -> float:
    """``LambdaLR``'s factor: linear warm-up over ``warmup`` steps, then cosine decay to ``min_lr / lr``."""
    if step < cfg.warmup:
        return (step + 1) / cfg.warmup
    progress = min((step - cfg.warmup) / max(cfg.steps - cfg.warmup, 1), 1.0)
    floor = cfg.min_lr / cfg.lr
    return floor + 0.5 * (1.0 - floor) * (1.0 + math.cos(math.pi * progress))


class _Schedule:
    """A picklable ``lr_lambda`` (LambdaLR stores the state of callable objects, not of functions)."""

    def __init__(self, cfg: TorchConfig):
        self.cfg = cfg

    def __call__(self, step: int) -> float:
        return learning_rate_factor(step, self.cfg)


# --- the model ---------------------------------------------------------------------------------
class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rope_tables(context: int, head_dim: int, base: float = 10000.0):
    freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angle = torch.outer(torch.arange(context, dtype=torch.float32), freq)
    return angle.cos(), angle.sin()


def _rotate(x, cos, sin):
    """Rotate each (even, odd) pair of the last dimension by its position's angle."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, cfg: TorchConfig):
        super().__init__()
        d, hd = cfg.d_model, cfg.d_model // cfg.heads
        self.heads, self.kv_heads, self.head_dim = cfg.heads, cfg.kv_heads, hd
        self.attn_norm, self.mlp_norm = RMSNorm(d), RMSNorm(d)
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, cfg.kv_heads * hd, bias=False)
        self.v = nn.Linear(d, cfg.kv_heads * hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate = nn.Linear(d, cfg.d_ff, bias=False)
        self.up = nn.Linear(d, cfg.d_ff, bias=False)
        self.down = nn.Linear(cfg.d_ff, d, bias=False)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        h = self.attn_norm(x)
        q = self.q(h).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        group = self.heads // self.kv_heads  # grouped-query attention: each K/V head serves `group` query heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.o(a.transpose(1, 2).reshape(b, t, -1)))
        h = self.mlp_norm(x)
        return x + self.drop(self.down(F.silu(self.gate(h)) * self.up(h)))


class TinyDecoder(nn.Module):
    """Token embedding, ``layers`` blocks, a final RMSNorm and an output projection."""

    def __init__(self, cfg: TorchConfig):
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        cos, sin = _rope_tables(cfg.context, cfg.d_model // cfg.heads)
        self.register_buffer("cos", cos, persistent=False)  # derived from the config: not state
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x):
        h = self.embed(x)
        for blk in self.blocks:
            h = blk(h, self.cos[:x.shape[1]], self.sin[:x.shape[1]])
        return self.head(self.norm(h))


# --- the data -----------------------------------------------------------------------------------
class Windows(torch.utils.data.Dataset):
    """Every window of ``context + 1`` characters of the text: input and next-character target."""

    def __init__(self, context: int):
        self.text = torch.from_numpy(corpus()[1].astype(np.int64))
        self.context = context

    def __len__(self) -> int:
        return len(self.text) - self.context

    def __getitem__(self, i):
        w = self.text[i:i + self.context + 1]
        return w[:-1], w[1:]


class ResumableSampler(torch.utils.data.Sampler):
    """Batches of window indices from a fresh seeded shuffle each epoch, without end.

    Its state is two integers, the epoch and the batches already handed out in it: the
    epoch's order is re-derived from ``(seed, epoch)``, so a restored sampler continues
    with exactly the next batch."""

    def __init__(self, n: int, batch: int, seed: int):
        if n < batch:
            raise MlsysimError(f"batch = {batch} exceeds the {n} windows of the text")
        self.n, self.batch, self.seed = n, batch, seed
        self.epoch, self.position = 0, 0

    def _order(self):
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        return torch.randperm(self.n, generator=g)

    def __iter__(self):
        order = self._order()
        while True:
            if (self.position + 1) * self.batch > self.n:   # drop the incomplete tail; next epoch
                self.epoch, self.position = self.epoch + 1, 0
                order = self._order()
            start = self.position * self.batch
            self.position += 1
            yield order[start:start + self.batch].tolist()

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, s) -> None:
        self.epoch, self.position = int(s["epoch"]), int(s["position"])


# --- random states -------------------------------------------------------------------------------
def rng_state() -> dict:
    """torch's, NumPy's global and Python's random states, as tensors and plain values (so that
    ``torch.load(weights_only=True)`` and DCP take them as they are)."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    return {"torch": torch.get_rng_state(), "python": random.getstate(),
            "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                      "has_gauss": int(has_gauss), "gauss": float(gauss)}}


def set_rng_state(s) -> None:
    torch.set_rng_state(torch.as_tensor(s["torch"], dtype=torch.uint8))
    version, internal, gauss_next = s["python"]
    random.setstate((version, tuple(internal), gauss_next))
    n = s["numpy"]
    np.random.set_state((n["kind"], np.asarray(n["keys"], dtype=np.int64).astype(np.uint32), int(n["pos"]),
                         int(n["has_gauss"]), float(n["gauss"])))


# --- the trainer ---------------------------------------------------------------------------------
def deterministic(threads: int) -> None:
    """Deterministic kernels and a fixed thread count (a CPU reduction's order depends on it)."""
    torch.use_deterministic_algorithms(True)
    no_fill_of_new_tensors()
    torch.set_num_threads(threads)


def no_fill_of_new_tensors() -> None:
    """Turn off what deterministic mode turns on beside its kernels: every new ``torch.empty``
    filled with NaN (``torch.utils.deterministic.fill_uninitialized_memory``). That fill is a
    full write of every fresh buffer, and it would land in the timed part of whichever engine
    allocates while it saves or restores (DCP's staging copy, the receivers of a broadcast),
    not in the others'. Nothing here reads a tensor before it is written; the bit-identical
    resume tests would show it if anything did."""
    torch.utils.deterministic.fill_uninitialized_memory = False


class TorchTrainer:
    """Model, AdamW, ``LambdaLR`` and ``DataLoader``; :meth:`step` trains one batch, returns its loss."""

    def __init__(self, cfg: TorchConfig):
        deterministic(cfg.threads)
        self.cfg = cfg
        torch.manual_seed(cfg.seed)
        np.random.seed(cfg.seed)
        random.seed(cfg.seed)
        self.model = TinyDecoder(cfg)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8,
                                           weight_decay=cfg.weight_decay, foreach=False)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, _Schedule(cfg))
        data = Windows(cfg.context)
        self.sampler = ResumableSampler(len(data), cfg.batch, cfg.seed)
        # its own generator: a new DataLoader iterator draws a seed from it, not from the global one
        self.loader = torch.utils.data.DataLoader(data, batch_sampler=self.sampler, num_workers=0,
                                                  generator=torch.Generator().manual_seed(cfg.seed))
        self._batches = None        # made on first use, after any restore of the sampler
        self.step_count = 0
        for group in self.optimizer.param_groups:   # AdamW's moments exist from the start, as after a step:
            for p in group["params"]:                # the state has its full size before the first one
                self.optimizer.state[p] = {"step": torch.tensor(0.0), "exp_avg": torch.zeros_like(p),
                                           "exp_avg_sq": torch.zeros_like(p)}
        self.hook = None            # hook("step", step) midway through a step (between backward and update)

    def step(self, before_update=None) -> float:
        """Train one batch; returns its loss (before the update). ``before_update()``, when given,
        is called after the backward pass, just before the optimizer changes the weights and moments
        in place (a pipelined checkpoint's fence)."""
        if self._batches is None:
            self._batches = iter(self.loader)
        x, y = next(self._batches)
        self.model.train()
        loss = F.cross_entropy(self.model(x).flatten(0, 1), y.flatten())
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.hook is not None:
            self.hook("step", self.step_count + 1)
        if before_update is not None:
            before_update()
        self.optimizer.step()
        self.scheduler.step()
        self.step_count += 1
        return loss.detach().item()

    def state(self) -> dict:
        """The whole training state; the tensors are the live ones (a checkpoint must copy them)."""
        from torch.distributed.checkpoint.state_dict import get_state_dict
        model_sd, optim_sd = get_state_dict(self.model, self.optimizer)
        return {"step": self.step_count, "config": asdict(self.cfg), "model": model_sd, "optimizer": optim_sd,
                "scheduler": {k: v for k, v in self.scheduler.state_dict().items() if k != "lr_lambdas"},
                "sampler": self.sampler.state_dict(),
                "rng": rng_state()}

    def load_state(self, state) -> None:
        """Continue exactly where ``state`` (from :meth:`state`, maybe through a checkpoint) left off."""
        from torch.distributed.checkpoint.state_dict import set_state_dict
        if TorchConfig(**state["config"]) != self.cfg:
            raise MlsysimError("the checkpoint was taken with another TorchConfig: "
                               f"{state['config']} != {asdict(self.cfg)}")
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optimizer"])
        # the schedule's function is rebuilt from the config; its counters come from the state
        self.scheduler.load_state_dict({**self.scheduler.state_dict(), **state["scheduler"]})
        self.sampler.load_state_dict(state["sampler"])
        self._batches = None
        set_rng_state(state["rng"])
        self.step_count = int(state["step"])

    @classmethod
    def from_state(cls, state) -> "TorchTrainer":
        t = cls(TorchConfig(**state["config"]))
        t.load_state(state)
        return t

    @property
    def state_B(self) -> int:
        """Bytes of the state's tensors."""
        sd = self.state()
        tensors = list(sd["model"].values()) + [v for s in sd["optimizer"]["state"].values() for v in s.values()]
        return int(sum(t.numel() * t.element_size() for t in tensors))
