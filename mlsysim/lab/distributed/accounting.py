"""Where a checkpoint's cost to the training goes: the CPU time of each of a rank's threads and of the
whole machine, read at the end of every step, and its growth in a checkpoint's cycle (no PyTorch).

A rank of the lab's job runs its training in its main thread; gloo moves the collectives' bytes in
threads of its own (``gloo_*``, ``pt_gloo_*``); a checkpoint engine writes from background threads
(this package's writer lives as long as the engine, ``dcp.async_save``'s ends with its save). Linux
counts each thread's user and kernel time and its page faults (``/proc/self/task/<tid>/stat``) and the
whole machine's time per state (``/proc/stat``: user, system, idle, the host's ``steal`` ...).

:func:`snapshot` reads them; rank 0 adds one to each step's event. :func:`cycles` takes, for each
checkpoint, the same cycle as :func:`overhead_per_checkpoint` (the first
``every // 2`` steps after the checkpoint less the next ``every // 2``) of every count. The threads
that ended between two snapshots (a save's own thread) count as the process's CPU time less its
living threads'.

**The accounting.** While the ranks keep every core busy (the machine's idle time does not change),
a cycle that lasts w seconds longer holds C w more core-seconds of work (C cores): the extra
core-seconds over C are the wall time the training lost. Per rank, that work splits into the training
thread's, gloo's and the background threads'; the machine adds the kernel's own threads and the CPU
time the host takes (``steal``).

>>> snaps = [{"proc": [1.0 * s, 0.0], "threads": {"main": [1.0 * s, 0.0, 100 * s]},
...            "machine": [2.0 * s, 0, 0, 0, 0, 0, 0, 0]} for s in range(1, 9)]
>>> ev = [{"step": s, "t": float(s) + (0.5 if s > 4 else 0.0), "acct": snaps[s - 1]} for s in range(1, 9)]
>>> c = cycles(ev, every=4, plain=2)       # one checkpoint (step 4), its cycle steps 5-6, baseline 7-8
>>> c["wall_s"], c["machine_busy_s"]
([0.5], [0.0])
"""
from __future__ import annotations

import os
import resource
import statistics

from ...errors import MlsysimError, check_integer

MACHINE_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
GLOO_PREFIXES = ("gloo", "pt_gloo")
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
PAGE_B = os.sysconf("SC_PAGE_SIZE")          # what one minor fault maps


def _role(tid: int, name: str) -> str:
    if tid == os.getpid():
        return "main"
    return "gloo" if name.startswith(GLOO_PREFIXES) else "background"


def snapshot() -> dict:
    """This process's CPU seconds (``proc``: user, system, all its threads, ended ones included), its
    minor faults (``faults``, ended threads' included), its living threads' by role (``threads``:
    {"main" | "gloo" | "background": [user s, system s, minor faults]}) and the machine's (``machine``:
    seconds in each state of :data:`MACHINE_FIELDS`)."""
    threads: dict = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:                        # the thread ended meanwhile: the process's time holds it
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        x = stat[stat.rindex(")") + 2:].split()
        row = threads.setdefault(_role(int(tid), name), [0.0, 0.0, 0])
        row[0] += int(x[11]) * _TICK_S
        row[1] += int(x[12]) * _TICK_S
        row[2] += int(x[7])
    with open("/proc/stat") as f:
        machine = [int(v) * _TICK_S for v in f.readline().split()[1:1 + len(MACHINE_FIELDS)]]
    t = os.times()
    return {"proc": [t.user, t.system], "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt,
            "threads": threads, "machine": machine}


def _counts(a: dict) -> dict:
    """One snapshot as flat counts: the roles' user, system and faults; ``ended_s``, the CPU time of
    threads no longer listed is found only as a difference (below)."""
    out = {"proc_s": a["proc"][0] + a["proc"][1]}
    for role in ("main", "gloo", "background"):
        u, s, faults = a["threads"].get(role, [0.0, 0.0, 0])
        out.update({f"{role}_user_s": u, f"{role}_system_s": s, f"{role}_faults": faults})
    m = dict(zip(MACHINE_FIELDS, a["machine"]))
    out["machine_busy_s"] = sum(v for k, v in m.items() if k not in ("idle", "iowait"))
    out["machine_idle_s"] = m["idle"] + m["iowait"]
    out["steal_s"] = m["steal"]
    return out


