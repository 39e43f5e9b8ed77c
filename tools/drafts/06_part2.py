# %% [markdown]
# ## Part 2 — failures and checkpoints
#
# **The question.** Llama 3 405B trained for months on 16,384 H100s, and in one 54-day window
# the job was interrupted hundreds of times. Every interruption throws away the work done since
# the last saved state and idles the whole cluster while it restarts. How often should such a
# job save its state, how should it save it (stall, copy in the background, or keep copies in
# the memory of other nodes), and how much of the cluster's time is left for training? At this
# scale every percent of goodput lost is a hundred or more GPUs doing nothing (printed below).
#
# **Learning objectives.** After this part you can
# 1. estimate a cluster's mean time between failures from component failure rates, and check it
#    against published failure logs;
# 2. size a checkpoint for an optimizer and a parallel layout, and time its write and restore;
# 3. choose a checkpoint interval with Young's and Daly's formulas and explain the trade-off;
# 4. compare synchronous, asynchronous and in-memory checkpoints and storage tiers by goodput;
# 5. infer an effective storage bandwidth from a published save time.

# %% [markdown]
# ### Background
#
# **Failures.** Each kind of part $c$ (GPU, HBM, NIC, software and driver, switch or cable,
# power supply, host) fails on average once every $\mathrm{MTTF}_c$ hours per unit. Failures are
# independent and exponential, and one of them stops a synchronous job, so the rates add
# (a series system):
#
# $$\lambda_\text{node} = \sum_c \frac{n_c}{\mathrm{MTTF}_c}, \qquad
#   M = \frac{1}{N_\text{nodes}\,\lambda_\text{node}},$$
#
# $$P(\text{no failure in } T) = e^{-T/M},$$
#
# with $M$ the cluster's mean time between failures (MTBF), $N_\text{nodes}$ its nodes and
# $n_c$ units of kind $c$ per node. The package derives every $\mathrm{MTTF}_c$ from the
# Llama 3 405B failure table (Llama Team 2024, §3.3.4, Table 5): units × hours / failures.
#
# **Checkpoint contents.** A checkpoint holds what training cannot recompute: weights in the
# training precision ($b_w$ bytes per parameter), the fp32 master copy ($b_m$), the optimizer
# states ($b_o$), and a few kilobytes of scheduler, random-generator and data-loader state per
# rank. For mixed-precision AdamW $b_w + b_m + b_o = 2 + 4 + 8 = 14$ bytes per parameter;
# gradients are not saved. Tensor and pipeline parallelism split the state over $t \cdot p$
# ranks; data parallelism replicates it unless ZeRO/FSDP shards it over the $d$ replicas.
#
# **Write and stall.** The busiest rank copies $r$ bytes to host memory over its host link
# ($B_\text{host}$), then the nodes write a total of $S$ bytes to storage with aggregate rate
# $B_\text{agg}$, each node at most $B_\text{client}$ for its $n$ bytes:
#
# $$t_\text{storage} = \max\!\left(\frac{S}{B_\text{agg}},\ \frac{n}{B_\text{client}}\right),$$
#
# $$\delta_\text{sync} = \frac{r}{B_\text{host}} + t_\text{storage}, \qquad
#   \delta_\text{async} = \frac{r}{B_\text{host}}.$$
#
# An asynchronous save persists in the background, so its newest copy becomes safe
# $t_\text{storage}$ later; an in-memory save also copies each node's state to a peer's host
# memory (Gemini, Wang et al., SOSP 2023) and recovers from there.
#
# **Interval.** With a stall of $\delta$ seconds every $\tau$ seconds of training, Young (1974)
# minimises the wasted share $\delta/\tau + \tau/(2M)$ at $\tau_Y = \sqrt{2\delta M}$. Daly (2006)
# solves the exact exponential model, in which $\tau$ seconds of work take on average
#
# $$E[T] = M\,e^{R/M}\left(e^{(\tau+\delta)/M} - 1\right), \qquad
#   \text{goodput} = \frac{\tau}{E[T]},$$
#
# where $R$ is the downtime per failure (restart, restore, and the lag until the newest copy was
# safe). His optimum is $\tau_D = \sqrt{2\delta M}\,[1 + \tfrac13\sqrt{\delta/2M} +
# \tfrac19\,\delta/2M] - \delta$ for $\delta < 2M$ (and $M$ otherwise). Each failure costs on
# average half a period of lost work plus $R$. Goodput here is the effective training time ratio
# of Kokolis et al. (HPCA 2025).

