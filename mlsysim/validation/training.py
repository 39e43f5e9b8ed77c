"""Distributed training: model states, time to train, MFU/HFU and per-GPU throughput of
published runs against ``training_memory``, ``train_step`` and the FLOP accounting.

Three kinds of case. *Identities* recompute a published figure from its published inputs
(ZeRO's model states, Narayanan's time-to-train equation, PaLM's MFU, OPT's utilisation).
*Fitted* cases (V13, Korthikanti et al. 2022) use one scalar efficiency for Megatron-LM 2022
on A100, fitted once to the three V13 rows. *First-principles* cases (Megatron-LM 2021's weak
scaling table, Korthikanti et al.'s model series, Llama 3 405B, torchtitan, Megatron-LM's H100
strong scaling) run the step model
with its default — every GEMM's efficiency from its shape (:mod:`mlsysim.kernels`), nothing
fitted — and the published layout and software (torchtitan's plain-PyTorch kernels and its
checkpointing policy); the micro-batch size, interleaving and ZeRO stage that the papers do
not state are chosen by ``best_parallelism`` within that layout.

``SERIES`` groups the first-principles points into published scaling series: the model must
get each series' trend right (per-GPU throughput rising or falling as model and cluster grow)
and reach ±15 % on every point.
"""
from __future__ import annotations

import dataclasses

from ..memory import model_states_B
from ..parallel import best_parallelism, mfu, time_to_train_s, train_step, training_flops
from ..registry import cluster, hardware, model
from ..units import day
from ..workloads import Transformer
from . import Case, Series

MEGATRON_2021 = "Narayanan et al. 2021 (SC'21), Efficient Large-Scale Language Model Training on GPU Clusters"
KORTHIKANTI = ("Korthikanti et al. 2022 (MLSys'23), Reducing Activation Recomputation in Large Transformer Models, "
               "Tables 3 and 5; NVIDIA/Megatron-LM README (MFU/HFU table, data-parallel size 1)")

#: Megatron-LM 2022 on A100: the efficiency that best reproduces the three V13 rows (fitted once).
A100_MEGATRON_2022 = 0.725


def gpt(name: str, layers: int, hidden: int, heads: int, vocab: int = 51200) -> Transformer:
    """A GPT-3-style model as Megatron-LM benchmarks it: 4h MLP with GeLU, biases, layer
    norms, learned positions for 2,048 tokens, output head tied to the embedding."""
    return Transformer(name=name, layers=layers, d_model=hidden, heads=heads, d_ff=4 * hidden, vocab=vocab,
                       gated_mlp=False, bias=True, norm="layer", tied_embeddings=True, learned_positions=2048,
                       max_context=2048, source=MEGATRON_2021, date="2021-04")


# Narayanan et al. 2021, Table 1: (params B, heads, hidden, layers, t, p, GPUs, batch, TFLOP/s per GPU)
MEGATRON_2021_TABLE1 = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137), (3.6, 32, 3072, 30, 2, 1, 64, 512, 138),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142), (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138), (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148), (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163), (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163),
]

# Korthikanti et al. 2022, Table 3 and the Megatron-LM README: (name, layers, hidden, heads, t, p,
# batch, MFU, HFU); sequence 2,048, micro-batch 1, one pipeline (data-parallel size 1).
KORTHIKANTI_RUNS = [
    ("22B", 48, 6144, 64, 8, 1, 4, 0.415, 0.437), ("175B", 96, 12288, 96, 8, 8, 64, 0.514, 0.528),
    ("530B", 105, 20480, 128, 8, 35, 280, 0.560, 0.570), ("1T", 128, 25600, 160, 8, 64, 512, 0.563, 0.570),
]

# Llama 3 herd paper (Dubey et al. 2024), Table 4: (GPUs, TP, CP, PP, DP, seq len, batch per DP, MFU)
LLAMA3_TABLE4 = [(8192, 8, 1, 16, 64, 8192, 32, 0.43), (16384, 8, 1, 16, 128, 8192, 16, 0.41),
                 (16384, 8, 16, 16, 8, 131072, 16, 0.38)]