def _between(a: dict, b: dict) -> dict:
    """The counts from snapshot ``a`` to ``b``. Living threads are summed by role, so a thread that ended
    in between takes its time out of its role's sum: ``ended_s`` (the process's growth less the roles')
    puts it back, and the ended thread's time that ``a`` held is taken out of the role it was in."""
    ca, cb = _counts(a), _counts(b)
    d = {k: cb[k] - ca[k] for k in cb}
    listed = sum(d[f"{r}_{k}_s"] for r in ("main", "gloo", "background") for k in ("user", "system"))
    d["ended_s"] = d["proc_s"] - listed
    return d


def checkpoint_cycles(steps, every: int, plain: int) -> list[tuple[int, int, int]]:
    """(checkpoint, end of its cycle, end of its baseline) for each checkpoint among ``steps`` (the steps
    timed) with ``every`` >= 4: a checkpoint every ``every`` steps after the ``plain`` ones, its cycle the
    first ``every // 2`` steps after it, its baseline the next ``every // 2``, all of them timed.

    >>> checkpoint_cycles(range(1, 17), every=4, plain=4)
    [(8, 10, 12), (12, 14, 16)]
    """
    steps, h = set(steps), every // 2
    return [(s, s + h, s + 2 * h) for s in sorted(steps)
            if s > plain and s % every == 0 and s + every in steps and s + h in steps and s + 2 * h in steps]


def cycle_overheads(step_ends_s, every: int, plain: int, cycle: int) -> list[float]:
    """Each checkpoint's overhead (seconds) with a cycle of ``cycle`` steps, from rank 0's step ends
    (``step_ends_s``, steps 1, 2, ... as :func:`overhead_per_checkpoint` keeps them): the first ``cycle`` steps
    after the checkpoint (its stall included) less the rest of its interval, ``every`` − ``cycle`` steps, scaled
    to ``cycle`` steps; the checkpoints of :func:`checkpoint_cycles`. ``cycle`` = ``every`` / 2 (``every`` even, as
    the lab's jobs take it) gives the recorded ``overheads_s``; a shorter cycle leaves fewer steps to spread, but
    counts in the baseline any step after the first that the checkpoint still slows.

    >>> ends = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.5, 9.6, 10.6, 11.6]   # step 9 holds 0.5 s, step 10 0.1 s
    >>> [round(x, 3) for x in cycle_overheads(ends, every=4, plain=4, cycle=2)]
    [0.6]
    >>> [round(x, 3) for x in cycle_overheads(ends, every=4, plain=4, cycle=1)]   # step 10 in the baseline
    [0.467]
    """
    check_integer("every", every)
    check_integer("cycle", cycle)
    if not 1 <= cycle < every:
        raise MlsysimError(f"cycle must be 1 to every - 1 = {every - 1} steps, got {cycle}")
    end = dict(enumerate(step_ends_s, start=1))
    out = []
    for s, _, _ in checkpoint_cycles(end, every, plain):
        held, rest = end[s + cycle] - end[s], end[s + every] - end[s + cycle]
        out.append(held - rest * cycle / (every - cycle))
    return out


def churn_Bps(events, plain: int) -> float | None:
    """Bytes per second of memory that rank 0's threads fault in (minor faults x the page size) in a plain
    step, the median of the plain steps after the first, from the step events' ``acct`` (:func:`snapshot`);
    None where they hold none. The process's count (``faults``) where the snapshot has it, which keeps the
    faults of a thread that ended between two steps; else the living threads' sum. Each fault is a page the
    rank takes, most of them freed a moment before (PyTorch's CPU allocator unmaps a large tensor when it
    dies): the memory the training churns.

    >>> ev = [{"step": s, "t": 0.5 * s, "acct": {"threads": {"main": [0, 0, 1000 * s], "gloo": [0, 0, 24 * s]}}}
    ...       for s in range(1, 5)]
    >>> churn_Bps(ev, plain=4) == 1024 * PAGE_B / 0.5
    True
    """
    at = {e["step"]: e for e in events if "step" in e and "t" in e and "acct" in e}

    def faults(e):
        a = e["acct"]
        return a["faults"] if "faults" in a else sum(row[2] for row in a["threads"].values())
    rates = [(faults(at[s]) - faults(at[s - 1])) * PAGE_B / (at[s]["t"] - at[s - 1]["t"])
             for s in range(2, plain + 1) if s in at and s - 1 in at and at[s]["t"] > at[s - 1]["t"]]
    return statistics.median(rates) if rates else None