# %%
import numpy as np
import mlsysim as ms

c1k = ms.cluster("dgx-h100", nodes=128)     # 1,024 H100s
c16k = ms.cluster("dgx-h100", nodes=2048)   # 16,384 H100s, the Llama 3 405B scale
n16k = c16k.accelerators
print(f"1 % of goodput on {n16k:,} GPUs = {0.01 * n16k:.0f} idle GPUs")

# %% [markdown]
# ### Predict
#
# How many hours pass, on average, between two failures of 16,384 H100s? And what share of the
# wall time do you expect a 405B job with synchronous checkpoints to keep for training?

# %%
my_guess_mtbf_h = None      # e.g. 24
my_guess_goodput = None     # e.g. 0.8

# %% [markdown]
# ### Failures at 1,000 and 16,000 GPUs

# %%
rows = []
for c in (c1k, c16k):
    mtbf_h = ms.cluster_mtbf_h(c)
    rows.append({"GPUs": f"{c.accelerators:,}", "MTBF": ms.fmt(mtbf_h * 3600, "s"),
                 "failures per day": f"{24 / mtbf_h:.3g}",
                 "P(a failure in 24 h)": ms.fmt(ms.p_any_failure(c, hours=24), "%"),
                 "failures in 54 days": f"{ms.expected_failures(c, 54 * 24):.0f}"})
ms.table(rows, title="DGX H100 clusters, default component failure rates")

# %% [markdown]
# Sixteen times the GPUs, one sixteenth of the time between failures. Where do they come from?

# %%
ms.table(ms.reliability.failure_breakdown(c16k, hours=24),
         title="Expected failures per day on 16,384 H100s, by cause")

# %% [markdown]
# GPUs and their HBM cause more than half of all interruptions, as in the Llama 3 log the rates
# were taken from. Those rates reproduce the log exactly (case R1 below checks the arithmetic);
# the other cases test the model on data it was not built from: Meta's two A100 research
# clusters and the projections and effective-training-time estimates of Kokolis et al.

# %%
def outcome_rows(area):
    out = []
    for o in ms.validation.run(ms.validation.cases([area])):
        out.append({"case": o.case.id, "what": o.case.title,
                    "predicted": f"{o.predicted:.4g}",
                    "published": f"{o.case.published:.4g}",
                    "error": f"{o.error:+.1%}",
                    "within tolerance": "yes" if o.passed else "no"})
    return out


ms.table(outcome_rows("reliability"), title="Failure model against published statistics")

# %% [markdown]
# The published per-node rates differ between fleets by more than the model's own error: Meta's
# RSC-1 fails 2.8 times as often as RSC-2 with the same A100 hardware, and the OPT-175B run of
# 2021 restarted far more often than either. The table below turns each published rate into the
# MTBF it would give 16,384 GPUs.

# %%
rows = []
for o in ms.reliability.observations().values():
    rate = o.node_failures_per_day
    mtbf_h = ms.cluster_mtbf_h(c16k, node_failures_per_day=rate)
    rows.append({"fleet": o.name, "GPUs": f"{o.accelerators:,}",
                 "failures per 1,000 node-days": f"{rate * 1000:.3g}",
                 "MTBF at 16,384 GPUs": ms.fmt(mtbf_h * 3600, "s")})
ms.table(rows, title="Published failure rates, scaled to 16,384 GPUs")

# %%
fleets = ms.reliability.observations()
rsc1, rsc2, opt = (fleets[k].node_failures_per_day
                   for k in ("meta-rsc-1", "meta-rsc-2", "opt-175b"))
default = ms.node_failure_rate_per_h(c16k.node) * 24
assert rsc2 < default < rsc1 < opt
print(f"default: {default * 1000:.2f} failures per 1,000 node-days")
print(f"RSC-1 / RSC-2 = {rsc1 / rsc2:.1f}x; OPT-175B / default = {opt / default:.1f}x")

