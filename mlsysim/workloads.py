"""Workload records (Transformer, CNN, Optimizer) and the counts derived from their shapes.

Counts follow one convention used across the course: a multiply-add is 2 FLOP,
parameters are counted exactly from the layer shapes (weights, biases, norms),
and every count is a property of the record so that it can be tested against
the published figure (``published_params``).

Sources for the formulas: Kaplan et al. 2020 (FLOPs per token ≈ 2N plus
attention), Narayanan et al. 2021 Eq. 2 (parameter count of a GPT layer),
Korthikanti et al. 2022 §4 (activations), DeepSeek-AI 2024 (MLA, MoE).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from .errors import MlsysimError, check_integer
from .units import bytes_per


@dataclass(frozen=True, kw_only=True)
class Transformer:
    """A decoder (or encoder) Transformer described by its shapes.

    Attention is multi-head (``kv_heads == heads``), grouped-query
    (``kv_heads < heads``) or multi-head latent (``kv_lora_rank > 0``, MLA).
    A mixture of experts has ``experts > 0`` routed experts of width
    ``moe_d_ff``, ``experts_per_token`` of them active per token, plus
    ``shared_experts`` always active; its first ``dense_layers`` layers use a
    dense MLP of width ``d_ff``.

    >>> m = Transformer(name="llama-3-8b", layers=32, d_model=4096, heads=32, kv_heads=8,
    ...                 d_ff=14336, vocab=128256)
    >>> round(m.params / 1e9, 2)     # published: 8.0 B
    8.03
    >>> m.kv_bytes_per_token("bf16")  # 2 · 32 layers · 8 heads · 128 · 2 B
    131072.0
    """

    name: str
    layers: int
    d_model: int
    heads: int
    kv_heads: int | None = None
    d_ff: int
    vocab: int
    head_dim: int | None = None
    gated_mlp: bool = True
    bias: bool = False
    norm: str = "rms"  # "rms" (scale only) or "layer" (scale and shift)
    tied_embeddings: bool = False
    learned_positions: int = 0
    type_vocab: int = 0          # BERT token-type embeddings
    pooler: bool = False         # BERT pooler (d×d + d)
    embedding_norm: bool = False  # a norm right after the embedding (BERT, BLOOM)
    max_context: int = 2048
    # mixture of experts
    experts: int = 0
    experts_per_token: int = 0
    shared_experts: int = 0
    moe_d_ff: int = 0
    dense_layers: int = 0
    # multi-head latent attention (MLA)
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_dim: int = 0
    qk_nope_dim: int = 0
    v_head_dim: int = 0
    # provenance
    published_params: float | None = None
    published_active_params: float | None = None
    training_tokens: float | None = None
    source: str = ""
    date: str = ""
    notes: str = ""

    def __post_init__(self):
        for k in ("layers", "d_model", "heads", "d_ff", "vocab"):
            check_integer(f"{self.name}.{k}", getattr(self, k))
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.head_dim is None:
            if self.d_model % self.heads:
                raise MlsysimError(f"{self.name}: d_model {self.d_model} is not divisible by heads "
                                   f"{self.heads}; give head_dim explicitly")
            object.__setattr__(self, "head_dim", self.d_model // self.heads)
        if not self.is_mla and self.heads % self.kv_heads:
            raise MlsysimError(f"{self.name}: heads {self.heads} must be a multiple of kv_heads {self.kv_heads}")
        if self.experts and not (0 < self.experts_per_token <= self.experts and self.moe_d_ff > 0):
            raise MlsysimError(f"{self.name}: a MoE needs 0 < experts_per_token <= experts and moe_d_ff > 0")
        if self.norm not in ("rms", "layer"):
            raise MlsysimError(f"{self.name}: norm must be 'rms' or 'layer', got {self.norm!r}")

    # --- structure ---------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def attention(self) -> str:
        if self.is_mla:
            return "MLA"
        return "MHA" if self.kv_heads == self.heads else ("MQA" if self.kv_heads == 1 else "GQA")

    # --- parameters --------------------------------------------------------
    def _norm_params(self, width: int) -> int:
        return width * (2 if self.norm == "layer" else 1)

    def _mlp_params(self, width: int) -> int:
        mats = 3 if self.gated_mlp else 2
        biases = (width * (mats - 1) + self.d_model) if self.bias else 0
        return mats * self.d_model * width + biases

    @cached_property
    def attention_params(self) -> int:
        """Weights (and biases) of one attention block's projections."""
        d, h = self.d_model, self.heads
        if self.is_mla:
            qk = self.qk_nope_dim + self.qk_rope_dim
            if self.q_lora_rank:
                q = d * self.q_lora_rank + self._norm_params(self.q_lora_rank) + self.q_lora_rank * h * qk
            else:
                q = d * h * qk
            kv = (d * (self.kv_lora_rank + self.qk_rope_dim) + self._norm_params(self.kv_lora_rank)
                  + self.kv_lora_rank * h * (self.qk_nope_dim + self.v_head_dim))
            return q + kv + h * self.v_head_dim * d
        qkv_out = (h + 2 * self.kv_heads) * self.head_dim
        biases = (qkv_out + d) if self.bias else 0
        return d * qkv_out + h * self.head_dim * d + biases

    @cached_property
    def dense_mlp_params(self) -> int:
        return self._mlp_params(self.d_ff)

    @cached_property
    def expert_params(self) -> int:
        """Parameters of one expert (0 for a dense model)."""
        return self._mlp_params(self.moe_d_ff) if self.is_moe else 0

    @cached_property
    def router_params(self) -> int:
        return self.d_model * self.experts if self.is_moe else 0

    @cached_property
    def embedding_params(self) -> int:
        d = self.d_model
        p = self.vocab * d + self.learned_positions * d + self.type_vocab * d
        p += self._norm_params(d) if self.embedding_norm else 0
        return p

    @cached_property
    def head_params(self) -> int:
        """Output projection to the vocabulary (0 when tied to the embedding)."""
        return 0 if self.tied_embeddings else self.vocab * self.d_model

    @cached_property
    def layer_norm_params(self) -> int:
        return 2 * self._norm_params(self.d_model)

    @cached_property
    def params(self) -> float:
        """Total parameter count (all experts)."""
        per_layer = self.attention_params + self.layer_norm_params
        dense = self.layers - self.moe_layers
        moe = self.moe_layers * ((self.experts + self.shared_experts) * self.expert_params + self.router_params)
        total = self.layers * per_layer + dense * self.dense_mlp_params + moe
        total += self.embedding_params + self.head_params + self._norm_params(self.d_model)  # final norm
        if self.pooler:
            total += self.d_model * self.d_model + self.d_model
        return float(total)

    @cached_property
    def active_params(self) -> float:
        """Parameters a single token touches (equals ``params`` for a dense model)."""
        if not self.is_moe:
            return self.params
        idle = self.moe_layers * (self.experts - self.experts_per_token) * self.expert_params
        return self.params - float(idle)

    def weight_matrices(self) -> list[tuple[int, int, int]]:
        """Every 2-D weight as (rows, cols, how many); the rest of ``params`` are vectors."""
        d, h, L = self.d_model, self.heads, self.layers
        if self.is_mla:
            qk = self.qk_nope_dim + self.qk_rope_dim
            q = ([(d, self.q_lora_rank, L), (self.q_lora_rank, h * qk, L)] if self.q_lora_rank
                 else [(d, h * qk, L)])
            attn = q + [(d, self.kv_lora_rank + self.qk_rope_dim, L),
                        (self.kv_lora_rank, h * (self.qk_nope_dim + self.v_head_dim), L),
                        (h * self.v_head_dim, d, L)]
        else:
            attn = [(d, h * self.head_dim, L), (d, self.kv_heads * self.head_dim, 2 * L),
                    (h * self.head_dim, d, L)]
        up = 2 if self.gated_mlp else 1
        dense = self.layers - self.moe_layers
        mats = attn + [(d, self.d_ff, up * dense), (self.d_ff, d, dense)]
        if self.is_moe:
            n = self.moe_layers * (self.experts + self.shared_experts)
            mats += [(d, self.moe_d_ff, up * n), (self.moe_d_ff, d, n), (d, self.experts, self.moe_layers)]
        mats += [(self.vocab, d, 1 if self.tied_embeddings else 2)]
        mats += [(n, d, 1) for n in (self.learned_positions, self.type_vocab) if n]
        if self.pooler:
            mats.append((d, d, 1))
        return [m for m in mats if m[2] > 0]

    # --- FLOPs -------------------------------------------------------------
    @cached_property
    def matmul_params_per_token(self) -> float:
        """Weights multiplied per token in a forward pass: projections, active MLP/experts,
        router and output head (the embedding lookup is free)."""
        attn = self.attention_params - (self._norm_params(self.q_lora_rank) + self._norm_params(self.kv_lora_rank)
                                        if self.is_mla else 0)
        dense = (self.layers - self.moe_layers) * self.dense_mlp_params
        moe = self.moe_layers * ((self.experts_per_token + self.shared_experts) * self.expert_params
                                 + self.router_params)
        return float(self.layers * attn + dense + moe + self.vocab * self.d_model)

    def attention_flops_per_pair(self, absorbed: bool = False) -> float:
        """FLOPs of one (query, key) pair summed over layers: scores plus weighted values.

        Standard attention: 2·H·d_head (q·k) + 2·H·d_head (p·v) per layer. MLA computes
        in the latent space when the up-projections are absorbed (decode):
        2·H·(r_kv + d_rope) + 2·H·r_kv; otherwise 2·H·(d_nope + d_rope) + 2·H·d_v.
        """
        h = self.heads
        if self.is_mla:
            if absorbed:
                per = 2 * h * (self.kv_lora_rank + self.qk_rope_dim) + 2 * h * self.kv_lora_rank
            else:
                per = 2 * h * (self.qk_nope_dim + self.qk_rope_dim) + 2 * h * self.v_head_dim
        else:
            per = 4 * h * self.head_dim
        return float(self.layers * per)

    def flops_per_token(self, context: float = 0.0) -> float:
        """Forward FLOPs of one token that attends to ``context`` keys: 2·N_matmul + attention.

        >>> m = Transformer(name="t", layers=2, d_model=64, heads=4, d_ff=256, vocab=100)
        >>> m.flops_per_token(0) == 2 * m.matmul_params_per_token
        True
        """
        return 2.0 * self.matmul_params_per_token + self.attention_flops_per_pair() * context

    # --- memory ------------------------------------------------------------
    @cached_property
    def kv_elements_per_token(self) -> float:
        """Cached elements per token across all layers: 2·L·n_kv·d_head, or L·(r_kv + d_rope) for MLA."""
        if self.is_mla:
            return float(self.layers * (self.kv_lora_rank + self.qk_rope_dim))
        return float(2 * self.layers * self.kv_heads * self.head_dim)

    def kv_bytes_per_token(self, precision: str = "bf16") -> float:
        return self.kv_elements_per_token * bytes_per(precision)

    @cached_property
    def saved_activation_elements(self) -> float:
        """Elements per token per layer that a forward pass writes and, with no
        recomputation, keeps for the backward pass: the norm outputs, Q/K/V, the
        attention output, both projections' outputs, the MLP up/gate and activation
        outputs and the two residual sums. For a GPT-3 block this is 18·d, i.e. 36 bytes
        per token in bf16 — Korthikanti et al. (2022) count 34·s·b·h bytes with dropout
        masks and without the attention-score term that FlashAttention never stores."""
        d = self.d_model
        if self.is_mla:
            qkv = self.heads * (self.qk_nope_dim + self.qk_rope_dim) + self.kv_lora_rank + self.qk_rope_dim
            o = self.heads * self.v_head_dim
        else:
            qkv = (self.heads + 2 * self.kv_heads) * self.head_dim
            o = self.heads * self.head_dim
        f = (self.experts_per_token + self.shared_experts) * self.moe_d_ff if self.is_moe else self.d_ff
        up = (2 if self.gated_mlp else 1) * f
        return float(d + qkv + o + d + d + d + up + f + d + d)

    def describe(self) -> dict:
        return {"name": self.name, "params": self.params, "active params": self.active_params,
                "layers": self.layers, "d_model": self.d_model, "attention": self.attention,
                "KV B/token (bf16)": self.kv_bytes_per_token("bf16"), "source": self.source}