def gloo_cpu_s(events, plain: int) -> float | None:
    """CPU seconds of rank 0's gloo threads (user and kernel) in a plain step, from the step events' ``acct``
    (:func:`snapshot`): their time from the end of the first plain step to the end of the last, per step (the
    kernel counts it in ticks of 10 ms, coarser than one short step); None where the events hold no two.

    >>> ev = [{"step": s, "acct": {"threads": {"main": [s, 0, 0], "gloo": [0.3 * s, 0.1 * s, 0]}}} for s in range(1, 5)]
    >>> round(gloo_cpu_s(ev, plain=4), 6)
    0.4
    """
    at = {e["step"]: e["acct"]["threads"].get("gloo", [0.0, 0.0, 0]) for e in events if "step" in e and "acct" in e}
    steps = [s for s in range(1, plain + 1) if s in at]
    if len(steps) < 2:
        return None
    a, b = at[steps[0]], at[steps[-1]]
    return (b[0] + b[1] - a[0] - a[1]) / (steps[-1] - steps[0])


def cycles(events, every: int, plain: int) -> dict:
    """{count: [its growth in each checkpoint's cycle over its baseline]} from rank 0's step events
    (``step``, ``t`` and ``acct``, a :func:`snapshot`), for the checkpoints of
    :func:`overhead_per_checkpoint` with ``every`` >= 4: ``wall_s`` (the
    overhead), ``proc_s``, each role's ``*_user_s``, ``*_system_s`` and ``*_faults``, ``ended_s``,
    ``machine_busy_s`` (the machine's core-seconds of work: all but idle and I/O wait),
    ``machine_idle_s`` and ``steal_s``."""
    check_integer("every", every)
    if every < 4 or type(plain) is not int or plain < 2:
        raise MlsysimError(f"every must be >= 4 (a cycle and its baseline between two checkpoints) and plain an "
                           f"integer >= 2, got every={every!r}, plain={plain!r}")
    at = {e["step"]: e for e in events if "step" in e and "t" in e and "acct" in e}
    out: dict = {}
    for s, c, b in checkpoint_cycles(at, every, plain):
        cyc, base = _between(at[s]["acct"], at[c]["acct"]), _between(at[c]["acct"], at[b]["acct"])
        cyc["wall_s"], base["wall_s"] = at[c]["t"] - at[s]["t"], at[b]["t"] - at[c]["t"]
        for k in cyc:
            out.setdefault(k, []).append(cyc[k] - base[k])
    if not out:
        raise MlsysimError("no checkpoint has a full interval of accounted steps after it")
    return out


def means(c: dict) -> dict:
    """The mean of each count's growth over the cycles of :func:`cycles`."""
    return {k: statistics.mean(v) for k, v in c.items()}