# %% [markdown]
# OPT-175B ran on a young cluster in 2021 and counted host swaps as failures; the Llama 3 run had
# automated health checks that remove failing nodes before they take a job down again. Treat the
# default as a mature fleet and scale it with `node_failures_per_day` when you know your own.
#
# ### What a checkpoint holds

# %%
models = {"Llama-3-70B": (8, 4), "Llama-3.1-405B": (8, 16)}   # (TP, PP) used below
rows = []
for opt_name in ("adamw", "sgd-momentum", "sgd", "adafactor"):
    row = {"optimizer": opt_name}
    for name in models:
        parts = ms.checkpoint_bytes(name, opt_name)
        total = sum(parts.values())
        row[name] = f"{ms.fmt(total, 'B')} ({total / ms.model(name).params:.3g} B/param)"
    rows.append(row)
ms.table(rows, title="Checkpoint size by optimizer (bf16 weights + fp32 master + states)")

# %% [markdown]
# Adafactor's factored second moment is a fraction of a percent of the parameters, so it costs
# about what plain SGD does. Who writes those bytes? With plain data parallelism only replica 0 writes; ZeRO-1 spreads the
# master weights and optimizer states over all replicas; ZeRO-3 (FSDP) also the weights.

# %%
rows = []
for z in (0, 1, 3):
    k = ms.checkpoint("llama-3.1-405b", c16k, tp=8, pp=16, zero_stage=z)
    rows.append({"ZeRO stage": z, "busiest rank writes": ms.fmt(k.rank_B, "B"),
                 "busiest node writes": ms.fmt(k.node_B, "B"),
                 "sync stall": ms.fmt(k.stall_s, "s"),
                 "async stall": ms.fmt(k.d2h_s, "s")})
ms.table(rows, title="Llama-3.1-405B on 16,384 H100s (TP 8 x PP 16 x DP 128), Lustre")

# %% [markdown]
# The size model against published checkpoints: Megatron's 1T-parameter model on Selene and
# OPT-175B. The notes say where and why they differ.

# %%
ms.table(outcome_rows("checkpoint"), title="Checkpoint model against published runs")

# %%
import textwrap

for case in ms.validation.cases(["checkpoint"]):
    print(textwrap.fill(f"{case.id}: {case.note}", 76), end="\n\n")

# %% [markdown]
# ### The interval trade-off
#
# Checkpoint often and the stalls add up; checkpoint rarely and each failure throws away more
# work. Here is a synchronous save of Llama-3.1-405B on 16,384 H100s, over a range of intervals.

# %%
def sync405(**kw):
    return ms.checkpoint("llama-3.1-405b", c16k, tp=8, pp=16, strategy="sync", **kw)


tau = np.geomspace(30, 4 * 3600, 200)
sweep, best = sync405(interval_s=tau), sync405()
young_s, daly_s = best.young_s, best.daly_s
curves = {"checkpoint stalls": sweep.overhead_fraction,
          "lost to failures": sweep.lost_fraction,
          "total waste (1 - goodput)": 1 - sweep.goodput}
marks = {f"Young, {ms.fmt(young_s, 's')}": young_s,
         f"Daly, {ms.fmt(daly_s, 's')}": daly_s}
fig = ms.plots.interval_tradeoff(tau, curves, marks=marks,
                                 title="Llama-3.1-405B, 16,384 H100s, sync to Lustre")

# %%
print(f"stall {ms.fmt(best.stall_s, 's')}, cluster MTBF {ms.fmt(best.mtbf_s, 's')}, "
      f"restart {ms.fmt(best.restart_s, 's')} per failure")
choices = {"Young": young_s, "Daly": daly_s, "hourly": 3600.0, "every 5 min": 300.0}
for label, t in choices.items():
    g = sync405(interval_s=t).goodput
    print(f"{label:12s} interval {ms.fmt(t, 's'):>9s}: goodput {ms.fmt(g, '%')}")