# --- convolutional networks ------------------------------------------------
@dataclass(frozen=True)
class _Conv:
    c_in: int
    c_out: int
    k: int
    stride: int
    groups: int
    h_in: int

    @property
    def h_out(self) -> int:
        return (self.h_in + 2 * (self.k // 2) - self.k) // self.stride + 1

    @property
    def params(self) -> int:  # no conv bias: a batch norm follows (2 params per channel)
        return self.c_in // self.groups * self.k * self.k * self.c_out + 2 * self.c_out

    @property
    def macs(self) -> int:
        return self.c_in // self.groups * self.k * self.k * self.c_out * self.h_out ** 2

    @property
    def io_elements(self) -> int:  # read input, write output (BN and activation fused)
        return self.c_in * self.h_in ** 2 + self.c_out * self.h_out ** 2


def _resnet(blocks, bottleneck: bool, res: int):
    convs, extra_io = [_Conv(3, 64, 7, 2, 1, res)], 0
    h = convs[0].h_out
    h_pool = (h + 2 - 3) // 2 + 1
    extra_io += 64 * (h * h + h_pool * h_pool)  # max pool
    h, c = h_pool, 64
    for stage, n in enumerate(blocks):
        width = 64 * 2 ** stage
        out = width * (4 if bottleneck else 1)
        for i in range(n):
            s = 2 if (i == 0 and stage > 0) else 1
            if bottleneck:
                body = [_Conv(c, width, 1, 1, 1, h), _Conv(width, width, 3, s, 1, h)]
                body.append(_Conv(width, out, 1, 1, 1, body[1].h_out))
            else:
                body = [_Conv(c, width, 3, s, 1, h)]
                body.append(_Conv(width, out, 3, 1, 1, body[0].h_out))
            if s != 1 or c != out:
                body.append(_Conv(c, out, 1, s, 1, h))
            convs += body
            h, c = body[-1].h_out, out
            extra_io += 3 * out * h * h  # residual add: read two, write one
    return convs, c, h, extra_io


def _mobilenet_v2(width_mult: float, res: int):
    def ch(x):  # torchvision's _make_divisible(x, 8)
        v = max(8, int(x + 4) // 8 * 8)
        return v + 8 if v < 0.9 * x else v
    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    c = ch(32 * width_mult)
    convs, extra_io = [_Conv(3, c, 3, 2, 1, res)], 0
    h = convs[0].h_out
    for t, c_base, n, s in settings:
        out = ch(c_base * width_mult)
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = c * t
            body = [_Conv(c, hidden, 1, 1, 1, h)] if t != 1 else []
            body.append(_Conv(hidden, hidden, 3, stride, hidden, h))
            body.append(_Conv(hidden, out, 1, 1, 1, body[-1].h_out))
            convs += body
            if stride == 1 and c == out:
                extra_io += 3 * out * h * h
            h, c = body[-1].h_out, out
    last = ch(1280 * max(1.0, width_mult))
    convs.append(_Conv(c, last, 1, 1, 1, h))
    return convs, last, h, extra_io


@dataclass(frozen=True, kw_only=True)
class CNN:
    """An image classifier whose layers are generated from its family's recipe.

    ``family="resnet"`` takes ``blocks`` per stage and ``bottleneck`` (ResNet v1.5,
    stride on the 3×3 conv, as in torchvision); ``family="mobilenet_v2"`` takes
    ``width_mult`` (Sandler et al. 2018, Table 2). Counts are exact for the
    torchvision definitions: parameters include batch-norm scale and shift.

    >>> r = CNN(name="resnet-50", family="resnet", blocks=(3, 4, 6, 3), bottleneck=True)
    >>> int(r.params), round(r.macs_per_sample / 1e9, 2)   # torchvision: 25,557,032 and 4.09 G
    (25557032, 4.09)
    """

    name: str
    family: str
    blocks: tuple[int, ...] = ()
    bottleneck: bool = True
    width_mult: float = 1.0
    resolution: int = 224
    classes: int = 1000
    published_params: float | None = None
    published_macs: float | None = None
    top1: float | None = None
    source: str = ""
    date: str = ""
    notes: str = ""

    @cached_property
    def _layers(self):
        if self.family == "resnet":
            return _resnet(self.blocks, self.bottleneck, self.resolution)
        if self.family == "mobilenet_v2":
            return _mobilenet_v2(self.width_mult, self.resolution)
        raise MlsysimError(f"{self.name}: unknown CNN family {self.family!r}; known: resnet, mobilenet_v2")

    @cached_property
    def params(self) -> float:
        convs, c_last, _, _ = self._layers
        return float(sum(c.params for c in convs) + c_last * self.classes + self.classes)

    @property
    def active_params(self) -> float:
        return self.params

    @cached_property
    def macs_per_sample(self) -> float:
        convs, c_last, _, _ = self._layers
        return float(sum(c.macs for c in convs) + c_last * self.classes)

    @property
    def flops_per_sample(self) -> float:
        """Forward FLOPs per image, 2 per multiply-add (ResNet-50: ≈ 8.2 GFLOP)."""
        return 2.0 * self.macs_per_sample

    @cached_property
    def activation_io_elements(self) -> float:
        """Activation elements read plus written per image in a fused forward pass."""
        convs, c_last, h, extra = self._layers
        return float(sum(c.io_elements for c in convs) + extra + c_last * h * h + c_last + self.classes)

    @cached_property
    def training_activation_elements(self) -> float:
        """Activation elements read plus written per image in one training step (forward and
        backward). Batch norm cannot be folded into the convolution while it trains, so each
        conv + BN + ReLU layer with input x (``in`` elements) and output y (``out``) costs:

        * forward: conv reads x, writes y; BN statistics read y; BN-apply + ReLU read y,
          write the activation a — ``in + 3·out``;
        * backward: BN/ReLU backward reads (da, y) to reduce, then (da, y) again and writes
          dy — ``5·out``; conv data gradient reads dy, writes dx — ``out + in``; conv weight
          gradient reads dy and x — ``out + in``.

        That is ``3·in + 10·out`` per layer, against ``in + out`` in fused inference; residual
        adds and pooling cost three times their inference traffic. Jung et al. (MLSys 2019)
        measure batch norm and ReLU as memory-bound layers taking a large share of ResNet
        training time, which is what this count captures."""
        convs, c_last, h, extra = self._layers
        per_layer = sum(3 * c.c_in * c.h_in ** 2 + 10 * c.c_out * c.h_out ** 2 for c in convs)
        return float(per_layer + 3 * (extra + c_last * h * h + c_last + self.classes))

    @cached_property
    def peak_layer_elements(self) -> float:
        """Largest input + output of one layer per image: the live activations of inference."""
        return float(max(c.io_elements for c in self._layers[0]))

    @cached_property
    def saved_activation_elements(self) -> float:
        """Elements per image kept for the backward pass: each conv's output (for the
        batch-norm backward) and the normalised, activated output (for the next conv),
        i.e. twice the conv outputs, plus the classifier's input and output."""
        convs, c_last, _, _ = self._layers
        return float(2 * sum(c.c_out * c.h_out ** 2 for c in convs) + c_last + self.classes)

    def weight_matrices(self) -> list[tuple[int, int, int]]:
        """Every conv kernel as (out channels, in channels/groups × k × k, 1), plus the classifier."""
        convs, c_last, _, _ = self._layers
        return [(c.c_out, c.c_in // c.groups * c.k * c.k, 1) for c in convs] + [(self.classes, c_last, 1)]

    @property
    def conv_layers(self) -> int:
        return len(self._layers[0])

    def describe(self) -> dict:
        return {"name": self.name, "params": self.params, "GFLOP/image": self.flops_per_sample / 1e9,
                "source": self.source}


Workload = Transformer | CNN


@dataclass(frozen=True, kw_only=True)
class Optimizer:
    """Per-parameter state of an optimizer (see ``data/optimizers.yaml``)."""

    name: str
    full_states: int          # parameter-sized state tensors
    state_bytes: float        # bytes per element of each state tensor
    master_bytes: float = 4.0  # fp32 master copy when weights train in 16 bits
    factored: bool = False    # Adafactor: row + column statistics for matrices
    source: str = ""
    date: str = ""