def overhead_per_checkpoint(events, every: int, plain: int) -> dict:
    """The measured overhead per checkpoint from rank 0's step events of one job (each with ``t``, the
    clock at the end of the step): the first ``plain`` steps ran without checkpoints, then one every
    ``every`` steps. A checkpoint's cycle is from the end of its step to the end of the steps after it
    (its stall included). With ``every`` >= 4 each cycle has a baseline of its own, in the same stretch
    of the job: the cycle is the first ``every // 2`` steps after the checkpoint, the baseline the next
    ``every // 2``, the last before the next checkpoint (a background write done by then); a job whose
    steps drift (warming up, the machine's other load) biases no cycle against a baseline timed minutes
    before. With ``every`` < 4 the cycle is the ``every`` steps after the checkpoint, less ``every`` plain
    steps (the median of the plain steps after the first). Returns ``plain_step_s``, ``plain_churn_Bps`` (the
    memory rank 0 faults in per second in a plain step, where the events hold ``acct``:
    :func:`~mlsysim.lab.distributed.accounting.churn_Bps`; None otherwise), ``plain_gloo_cpu_s`` (its gloo
    threads' CPU time in a plain step: :func:`~mlsysim.lab.distributed.accounting.gloo_cpu_s`), ``plain_step_cpu_s``
    (the rank's CPU time in a plain step, all its threads, where the events hold ``cpu``, its
    ``time.process_time()``; None otherwise), ``overheads_s`` (one per checkpoint with a full interval
    after it), ``overhead_s`` (their mean: what the training paid in all, per checkpoint, as a run
    with checkpoints less one without; None without any) and, where the events hold ``cpu``, the same
    of the rank's CPU time (``overheads_cpu_s``, ``overhead_cpu_s``: its own background work, a
    writer thread's included, beside what the training's threads spent more) and ``step_ends_s`` (rank 0's clock
    at the end of steps 1, 2, ... from the first's; None where a step is missing): another cycle can be taken
    from a record.

    >>> ev = [{"step": s, "t": 0.1 * s + (0.05 if s > 6 else 0) + (0.03 if s > 8 else 0)} for s in range(1, 11)]
    >>> o = overhead_per_checkpoint(ev, every=2, plain=4)
    >>> round(o["plain_step_s"], 3), [round(x, 3) for x in o["overheads_s"]]
    (0.1, [0.05, 0.03])
    >>> t = [0.2 * s - 0.05 * max(0, s - 12) + (0.05 if s > 8 else 0) for s in range(1, 17)]  # 0.15 s from step 13
    >>> o = overhead_per_checkpoint([{"step": s, "t": x} for s, x in enumerate(t, start=1)], every=4, plain=4)
    >>> [round(x, 3) for x in o["overheads_s"]]     # against the plain steps, the second would be 0.3 - 0.4
    [0.05, 0.0]
    >>> [round(x, 2) for x in o["step_ends_s"][:3]], len(o["step_ends_s"])
    ([0.0, 0.2, 0.4], 16)
    """
    check_integer("every", every)
    if type(plain) is not int or plain < 2:
        raise MlsysimError(f"plain must be an integer >= 2 (steps without checkpoints, the first one a warm-up), "
                           f"got {plain!r}")
    t = {e["step"]: e["t"] for e in events if "step" in e and "t" in e}
    base = [t[s] - t[s - 1] for s in range(2, plain + 1) if s in t and s - 1 in t]
    if not base:
        raise MlsysimError("no plain step was timed: the events hold no 't' of consecutive steps")
    step = statistics.median(base)
    cpu = {e["step"]: e["cpu"] for e in events if "step" in e and "cpu" in e}
    cpu_base = [cpu[s] - cpu[s - 1] for s in range(2, plain + 1) if s in cpu and s - 1 in cpu]
    halves = checkpoint_cycles(t, every, plain) if every >= 4 else []
    ck = [s for s, _, _ in halves] if every >= 4 else [s for s in sorted(t) if s > plain and s % every == 0
                                                       and s + every in t]

    def per_cycle(x: dict, plain_s: float) -> list:
        if every >= 4:
            return [(x[c] - x[s]) - (x[b] - x[c]) for s, c, b in halves]
        return [x[s + every] - x[s] - every * plain_s for s in ck]

    over = per_cycle(t, step)
    cpu_over = per_cycle(cpu, statistics.median(cpu_base)) if cpu_base and all(
        s in cpu and s + every in cpu for s in ck) else None
    return {"plain_step_s": step, "plain_step_cpu_s": statistics.median(cpu_base) if cpu_base else None,
            "plain_churn_Bps": churn_Bps(events, plain), "plain_gloo_cpu_s": gloo_cpu_s(events, plain),
            "overheads_s": over, "overhead_s": statistics.mean(over) if over else None,
            "overheads_cpu_s": cpu_over, "overhead_cpu_s": statistics.mean(cpu_over) if cpu_over else None,
            "step_ends_s": [t[s] - t[1] for s in sorted(t)] if set(t) == set(range(1, max(t) + 1)) else None}