assert sync405(interval_s=daly_s).goodput >= sync405(interval_s=young_s).goodput
assert sync405(interval_s=young_s).goodput > sync405(interval_s=3600.0).goodput

# %% [markdown]
# The curve is flat near the optimum: Young's and Daly's intervals give the same goodput to three
# digits, and being off by a factor of two costs little; an hourly save, eight times too rare,
# costs far more. Most of the waste left at the optimum is not the checkpoint at
# all: it is the restart after each failure (printed above).
#
# ### Sync, async and in-memory
#
# The same two models at 1,024 and 16,384 GPUs, each strategy at its best interval (Daly's
# optimum, or the shortest interval at which the background copy keeps up).

# %%
rows, lost = [], {}
for name, (tp, pp) in models.items():
    for c in (c1k, c16k):
        for strategy in ("sync", "async", "in-memory"):
            k = ms.checkpoint(name, c, tp=tp, pp=pp, strategy=strategy)
            rows.append({"model": name.split("-")[-1], "GPUs": f"{c.accelerators:,}",
                         "strategy": strategy, "stall": ms.fmt(k.stall_s, "s"),
                         "restore": ms.fmt(k.restore_s, "s"),
                         "interval": ms.fmt(k.interval_s, "s"),
                         "goodput": ms.fmt(k.goodput, "%")})
            lost.setdefault(strategy, []).append(1 - k.goodput)
ms.table(rows, title="Checkpoint strategies on DGX H100 clusters, Lustre")

# %%
labels = [f"{n.split('-')[-1]}, {c.accelerators // 1000}K GPUs"
          for n in models for c in (c1k, c16k)]
fig = ms.plots.bars(labels, {s: 100 * np.array(v) for s, v in lost.items()},
                    ylabel="wall time not training (%)",
                    title="Waste by checkpoint strategy")

# %% [markdown]
# Going asynchronous removes almost all of the stall: only the copy into host memory remains, a
# fraction of a second over PCIe. That lets the job checkpoint every minute or two, so a failure
# loses little work. The model charges the background persist nothing, but it shares PCIe, host
# memory and the network with training (CheckFreq measures the slowdown), so real jobs choose
# somewhat longer intervals than these optima. In-memory copies add a faster restore (from a peer's memory instead of the
# file system) and a shorter lag, but with a fast parallel file system the restore was already
# seconds against a restart of minutes, so the two end up close. Both need host memory:

# %%
k = ms.checkpoint("llama-3.1-405b", c16k, tp=8, pp=16, strategy="in-memory")
print(f"in-memory buffers per node: {ms.fmt(k.host_memory_needed_B, 'B')} of "
      f"{ms.fmt(c16k.node.host_memory_B, 'B')} host memory")
print(f"probability a failure also lost every in-memory copy: {k.p_memory_loss:.1e}")

# %% [markdown]
# ### Storage tiers
#
# Where the bytes go matters most for a synchronous save and for the restore. The busiest node of
# the 405B job writes its share to each tier:

# %%
k = ms.checkpoint("llama-3.1-405b", c16k, tp=8, pp=16)
rows = []
for tier in ms.storage_tiers():
    row = {"tier": tier.name, "kind": tier.kind,
           "durable": "yes" if tier.durable else "no",
           "write": ms.fmt(tier.write_s(k.size_B, k.node_B), "s"),
           "read": ms.fmt(tier.read_s(k.size_B, k.node_B), "s")}
    if tier.durable:
        row["sync goodput"] = ms.fmt(ms.checkpoint("llama-3.1-405b", c16k, tp=8, pp=16,
                                                   storage=tier.name).goodput, "%")
    else:
        row["sync goodput"] = "n/a: lost with the node"
    rows.append(row)
ms.table(rows, title=f"Llama-3.1-405B checkpoint ({ms.fmt(k.size_B, 'B')}), 16,384 H100s")

# %% [markdown]
# Local NVMe is the fastest place to write — every node has its own drives — but a checkpoint
# there dies with its node, which is exactly the failure it is meant to survive; systems use it
# as a staging area before a durable tier. A shared file system is bound by its aggregate rate;
# an object store by each node's link. The model times the bytes only: real restores add file
# opening, metadata and deserialisation, so they take longer than these bandwidth bounds.
#
# ### Goodput against cluster size