TORCHTITAN = "pytorch/torchtitan docs/performance.md (2024), Llama 3 and Llama 2 tables (FSDP2, 64 A100 80GB)"
MEGATRON_CORE = ("NVIDIA/Megatron-LM README (2025), 'Strong Scaling Results': GPT-3 175B with a 131,072-token "
                 "vocabulary, 4,096-token sequences, batch 1,152, from 96 to 4,608 H100s, MFU 47 % to 42 %")
LLAMA3 = "Llama 3 herd paper (Dubey et al. 2024) §3.3.2 and Table 4 (BF16 MFU on H100, RoCE 400 Gb/s per GPU)"


def megatron_2021_step(row):
    """Best step of a Table 1 row within its published layout: full recomputation, eager
    attention, no SP, fp16, no ZeRO; micro-batch size and interleaving (v ≤ 2) from the search."""
    _, heads, hidden, layers, t, p, gpus, batch, _ = row
    m = gpt(f"GPT {hidden}x{layers}", layers, hidden, heads)
    return best_parallelism(m, cluster("dgx-a100", nodes=gpus // 8), batch, 2048, tp=[t], pp=[p], interleave=(1, 2),
                            zero_stage=(0,), recompute=("full",), attention="eager", sequence_parallel=False,
                            precision="fp16").best


def megatron_2021(row) -> float:
    """Predicted TFLOP/s per GPU of a Table 1 row, counted as the paper's Eq. 3 does (hardware
    FLOPs with full recomputation)."""
    return megatron_2021_step(row).hfu * hardware("a100").peak("fp16")


def korthikanti(name: str, efficiency: float = A100_MEGATRON_2022, recompute: str = "selective"):
    """``train_step`` of a Korthikanti et al. run: SP with selective recomputation (or the
    full-recomputation baseline without SP), eager attention, fp16, one pipeline."""
    _, layers, hidden, heads, t, p, batch, _, _ = next(r for r in KORTHIKANTI_RUNS if r[0] == name)
    m = model("gpt-3") if name == "175B" else gpt(f"GPT-{name}", layers, hidden, heads)
    return train_step(m, cluster("dgx-a100", nodes=t * p // 8), global_batch=batch, seq_len=2048, tp=t, pp=p,
                      dp=1, micro_batch=1, precision="fp16", efficiency=efficiency, zero_stage=0,
                      recompute=recompute, sequence_parallel=recompute == "selective", attention="eager")


def korthikanti_mfu(name: str) -> float:
    """MFU of a Korthikanti et al. run with the shape-aware default (nothing fitted)."""
    return korthikanti(name, efficiency=None).mfu


#: Shares of the layers a search may recompute in full, in eighths (the cases' candidates).
EIGHTHS = tuple(i / 8 for i in range(9))


def llama3(row, efficiency=None, recompute=("none",), recompute_fraction=EIGHTHS):
    """Best step of Llama 3.1 405B in a Table 4 layout, with fp32 gradient accumulation and
    reduce-scatter as the paper states (§3.3.2). The paper does not say what Meta recomputed (it
    trimmed a layer from the first and last stages to balance memory); the search takes the fastest
    step that fits over the recomputed share of the layers (in eighths), the micro-batch,
    interleaving and ZeRO stage. ``recompute`` and ``recompute_fraction`` (candidates, as in
    :func:`best_parallelism`) ask for another policy."""
    gpus, tp, cp, pp, dp, seq, per_dp, _ = row
    return best_parallelism("llama-3.1-405b", cluster("llama3-24k-h100", nodes=gpus // 8), dp * per_dp, seq,
                            tp=[tp], pp=[pp], cp=[cp], zero_stage=(1, 2), recompute=recompute,
                            recompute_fraction=recompute_fraction, efficiency=efficiency,
                            grad_precision="fp32").best


_ZERO = "Rajbhandari et al. 2020 (SC'20), ZeRO, §3 and Figure 1 (Ψ = 7.5B, K = 12, N_d = 64)"

CASES = [
    Case(id="V8-7.5B", area="training", title="Model states of 7.5B parameters, mixed-precision Adam, DDP (GB)",
         published=120.0, unit="GB", predict=lambda: model_states_B(7.5e9) / 1e9, tolerance=0.01, source=_ZERO),
    Case(id="V8-1.5B", area="training", title="Model states of GPT-2 1.5B, mixed-precision Adam, DDP (GB)",
         published=24.0, unit="GB", predict=lambda: model_states_B(1.5e9) / 1e9, tolerance=0.01,
         source="Rajbhandari et al. 2020, §3.1 (a 1.5B GPT-2 needs at least 24 GB)"),
] + [
    Case(id=f"ZeRO-{z}-7.5B-64", area="training", title=f"ZeRO-{z} model states per GPU, 7.5B on 64 GPUs (GB)",
         published=pub, unit="GB", predict=lambda z=z: model_states_B(7.5e9, z, 64) / 1e9, tolerance=0.02,
         source=_ZERO, note="The figure prints rounded values (31.4, 16.6, 1.9 GB).")
    for z, pub in ((1, 31.4), (2, 16.6), (3, 1.9))
] + [
    Case(id="V12-GPT3", area="training", title="Days to train GPT-3 175B on 300B tokens, 1,024 A100s at 140 TFLOP/s",
         published=34.0, unit="d",
         predict=lambda: time_to_train_s(8 * 300e9 * 175e9, 1024, 140e12) / day, tolerance=0.03,
         source=f"{MEGATRON_2021}, §5.1 Eq. 4",
         note="8·T·P counts forward, backward and the recomputed forward, ignoring attention and the logits; "
              "the full count (training_flops with full recomputation) is 3 % larger."),
    Case(id="V12-1T", area="training", title="Days to train the 1T model on 450B tokens, 3,072 A100s at 163 TFLOP/s",
         published=84.0, unit="d",
         predict=lambda: time_to_train_s(8 * 450e9 * model("megatron-1t").published_params, 3072, 163e12) / day,
         tolerance=0.03, source=f"{MEGATRON_2021}, §5.1 Eq. 4"),
] + [
    Case(id=f"V13-MFU-{name}", area="training", title=f"MFU, {name} GPT, {t * p} A100s, SP + selective recompute",
         published=pub_mfu, unit="fraction", predict=lambda name=name: korthikanti(name).mfu,
         tolerance=0.03 / pub_mfu, source=KORTHIKANTI,
         note=f"One efficiency for Megatron-LM 2022 on A100, η = {A100_MEGATRON_2022}, fitted once to the three "
              "V13 rows (±3 MFU points). The model keeps the bubble (p−1)/m, unhidden TP collectives over "
              "NVLink, and memory-bound softmax/dropout traffic of the eager attention.")
    for name, _, _, _, t, p, _, pub_mfu, _ in KORTHIKANTI_RUNS[1:]
] + [
    Case(id=f"V13-HFU-{name}", area="training", title=f"HFU, {name} GPT, {t * p} A100s, SP + selective recompute",
         published=pub_hfu, unit="fraction", predict=lambda name=name: korthikanti(name).hfu,
         tolerance=0.03 / pub_hfu, source=KORTHIKANTI,
         note="±3 HFU points, same efficiency as the MFU rows. Selective recomputation re-runs only the "
              "attention scores' forward (4·s²·h per layer and sequence), so HFU − MFU is under half a "
              "point here (tests/test_parallel.py checks it within 1 point of the paper's gap); the paper's "
              "hardware-FLOP formula, 72·B·s·l·h²·(1 + s/3h + V/12lh), adds three times that, hence its "
              "larger gap.")
    for name, _, _, _, t, p, _, _, pub_hfu in KORTHIKANTI_RUNS[1:]
] + [
    Case(id="Korthikanti-22B", area="training", title="MFU, 22B GPT on one DGX A100 (t = 8), SP + selective",
         published=0.415, unit="fraction", predict=lambda: korthikanti_mfu("22B"), tolerance=0.15,
         source=KORTHIKANTI,
         note="Shape-aware default, nothing fitted. With h/t = 768 the attention-output GEMM has k = 768 "
              "and the QKV GEMM 2,304 columns: 288 tiles in 3 waves of 108 SMs, so this model runs its "
              "GEMMs at a lower fraction of peak than the larger ones of the series."),
] + [
    Case(id=f"Korthikanti-{name}", area="training",
         title=f"MFU, {name} GPT on {t * p} A100s, SP + selective recompute, shape-aware default",
         published=pub_mfu, unit="fraction", predict=lambda name=name: korthikanti_mfu(name), tolerance=0.15,
         source=KORTHIKANTI, note="The same run as the V13 row, with every GEMM timed from its shape instead "
                                  "of the fitted scalar efficiency.")
    for name, _, _, _, t, p, _, pub_mfu, _ in KORTHIKANTI_RUNS[1:]
] + [
    Case(id="Korthikanti-530B-speedup", area="training",
         title="Speed-up of SP + selective recomputation over full recomputation, 530B GPT",
         published=54.2 / 42.1, unit="x",
         predict=lambda: korthikanti("530B", recompute="full").step_s / korthikanti("530B").step_s,
         tolerance=0.10, source="Korthikanti et al. 2022, abstract: 54.2 % vs 42.1 % MFU on 2,240 A100s",
         note="Predicted at the V13 layout (280 GPUs, one pipeline); the published pair ran with data "
              "parallelism on 2,240 GPUs, whose gradient reduction is the same in both and dilutes the gain."),
    Case(id="V16-PaLM", area="training", title="PaLM 540B MFU on 6,144 TPU v4 at 238.3K tokens/s",
         published=0.462, unit="fraction", predict=lambda: mfu("palm", "tpu-v4", 6144, 238.3e3, 2048),
         tolerance=0.01 / 0.462, source="Chowdhery et al. 2022, PaLM, §4.1 and App. B (6N + 12·L·H·Q·T)"),
    Case(id="V16-PaLM-no-attention", area="training", title="PaLM 540B MFU without the attention FLOPs",
         published=0.457, unit="fraction",
         predict=lambda: mfu("palm", "tpu-v4", 6144, 238.3e3, 2048, include_attention=False),
         tolerance=0.01 / 0.457, source="Chowdhery et al. 2022, App. B"),
    Case(id="V16-PaLM-HFU", area="training", title="PaLM 540B HFU (rematerialisation), bound from full recomputation",
         published=0.578, unit="fraction",
         predict=lambda: mfu("palm", "tpu-v4", 6144, 238.3e3, 2048, recompute="full", attention="eager"),
         kind="bound", direction="upper", tolerance=0.08, source="Chowdhery et al. 2022, §4.1",
         note="PaLM rematerialised part of the forward pass; re-running all of it (this bound) gives the "
              "most a run of that throughput can have executed."),
    Case(id="V21-OPT", area="training", title="OPT-175B: 4.30e23 FLOPs on 1,024 A100s in 33 days (TFLOP/s per GPU)",
         published=147.0, unit="TFLOP/s", predict=lambda: 4.30e23 / (1024 * 33 * day) / 1e12, tolerance=0.03,
         source="metaseq OPT-175B logbook and Zhang et al. 2022 (147 TFLOP/s per GPU)"),
] + [
    Case(id=f"Megatron-2021-{row[0]:g}B", area="training",
         title=f"{row[0]:g}B GPT on {row[6]:,} A100s (t = {row[4]}, p = {row[5]}, batch {row[7]}): TFLOP/s per GPU",
         published=float(row[8]), unit="TFLOP/s", predict=lambda row=row: megatron_2021(row) / 1e12,
         tolerance=0.15, source=f"{MEGATRON_2021}, Table 1",
         note="First principles with the shape-aware default; micro-batch size and interleaving (v ≤ 2) chosen "
              "by the search. Throughput rises along the table because the per-GPU GEMMs grow (h/t from 768 to "
              "3,200) and fill the SMs' waves better, and the memory-bound and TP shares shrink as h grows.")
    for row in MEGATRON_2021_TABLE1
] + [
    Case(id=f"Llama3-405B-{row[0] // 1024}K", area="training",
         title=f"Llama 3 405B, {row[0]:,} H100s, TP {row[1]} PP {row[3]} DP {row[4]}, 8K context: BF16 MFU",
         published=row[7], unit="fraction", predict=lambda row=row: llama3(row).mfu, tolerance=0.15, source=LLAMA3,
         note="First principles with the shape-aware default, fp32 gradients (§3.3.2) and the least "
              "recomputation that fits, searched (the paper does not say what Meta recomputed; it trimmed a "
              "layer from the first and last stages to balance memory). MFU falls from 8K to 16K GPUs because "
              "the same global batch leaves half the micro-batches per pipeline and a larger bubble. The "
              "128K-context row (CP 16) is left out: its MFU depends on whether the masked half of the "
              "attention is counted, which the paper does not say, and at 128K tokens attention is half of "
              "the FLOPs.")
    for row in LLAMA3_TABLE4[:2]
]

# torchtitan docs/performance.md: (model, local batch, sequence, recompute, share of layers
# recomputed in full, tokens/s per GPU) of FSDP2 runs on 64 A100s in plain (eager) PyTorch
TORCHTITAN_RUNS = [
    ("llama-2-13b", 2, 4096, "none", 0.0, 2162.0, "Llama 2 13B, no activation checkpointing"),
    ("llama-2-13b", 2, 4096, "none", 0.5, 1914.0, "Llama 2 13B, selective layer checkpointing"),
    ("llama-3-8b", 1, 8192, "none", 0.5, 2904.0, "Llama 3 8B, selective layer checkpointing"),
    ("llama-2-70b", 2, 4096, "full", 0.0, 353.0, "Llama 2 70B, full checkpointing"),
    ("llama-3-70b", 1, 8192, "full", 0.0, 331.0, "Llama 3 70B, full checkpointing"),
]


def torchtitan(name: str, b: int, s: int, recompute: str, share: float) -> float:
    """Tokens/s per GPU of a torchtitan run (:data:`TORCHTITAN_RUNS`): FSDP2 (ZeRO-3) on 64
    A100s, local batch ``b`` of ``s`` tokens, plain PyTorch (every element-wise operator its own
    kernel, the loss in fp32: ``elementwise="eager"``). torchtitan's "selective layer"
    checkpointing recomputes every second layer in full (``recompute_fraction=0.5``); FSDP2
    reduces the gradients in fp32 (torchtitan's ``mixed_precision_reduce`` default).
    Compared in tokens/s, the measured quantity: torchtitan's MFU counts 6 FLOP per parameter
    including the embedding and the attention as if unmasked, so it is not this library's MFU."""
    return train_step(name, cluster("dgx-a100", nodes=8), 64 * b, s, tp=1, pp=1, micro_batch=b, zero_stage=3,
                      recompute=recompute, recompute_fraction=share, elementwise="eager",
                      grad_precision="fp32").tokens_per_s / 64


def _torchtitan_id(run) -> str:
    name, _, _, rc, share = run[:5]
    return f"torchtitan-{name.removeprefix('llama-')}-{rc if share == 0 else 'layer'}"


CASES += [
    Case(id=_torchtitan_id((name, b, s, rc, share)), area="training",
         title=f"{label}, FSDP2 on 64 A100s, {s:,}-token sequences, local batch {b}: tokens/s per GPU",
         published=pub, unit="tok/s", predict=lambda r=(name, b, s, rc, share): torchtitan(*r), tolerance=0.15,
         source=TORCHTITAN,
         note="First principles with the shape-aware default, eager element-wise kernels (torchtitan runs "
              "plain PyTorch: RMSNorm and rotary embedding upcast to fp32, one kernel per operator, an fp32 "
              "loss) and the published checkpointing. FSDP's weight gathers and gradient reduce-scatters "
              "hide behind the compute of 8 nodes, as the model assumes with full overlap.")
    for name, b, s, rc, share, pub, label in TORCHTITAN_RUNS
]


def _gpt3_131k() -> Transformer:
    return dataclasses.replace(model("gpt-3"), name="GPT-3 175B (131,072-token vocabulary)", vocab=131072,
                               max_context=4096, learned_positions=0)


#: The H100's η_mm at the best iteration of a short benchmark, 794.5 of 989.4 TFLOP/s (Bekman,
#: ml-engineering 'Maximum Achievable Matmul FLOPS comparison table', 2025), against the
#: sustained rate the registry holds: the notes say what the level owes to the difference.
H100_BEST_ITERATION = 794.5 / 989.4

#: GPUs of one model replica in Megatron-LM's strong-scaling series: the 96 of its first point.
#: Adding GPUs adds data-parallel replicas (4,608 = 48 × 96; the batch of 1,152 = 48 × 24).
MEGATRON_CORE_REPLICA = 96


def megatron_core_strong(gpus: int, grad_precision: str = "fp32", matmul_efficiency: float | None = None):
    """Best step of GPT-3 175B (131K vocabulary) on ``gpus`` H100s, batch 1,152 × 4,096 tokens, as
    Megatron-core runs bf16: distributed optimizer (ZeRO-1) with fp32 gradients (Megatron-LM forces
    fp32 gradient accumulation and reduction with bf16). One replica spans the 96 GPUs of the
    first point (tp · pp = 96, tp of 4 or 8 chosen by the search with the micro-batch,
    interleaving and recomputation); more GPUs add data-parallel replicas. ``grad_precision``
    and ``matmul_efficiency`` (the H100's η_mm) ask what the level owes to each."""
    c = cluster("dgx-h100", nodes=gpus // 8)
    if matmul_efficiency is not None:
        gpu = dataclasses.replace(c.node.accelerator, matmul_efficiency=matmul_efficiency)
        c = dataclasses.replace(c, node=dataclasses.replace(c.node, accelerator=gpu))
    steps = [best_parallelism(_gpt3_131k(), c, 1152, 4096, tp=[t], pp=[MEGATRON_CORE_REPLICA // t], zero_stage=(1,),
                              grad_precision=grad_precision).best for t in (4, 8)]
    return min(steps, key=lambda s: s.step_s)


def llama3_full_recompute(row):
    """A Table 4 row with every layer recomputed: the policy with the most recomputation."""
    return llama3(row, recompute=("full",), recompute_fraction=0.0)


CASES += [
    Case(id=f"MegatronCore-H100-{gpus}", area="training",
         title=f"GPT-3 175B (131K vocabulary) on {gpus:,} H100s, batch 1,152 × 4,096 tokens: BF16 MFU",
         published=mfu_, unit="fraction", predict=lambda gpus=gpus: megatron_core_strong(gpus).mfu,
         tolerance=0.15, source=MEGATRON_CORE,
         note="First principles with the shape-aware default at the H100's sustained matmul rate, fp32 "
              "gradients as Megatron-LM keeps them with bf16, and one 96-GPU replica (tp · pp = 96) whose "
              "tp, micro-batch, interleaving and recomputation the search chooses: the README prints its "
              "layouts only as an image. The runs overlapped their TP collectives with GEMMs "
              "(--tp-comm-overlap); the model leaves them exposed, which stands in for the slowdown that "
              "overlapped communication inflicts on the GEMMs (18.9 % on average across the A100, H100 and "
              "MI250 runs of Lee et al. 2025, arXiv 2507.03114).")
    for gpus, mfu_ in ((96, 0.47), (4608, 0.42))
]


def _point(case_id: str):
    c = next(c for c in CASES if c.id == case_id)
    return (case_id, c.published, c.predict)


SERIES = [
    Series(name="Megatron-LM 2021 weak scaling (1.7B on 32 to 1T on 3,072 A100s)", source=f"{MEGATRON_2021}, Table 1",
           unit="TFLOP/s per GPU",
           points=tuple(_point(f"Megatron-2021-{row[0]:g}B") for row in MEGATRON_2021_TABLE1)),
    Series(name="Korthikanti et al. 2022 model series (22B on 8 to 1T on 512 A100s)", source=KORTHIKANTI,
           unit="MFU", points=tuple(_point(f"Korthikanti-{r[0]}") for r in KORTHIKANTI_RUNS)),
    Series(name="Llama 3 405B (8,192 and 16,384 H100s, same global batch)", source=LLAMA3, unit="MFU",
           points=tuple(_point(f"Llama3-405B-{row[0] // 1024}K") for row in LLAMA3_TABLE4[:2]),
           note="What Meta recomputed is not published; the cases take the fastest step that fits over "
                "the recomputed share in eighths: three eighths of the layers at 8K GPUs and a quarter "
                "at 16K. Recomputing every layer "
                "instead would put the model 12 and 17 % below the published values."),
    Series(name="torchtitan FSDP2, Llama 2 on 64 A100s (13B and 70B)", source=TORCHTITAN,
           unit="tokens/s per GPU",
           points=tuple(_point(_torchtitan_id(r)) for r in TORCHTITAN_RUNS if r[0].startswith("llama-2"))),
    Series(name="torchtitan FSDP2, Llama 3 on 64 A100s (8B and 70B)", source=TORCHTITAN,
           unit="tokens/s per GPU",
           points=tuple(_point(_torchtitan_id(r)) for r in TORCHTITAN_RUNS if r[0].startswith("llama-3")),
           note="Plain PyTorch runs every element-wise operator as its own kernel: a Llama 3 8B layer moves "
                "3.9 times the bytes that fused kernels would (mlsysim.elementwise), which costs the 8B "
                "model a tenth of its step; counted as fused, this 8B point and the 13B points of the "
                "Llama 2 series are 18 to 21 % high. Left out: the table's 8B row with selective *op* checkpointing (2,973 tokens/s), whose "
                "policy (save every second matrix multiply's output, recompute the rest of the forward) "
                "the model's recomputation options cannot state; it lies between none (3,672 predicted) "
                "and every second layer (3,179)."),
    Series(name="Megatron-LM strong scaling on H100 (GPT-3 175B, 96 to 4,608 GPUs)", source=MEGATRON_CORE,
           unit="MFU", points=tuple(_point(f"MegatronCore-H100-{g}") for g in (96, 4608)),
           note="MFU falls as data-parallel replicas are added to the fixed batch: fewer micro-batches per "
                "pipeline, a larger bubble and more exposed gradient traffic. Two inputs carry the level. "
                "The H100's matmul rate is the sustained one (730 TFLOP/s on a node under continuous load); "
                "a short benchmark's best iteration (794.5) puts the model 22 and 12 % high. "
                "Megatron-LM's fp32 gradients add 2 bytes per parameter and double the reduce-scatter; "
                "with bf16 gradients the 4,608-GPU point is 9 % high instead of 5 %."),
]

# the 8·T·P identity next to the model's own FLOP count, for the accuracy chapter's text
GPT3_FULL_COUNT_DAYS = lambda: time_to_train_s(training_flops("gpt-3", 300e9, 2048, recompute="full",  # noqa: E731
                                                              attention="eager"), 1024, 140e12) / day