# %%
nodes = np.array([16, 32, 64, 128, 256, 512, 1024, 2048, 4096])
curves = {s: ms.checkpoint("llama-3.1-405b", "dgx-h100", tp=8, pp=16, strategy=s,
                           nodes=nodes).goodput for s in ("sync", "async", "in-memory")}
curves["sync, 5x the failure rate"] = ms.checkpoint(
    "llama-3.1-405b", "dgx-h100", tp=8, pp=16, nodes=nodes,
    node_failures_per_day=5 * ms.node_failure_rate_per_h(c16k.node) * 24).goodput
fig = ms.plots.lines(nodes * 8, {s: 100 * g for s, g in curves.items()}, xlabel="GPUs",
                     ylabel="goodput (%)", logx=True,
                     title="Llama-3.1-405B on DGX H100, Lustre")

# %%
for s, g in curves.items():
    print(f"{s:26s} {ms.fmt(g[0], '%'):>7s} at {nodes[0] * 8:,} GPUs -> "
          f"{ms.fmt(g[-1], '%'):>7s} at {nodes[-1] * 8:,} GPUs")

# %% [markdown]
# Goodput falls with scale because the failure rate grows with the node count while the
# downtime per failure does not shrink. At tens of thousands of GPUs every minute of restart
# matters more than the checkpoint itself.
#
# Your guesses, compared with the model:

# %%
sync16k = ms.checkpoint("llama-3.1-405b", c16k, tp=8, pp=16, strategy="sync")
print(f"MTBF at 16,384 GPUs: {ms.cluster_mtbf_h(c16k):.2f} h"
      + ("" if my_guess_mtbf_h is None else f" (your guess: {my_guess_mtbf_h} h)"))
guess = "" if my_guess_goodput is None else f" (your guess: {my_guess_goodput:.0%})"
print(f"goodput of the 405B job, sync: {ms.fmt(sync16k.goodput, '%')}" + guess)

# %% [markdown]
# ### Explore
#
# Change the interval, the strategy, the storage bandwidth and the cluster size. An interval
# shorter than the background write is refused with the reason.

# %% tags=["nbval-ignore-output"]
explorer = ms.widgets.checkpoint_explorer()
explorer

# %% tags=["nbval-ignore-output"]
explorer.controls["storage_GBps"].value = 100.0   # a smaller file system
explorer.controls["strategy"].value = "sync"

# %%
print(explorer.summary_text())

# %% [markdown]
# ### Measure this machine's disk
#
# Save a NumPy training state (weights and two optimizer moments) to the local disk, flush it,
# drop it from the page cache and read it back. The numbers change from run to run.

# %% tags=["nbval-ignore-output"]
disk = ms.measure.disk_bandwidth(size_B=128e6)
nvme = ms.storage_tier("local-nvme")
print(f"this machine: write {ms.fmt(disk.write_Bps, 'B/s')}, "
      f"read {ms.fmt(disk.read_Bps, 'B/s')}")
print(f"a DGX H100 node's 8 NVMe drives: write {ms.fmt(nvme.write_Bps, 'B/s')} "
      f"({nvme.write_Bps / disk.write_Bps:.0f}x), read {ms.fmt(nvme.read_Bps, 'B/s')}")
state_B = sum(ms.checkpoint_bytes("llama-3-8b").values())
print(f"Llama-3-8B checkpoint ({ms.fmt(state_B, 'B')}) on this disk: "
      f"save {ms.fmt(state_B / disk.write_Bps, 's')}, "
      f"load {ms.fmt(state_B / disk.read_Bps, 's')}")

# %%
assert 1e6 < disk.write_Bps < 1e12 and 1e6 < disk.read_Bps < 1e12
print("Measured: the local disk was written and read back; see the numbers above.")

# %% [markdown]
# ### Exercises
#
# A student project checkpointed a Llama-style model with plain `torch.save` of model, AdamW
# optimizer, scheduler and data-loader state: about **35 s to save** and **12 s to load**. The
# model: 32 layers, $d$ = 4,096, 32 heads sharing 8 KV heads, FFN 6,144, RoPE base 500,000,
# context 4,096. The vocabulary is not stated; take Llama 3's 128,256 tokens with untied
# embeddings. Plain PyTorch mixed precision keeps the parameters in fp32, so the checkpoint is
# fp32 weights plus AdamW's two fp32 moments.

# %%
lsai = ms.Transformer(name="LSAI-Llama", layers=32, d_model=4096, heads=32, kv_heads=8,
                      d_ff=6144, vocab=128256, max_context=4096)
lsai_B = sum(ms.checkpoint_bytes(lsai, "adamw", precision="fp32").values())
print(f"{lsai.params / 1e9:.2f} B parameters, checkpoint {ms.fmt(lsai_B, 'B')} "
      f"({lsai_B / lsai.params:.0f} B/param)")

# %% [markdown]
# **06.11** What effective write bandwidth (bytes per second) did the 35 s save reach?

# %%
### BEGIN SOLUTION
answer = lsai_B / 35
### END SOLUTION
ms.exercises.check("06.11", answer)

# %% [markdown]
# **06.12** And the 12 s load?

# %%
### BEGIN SOLUTION
answer = lsai_B / 12
### END SOLUTION
ms.exercises.check("06.12", answer)

# %% [markdown]
# One writer at that rate uses a small slice of a parallel file system built for hundreds of
# GB/s: a single `torch.save` stream is bound by one process serialising and one client link,
# which is why sharded, parallel saves matter.
#
# **06.13** If this save stalled a job on 128 DGX H100 nodes (1,024 GPUs) for 35 s, how many
# minutes of training should separate two checkpoints (Daly)?

# %%
### BEGIN SOLUTION
answer = ms.daly_interval_s(35, ms.cluster_mtbf_h(c1k) * 3600) / 60
### END SOLUTION
ms.exercises.check("06.13", answer)

# %% [markdown]
# **06.14** For Llama-3.1-405B on 2,048 DGX H100 nodes (TP 8, PP 16, Lustre), how many
# percentage points of goodput does asynchronous checkpointing gain over synchronous, each at
# its best interval?

# %%
### BEGIN SOLUTION
kw = dict(tp=8, pp=16, storage="lustre")
answer = 100 * (ms.checkpoint("llama-3.1-405b", c16k, strategy="async", **kw).goodput
                - ms.checkpoint("llama-3.1-405b", c16k, strategy="sync", **kw).goodput)
### END SOLUTION
ms.exercises.check("06.14", answer)

# %% [markdown]
# ### Key takeaways
#
# - Failure rates add: a cluster's MTBF is one node's divided by the node count. Sixteen thousand
#   GPUs fail every few hours, and a month-long job sees hundreds of interruptions.
# - A checkpoint is 14 bytes per parameter with mixed-precision AdamW (no gradients); how fast it
#   is written depends on who writes it (ZeRO spreads the bytes) and where (aggregate file system
#   bandwidth, per-node links).
# - Checkpoint every $\sqrt{2\delta M}$ (Young) or Daly's slightly shorter interval; the optimum
#   is flat, so the order of magnitude matters more than the digits.
# - Asynchronous and in-memory checkpoints shrink the stall to a copy into host memory, which
#   makes frequent checkpoints cheap; what remains at scale is the restart time.
# - Published failure rates differ by several times between fleets: measure yours.
#
# ### Further reading
#
# - Llama Team, "The Llama 3 Herd of Models", 2024, §3.3.4 (failure table).
# - A. Kokolis et al., "Revisiting Reliability in Large-Scale Machine Learning Research
#   Clusters", HPCA 2025.
# - J. W. Young, "A first order approximation to the optimum checkpoint interval", CACM 17(9), 1974.
# - J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps",
#   Future Generation Computer Systems 22(3), 2006.
# - Z. Wang et al., "Gemini: Fast Failure Recovery in Distributed Training with In-Memory
#   Checkpoints", SOSP 2023; J. Mohan et al., "CheckFreq", FAST 2021.
# - D. Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
#   Megatron-LM", SC 2021, §5.10 (checkpointing the 1T model).
