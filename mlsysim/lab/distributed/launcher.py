"""Drive the distributed lab from Python: launch ``torchrun`` agents, kill ranks or nodes, resume, reshard.

No PyTorch import here (the workers import it): :func:`run_distributed` starts one ``python -m
torch.distributed.run`` (torchrun) agent per node, with a c10d rendezvous on ``127.0.0.1`` at a free port, reads the
JSON lines of :mod:`mlsysim.lab.distributed.worker`, SIGKILLs the rank that paused at a named point (or a random
rank at a random time), or a whole node, lets ``--max-restarts`` restart the group, and compares every loss after
the resume with an uninterrupted run's. Every process it starts is killed by its pid before it returns, whatever
happens, and the memory tiers it created are removed.

**Two nodes on one machine.** Each node is a torchrun agent with ``--nnodes 2`` (or ``1:2``, elastic) and its own
memory tier, ``<root>/<node>/`` under ``/dev/shm``; the node's name is the ``MLSYSIM_NODE`` this driver sets for its
agent (``node-0``, ``node-1``, a replacement ``node-2`` ...), never the group rank the rendezvous hands out.
``node-0`` hosts the rendezvous' store (``is_host``; losing it would end the job, as losing the store's host does on
real machines), so the node lost is always another. Losing a node: its first rank pauses at the planned point, then
the agent is stopped (SIGSTOP, so that it starts nothing), every worker it spawned is SIGKILLed (torchrun starts
each in a session of its own, so the agent's process group does not hold them), then the agent's process group; its
memory tier is erased and, unless the job is elastic, a replacement agent with an empty memory tier joins. The
rendezvous' timeouts (:data:`RDZV_CONF`) are set so that each recovery takes seconds: a dead node is declared after
``keep_alive_interval`` x ``keep_alive_max_attempt`` = 2 s without heartbeat, and an elastic round closes
``last_call_timeout`` = 3 s after its smallest size is reached. Every agent runs with
``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``: the workers' store is then made anew for every round by its rank 0 (a
surviving agent would otherwise keep the address of the first round's store, and a replacement would wait for one
that is never announced)."""
from __future__ import annotations

import contextlib
import json
import math
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ...errors import MlsysimError
from . import shards, tiers
from .checks import ENGINES, KEEP, KILLS, MODES, check_kill, check_nodes, check_probe_terms, check_world  # noqa: F401
from .failures import failure_line
from .predict import job_prediction
from .terms import overhead_per_checkpoint

KILL_POINTS = ("step", "snapshot", "persist", "shard")   # mid-step, mid-snapshot, mid-persist, before the global commit
#: c10d rendezvous settings (``--rdzv-conf``): seconds, except the attempts.
RDZV_CONF = (("join_timeout", 60), ("last_call_timeout", 3), ("close_timeout", 5), ("keep_alive_interval", 1),
             ("keep_alive_max_attempt", 2))


class LaunchError(MlsysimError):
    """The job could not be launched or did not finish (the message says why, in one line)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the kernel's pick)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    except OSError as e:
        raise LaunchError(f"no free TCP port on 127.0.0.1 for the rendezvous: {e.strerror or e}") from None


def has_torch() -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


LIVE_ENV = "MLSYSIM_LAB_LIVE"


def live_runs() -> tuple[bool, str]:
    """(whether the distributed lab notebook runs its torchrun jobs live, why not): not without PyTorch, nor
    with ``MLSYSIM_LAB_LIVE=0`` (the notebook then reads its recorded run: seconds, not minutes on 2 cores).

    >>> os.environ["MLSYSIM_LAB_LIVE"] = "0"; live_runs()[0]
    False
    >>> del os.environ["MLSYSIM_LAB_LIVE"]
    """
    if not has_torch():
        return False, "PyTorch is not installed (pip install -e '.[torch]')"
    if os.environ.get(LIVE_ENV, "1") == "0":
        return False, f"{LIVE_ENV}=0"
    return True, ""


# --- processes ---------------------------------------------------------------------------------------
def _state(pid: int) -> str | None:
    """The process' state letter (``R``, ``S``, ``T``, ``Z`` ...), or None if there is none."""
    with contextlib.suppress(OSError, IndexError), open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]
    try:
        os.kill(pid, 0)          # no /proc: alive or a zombie, as far as we can tell
        return "?"
    except OSError:
        return None


def running(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie."""
    return _state(pid) not in (None, "Z", "X")


def _children(pid: int) -> set:
    """The processes whose parent is ``pid`` (Linux's ``/proc``; empty elsewhere)."""
    out = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for e in entries:
        if e.isdigit():
            try:
                with open(f"/proc/{e}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.add(int(e))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _kill_session(pid: int) -> None:
    """SIGKILL ``pid`` and its process group (a torchrun worker leads a session of its own)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    _kill(pid)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def ours(pid: int, marker: str) -> bool:
    """Process ``pid`` is alive and its command line holds ``marker`` (the run's directory): a pid
    seen earlier may have been reused by another process since, which must not be signalled. Where
    there is no ``/proc``, alive is all we can tell."""
    if not running(pid):
        return False
    return not os.path.isdir("/proc") or marker in _cmdline(pid)


def _wait_gone(pids, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while any(running(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@dataclass(frozen=True)
class NodeLoss:
    """A node lost at ``point`` of ``step`` (``memory``: once memory checkpoint ``step`` is complete
    on every node; ``stored``: then once durable storage holds it too; or another point of
    :mod:`mlsysim.lab.distributed.worker`): its first rank pauses there, then the driver SIGKILLs its
    agent and every worker and erases its memory tier. ``memory_too``: the other nodes' workers
    are SIGKILLed as well and their memory tiers erased (both copies of the lost node's shards
    gone, the job must read durable storage)."""

    step: int
    point: str = "memory"
    memory_too: bool = False


@dataclass
class Attempt:
    """What one job printed: every JSON event, the pids seen (workers and agents), the kills, the
    exit status, the agents' stderr, the nodes started and where their memory tiers were."""

    events: list = field(default_factory=list)
    pids: set = field(default_factory=set)
    killed: list = field(default_factory=list)    # (attempt, point or "random" or "node", step, rank or node)
    status: int | None = None
    stderr: str = ""
    nodes: list = field(default_factory=list)
    memory_root: str | None = None
    times: list = field(default_factory=list)     # when each event arrived (time.monotonic(), s)
    kill_times: list = field(default_factory=list)
    launched_at: float | None = None              # when the first agent was started (time.monotonic(), s)
    teardowns: list = field(default_factory=list)  # each node loss: s from the kill to the replacement's start

    def start_s(self) -> float | None:
        """Seconds from the launch until the job first resumed (rank 0's first resume event)."""
        first = next((t for e, t in zip(self.events, self.times) if "resumed_from" in e), None)
        return None if first is None or self.launched_at is None else first - self.launched_at

    def downtimes(self) -> list:
        """Seconds from each kill until the job had resumed (rank 0's resume event of the next attempt)."""
        resumed = [t for e, t in zip(self.events, self.times) if "resumed_from" in e][1:]
        return [r - k for k, r in zip(self.kill_times, resumed)]


class _Agent:
    """One torchrun agent (a node): its process, stderr file, stdout pipe and unread bytes."""

    def __init__(self, name: str, cmd: list, env: dict, marker: str):
        self.name, self.marker = name, marker
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.err, env=env, start_new_session=True)
        self.fd: int | None = self.proc.stdout.fileno()
        self.buf = b""
        self.workers: set = set()
        self.lost = False

    def read(self) -> list:
        """The JSON objects of the complete lines now readable (EOF closes the pipe)."""
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            self.close_pipe()
            return []
        self.buf += chunk
        out = []
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict):
                out.append(ev)
        return out

    def close_pipe(self) -> None:
        if self.fd is not None:
            self.proc.stdout.close()
            self.fd = None

    def kill(self) -> None:
        """Stop the agent (it starts nothing more), SIGKILL every worker it spawned, then its group.
        Only processes of this run are signalled: the agent while it is not reaped, its children,
        and the workers it reported whose command line still names the run."""
        alive = self.proc.poll() is None
        if alive:
            os.kill(self.proc.pid, signal.SIGSTOP)
        victims = (_children(self.proc.pid) if alive else set()) | {p for p in self.workers if ours(p, self.marker)}
        for pid in victims:
            _kill_session(pid)
        if alive:
            _kill_session(self.proc.pid)
        self.proc.wait(timeout=30)
        _wait_gone(victims)

    def stderr(self) -> str:
        self.err.seek(0)
        text = self.err.read().decode(errors="replace")
        self.err.close()
        return text


def _worker_args(directory, steps, every, engine, mode, keep, seed, stop_after, checksums, persist_every,
                 d_model, layers, memory_root, pause, node_pause, plain_steps=0, probe_terms=0) -> list:
    args = ["--dir", str(directory), "--steps", str(steps), "--every", str(every), "--engine", engine,
            "--mode", mode, "--keep", str(keep), "--seed", str(seed), "--persist-every", str(persist_every),
            "--d-model", str(d_model), "--layers", str(layers), "--plain-steps", str(plain_steps),
            "--probe-terms", str(probe_terms)]
    if memory_root is not None:
        args += ["--memory-root", str(memory_root)]
    for flag, v in (("--pause", pause), ("--node-pause", node_pause), ("--stop-after", stop_after)):
        args += [flag, str(v)] if v not in (None, "") else []
    return args + (["--checksums"] if checksums else [])


class _Job:
    """One :func:`launch` under way: its agents' command and environment, the planned kills, what they printed."""

    def __init__(self, directory, nproc: int, nodes: int, args: list, restarts: int, victims: dict, replace: bool,
                 random_kills: int, seed: int, root, timeout_s: float):
        self.nproc, self.args, self.restarts, self.victims, self.replace = nproc, args, restarts, victims, replace
        self.random_kills, self.rng, self.root, self.timeout_s = random_kills, random.Random(seed), root, timeout_s
        self.port, self.run_id = free_port(), f"mlsysim-{os.getpid()}-{time.time_ns()}"
        self.marker = f"--dir {directory} "          # in every agent's and worker's command line
        self.nnodes = f"1:{nodes}" if victims and not replace else str(nodes)
        self.env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "TORCHELASTIC_ERROR_FILE": "",
                    "LOGLEVEL": "ERROR", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
        self.agents: dict = {}
        self.out = Attempt(memory_root=None if root is None else str(root))
        self.attempt, self.kill_at = 0, None            # kill_at: (when, pid, rank) of the planned random kill
        self.deadline = time.monotonic() + timeout_s
        self.what = f"the {nodes}-node job of {nproc} ranks each" if nodes > 1 else f"the {nproc}-rank job"

    def start(self, name: str) -> _Agent:
        """Start node ``name``'s torchrun agent (``node-0`` hosts the rendezvous' store)."""
        host = "true" if name == "node-0" else "false"
        conf = ",".join(f"{k}={v}" for k, v in RDZV_CONF)
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", self.nnodes, "--nproc-per-node",
               str(self.nproc), "--max-restarts", str(self.restarts), "--rdzv-backend", "c10d", "--rdzv-endpoint",
               f"127.0.0.1:{self.port}", "--rdzv-id", self.run_id, "--rdzv-conf", f"{conf},is_host={host}",
               "--local-addr", "127.0.0.1", "--monitor-interval", "0.2", "-m", "mlsysim.lab.distributed.worker",
               *self.args]
        agent = _Agent(name, cmd, {**self.env, tiers.NODE_ENV: name}, self.marker)
        self.agents[name] = agent
        self.out.nodes.append(name)
        self.out.nodes.sort(key=lambda n: int(n.rsplit("-", 1)[1]))
        self.out.pids.add(agent.proc.pid)
        return agent

    def lose(self, name: str, loss: NodeLoss, step: int) -> None:
        """Take node ``name`` down (``memory_too``: the others' workers and memory too), then replace it."""
        t_kill = time.monotonic()
        self.agents[name].kill()
        self.agents[name].lost = True
        if self.root is not None:
            shutil.rmtree(tiers.node_dir(self.root, name), ignore_errors=True)
        if loss.memory_too:
            for other in [a for a in self.agents.values() if not a.lost]:
                alive = [p for p in other.workers if ours(p, self.marker)]
                for pid in alive:
                    _kill_session(pid)
                if not _wait_gone(alive):
                    raise LaunchError(f"the workers of {other.name} did not end within 30 s of SIGKILL")
                if self.root is not None:
                    shutil.rmtree(tiers.node_dir(self.root, other.name), ignore_errors=True)
        self.out.killed.append((self.attempt, "node", step, name))
        self.out.kill_times.append(t_kill)
        self.out.teardowns.append(time.monotonic() - t_kill)
        if self.replace:
            self.start(f"node-{len(self.out.nodes)}")                  # node-2, node-3, ...

    def on_event(self, agent: _Agent, ev: dict) -> None:
        """Record an event; SIGKILL the rank that paused (or lose its node); plan a random kill."""
        out = self.out
        out.events.append(ev)
        out.times.append(time.monotonic())
        if "start" in ev:
            self.attempt = max(self.attempt, ev["start"])
            out.pids.add(ev["pid"])
            agent.workers.add(ev["pid"])
        if "paused" in ev:
            node = ev.get("node")
            loss = self.victims.get(node)
            if loss is not None and (ev["paused"], ev["step"]) == (loss.point, loss.step) \
                    and not self.agents[node].lost:
                self.lose(node, loss, ev["step"])
            else:
                if ours(ev["pid"], self.marker):
                    _kill(ev["pid"])
                out.killed.append((self.attempt, ev["paused"], ev["step"], ev["rank"]))
                out.kill_times.append(time.monotonic())
        if ("step" in ev and "loss" in ev and self.kill_at is None and self.attempt < self.random_kills
                and not any(k[0] == self.attempt for k in out.killed)):
            pids = sorted(e["pid"] for e in out.events if e.get("start") == self.attempt)
            r = self.rng.randrange(len(pids))
            self.kill_at = (time.monotonic() + self.rng.uniform(0.0, 0.15), pids[r], r)

    def monitor(self) -> None:
        """Read the agents' events until every pipe is closed, killing as planned, within the deadline."""
        while True:
            now = time.monotonic()
            if now > self.deadline:
                raise LaunchError(f"{self.what} did not finish within {self.timeout_s:.0f} s")
            if self.kill_at is not None and now >= self.kill_at[0]:
                _, pid, r = self.kill_at
                self.kill_at = None
                if not any("done" in e for e in self.out.events) and ours(pid, self.marker):
                    _kill(pid)
                    self.out.killed.append((self.attempt, "random", None, r))
                    self.out.kill_times.append(time.monotonic())
            fds = {a.fd: a for a in self.agents.values() if a.fd is not None}
            if not fds:
                break
            wait = min(self.deadline, self.kill_at[0] if self.kill_at else self.deadline) - now
            ready = select.select(list(fds), [], [], max(0.0, min(wait, 1.0)))[0]
            for fd in ready:
                for ev in fds[fd].read():
                    self.on_event(fds[fd], ev)

    def cleanup(self) -> None:
        """SIGKILL (by pid) what still runs of the job, keep the agents' stderr, remove the memory tiers."""
        for a in self.agents.values():
            if a.proc.poll() is None or any(ours(p, self.marker) for p in a.workers):
                a.kill()
            a.close_pipe()
        self.out.stderr = "".join(a.stderr() for a in self.agents.values())
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)


def launch(directory, nproc: int, steps: int, every: int = 2, engine: str = "sync", mode: str = "fsdp",
           pause: list | None = None, random_kills: int = 0, stop_after: int | None = None,
           checksums: bool = False, keep: int = KEEP, timeout_s: float = 180.0, seed: int = 0, *, nodes: int = 1,
           node_losses=(), replace: bool = True, memory: bool = False, memory_root=None, persist_every: int = 1,
           d_model: int = 32, layers: int = 2, plain_steps: int = 0, probe_terms: int = 0) -> Attempt:
    """One job of ``nodes`` torchrun agents with ``nproc`` ranks each, restarted up to once per planned kill.

    ``random_kills``: the first attempts, in each of which a random rank is SIGKILLed at a random
    time, 0 to 0.15 s after the attempt's first loss (unless the attempt finished first).
    ``pause``: then one ``POINT@STEP:RANK`` (or ``None``) per attempt; the paused rank is SIGKILLed.
    ``node_losses``: :class:`NodeLoss` es, of ``node-1``, then of its replacement ``node-2`` ...;
    ``replace=False``: no replacement joins and the job continues on the nodes left (``--nnodes
    1:nodes``; one loss at most). ``memory``: the memory and peer-memory tiers, under
    ``memory_root`` (made and removed here; default: a new directory under ``/dev/shm``).
    ``plain_steps``: the steps trained before the first checkpoint; ``probe_terms``: the times the job times its
    own terms once its last checkpoint is durable (:func:`~mlsysim.lab.distributed.in_job.time_terms`; 0: none)."""
    if not has_torch():
        raise LaunchError("the distributed lab needs PyTorch, the optional extra: pip install -e '.[torch]'")
    check_nodes(nodes)
    check_probe_terms(probe_terms)
    node_losses = list(node_losses)
    if node_losses and nodes < 2:
        raise MlsysimError("losing a node needs nodes=2: its shards come back from its peer's memory")
    if node_losses and not replace and len(node_losses) > 1:
        raise MlsysimError(f"without a replacement the job runs on one node after the first loss; "
                           f"got {len(node_losses)} node losses")
    if memory_root is not None and Path(memory_root).exists():
        raise MlsysimError(f"{memory_root} exists; the memory tiers need a new directory")
    pause = list(pause or [])
    restarts = len(pause) + random_kills + len(node_losses) + (1 if not replace else 0)
    root = None
    if memory:
        root = Path(memory_root) if memory_root is not None else tiers.make_memory_root()
        root.mkdir(parents=True, exist_ok=True)
    victims = {f"node-{1 + i}": loss for i, loss in enumerate(node_losses)}
    args = _worker_args(directory, steps, every, engine, mode, keep, seed, stop_after, checksums, persist_every,
                        d_model, layers, root,
                        ",".join(["-"] * random_kills + [p or "-" for p in pause]) if pause else "",
                        ",".join(f"{n}={v.point}@{v.step}" for n, v in victims.items()), plain_steps, probe_terms)
    job = _Job(directory, nproc, nodes, args, restarts, victims, replace, random_kills, seed, root, timeout_s)
    out = job.out
    try:
        # an elastic round closes last_call_timeout after its first node joins: the other agents start
        # first and wait for node-0's store, so that they all join within it
        out.launched_at = time.monotonic()
        for i in (list(range(1, nodes)) + [0]) if job.nnodes.startswith("1:") else range(nodes):
            job.start(f"node-{i}")
        job.monitor()
        statuses = [a.proc.wait(timeout=max(1.0, job.deadline - time.monotonic())) for a in job.agents.values()
                    if not a.lost]
        out.status = next((s for s in statuses if s != 0), 0)
    finally:
        job.cleanup()
    if out.status != 0:
        raise LaunchError(f"{job.what} failed (exit status {out.status})" + failure_line(out.stderr))
    return out


# --- reading events ---------------------------------------------------------------------------------
def losses(events) -> dict:
    """{step: loss (float, exact)} of the last time each step was trained."""
    return {e["step"]: float.fromhex(e["loss"]) for e in events if "loss" in e}


def resumes(events) -> list:
    """Where each attempt resumed from (None: from scratch)."""
    return [e["resumed_from"] for e in events if "resumed_from" in e]


def recoveries(events) -> list:
    """Rank 0's resume event of every attempt: step, source, bytes per rank and tier, seconds."""
    return [e for e in events if "resumed_from" in e]


def node_loss_steps(steps: int, every: int, replace: bool = True) -> tuple:
    """The checkpoints at which ``run_distributed(kill="node")`` loses a node: with a replacement, the
    middle checkpoint before the last step (recovered from peer memory) and the last one before it
    (recovered from storage, both memory copies lost); elastic, the middle one only.

    >>> node_loss_steps(8, 2), node_loss_steps(8, 2, replace=False), node_loss_steps(12, 2)
    ((4, 6), (4,), (6, 10))
    """
    ckpts = list(range(every, steps, every))          # checkpoints before the last step
    need = 2 if replace else 1
    if len(ckpts) < need:
        raise MlsysimError(f"kill='node' needs {need} checkpoint(s) before the last step: steps must exceed "
                           f"{need} x every = {need * every}, got steps={steps}, every={every}")
    mid = ckpts[(len(ckpts) - 1) // 2]
    return (mid, ckpts[-1]) if replace else (mid,)


# --- the entry point --------------------------------------------------------------------------------
@dataclass(frozen=True)
class DistributedRun:
    """Result of :func:`run_distributed`. Times in seconds, bytes in bytes.

    ``world_size`` = ranks per node x ``nodes``. ``resumed_from``: the checkpoint each restart resumed from,
    ``sources``: from which tier (``"memory"``, ``"peer-memory"``, ``"storage"``, None from scratch);
    ``resumed_exactly``: every loss after each resume equals the uninterrupted run's bit for bit (None without a
    kill, or when the world size changed); ``reshard_equal``: after loading at ``reshard_to`` ranks every full
    (gathered) tensor's CRC-32 equals the saved one's; ``reshard_loss_max_abs``: the largest difference between the
    losses at ``reshard_to`` ranks and the uninterrupted run's (reduction order only); ``stall_s``, ``durable_s``,
    ``memory_stall_s``, ``memory_s``: medians over the uninterrupted run's checkpoints (the durable engine's stall
    and seconds until durable; the memory tier's stall and seconds until the checkpoint is in memory on every node,
    replica included); ``bytes_read_per_rank``: what each rank read in the last resume. For the first recovery:
    ``recovered_from`` (its tier), ``recovery_s`` (the slowest rank's seconds from the start of loading to training
    resumed), ``storage_bytes_read_per_rank`` (from the durable tier only) and ``peer_bytes_per_rank`` (received
    from another node); ``recovery_storage_s``: the same job's recovery from durable storage after a node loss that
    took both memory copies; ``recovery_phases_s``, ``recovery_storage_phases_s``: those two recoveries by phase,
    the slowest rank's seconds (``survey``: what the nodes' memory tiers hold; ``transfer``: shards sent to the
    nodes that lack them, until written into their tiers; ``read``: the reads and checks; ``load``: into the model,
    until every rank is done). ``stalls_s``, ``durables_s``, ``shards_s`` (until rank 0's own shard was durable;
    this package's engines): every checkpoint's, in order; ``prepare_s``: the ``concurrent`` engine's allocation and
    first touch of its snapshot buffers at the start of the job (rank 0; not in any stall), ``prepares_s``: the
    killed job's, at its start and after each kill. ``downtime_s``: for each kill, the seconds until the job had
    resumed, as the driver saw them (detection, rendezvous, new processes and the recovery itself); ``start_s``: the
    killed job's own start, from its launch until it first resumed (from nothing), taken just before its losses;
    ``teardown_s``: for each node lost, the driver's seconds from the kill until it started the replacement (the
    lost processes gone, the lost node's memory tier erased). With ``plain_steps`` (steps without checkpoints
    first): ``plain_step_s``, ``plain_churn_Bps``, ``plain_gloo_cpu_s``, ``overheads_s``, ``overhead_s``, the same
    of rank 0's CPU, ``step_ends_s`` (:func:`~.accounting.overhead_per_checkpoint`). ``reference_losses``: the
    uninterrupted run's loss at steps 1, 2, ... (exact floats). ``prediction``:
    :mod:`mlsysim.lab.distributed.predict`'s for this job on this machine (with ``predict=True``); with a node lost,
    its ``downtime_s``: each loss's teardown + the job's own start (both measured) + the predicted recovery.
    ``job_terms``: the job's own terms, timed at its end (with ``probe_terms``; else None)."""

    engine: str
    mode: str
    world_size: int
    steps: int
    kills: tuple
    resumed_from: tuple
    resumed_exactly: bool | None
    reshard_to: int | None
    reshard_equal: bool | None
    reshard_loss_max_abs: float | None
    stall_s: float
    durable_s: float
    bytes_read_per_rank: tuple
    wall_s: float
    nodes: int = 1
    every: int = 2
    persist_every: int = 1
    seed: int = 0
    d_model: int = 32
    layers: int = 2
    reference_losses: tuple = ()
    sources: tuple = ()
    recovered_from: str | None = None
    recovery_s: float | None = None
    storage_bytes_read_per_rank: tuple = ()
    peer_bytes_per_rank: tuple = ()
    recovery_storage_s: float | None = None
    downtime_s: tuple = ()
    start_s: float | None = None
    teardown_s: tuple = ()
    memory_s: float | None = None
    memory_stall_s: float | None = None
    memory_root: str | None = None
    prediction: dict | None = None
    recovery_phases_s: dict | None = None
    recovery_storage_phases_s: dict | None = None
    stalls_s: tuple = ()
    durables_s: tuple = ()
    shards_s: tuple = ()
    prepare_s: float | None = None
    prepares_s: tuple = ()
    plain_steps: int = 0
    plain_step_s: float | None = None
    plain_step_cpu_s: float | None = None
    plain_churn_Bps: float | None = None
    plain_gloo_cpu_s: float | None = None
    overheads_s: tuple = ()
    overhead_s: float | None = None
    overheads_cpu_s: tuple | None = None
    overhead_cpu_s: float | None = None
    step_ends_s: tuple | None = None
    job_terms: dict | None = None

    def __str__(self) -> str:
        text = "\n".join(f"{k:28s} {getattr(self, k)}" for k in self.__dataclass_fields__
                         if k not in ("prediction", "step_ends_s"))          # the step ends: in the JSON
        if self.prediction:
            text += "\n" + "\n".join(f"{'predicted ' + k:28s} {v}" for k, v in self.prediction.items()
                                     if not isinstance(v, dict))     # not the refined model's terms: in the JSON
        return text

    def to_dict(self) -> dict:
        """Every field, JSON-able: tuples as lists, NaN as None."""
        def clean(v):
            if isinstance(v, float) and math.isnan(v):
                return None
            if isinstance(v, (list, tuple)):
                return [clean(x) for x in v]
            return {k: clean(x) for k, x in v.items()} if isinstance(v, dict) else v
        return {k: clean(v) for k, v in asdict(self).items()}


def _median(xs) -> float:
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else float("nan")


def _check_run(job: dict, reshard_to, kill, replace: bool, reference) -> None:
    """Refuse a :func:`run_distributed` that cannot run (``job``: the record's fields the arguments set)."""
    check_world(job["world_size"])
    if reshard_to is not None:
        check_world(reshard_to)
    for k in ("steps", "every", "persist_every"):
        if type(job[k]) is not int or job[k] < 1:
            raise MlsysimError(f"{k} must be a positive integer, got {job[k]!r}")
    if job["plain_steps"] != 0 and (type(job["plain_steps"]) is not int or not 2 <= job["plain_steps"] < job["steps"]):
        raise MlsysimError(f"plain_steps must be 0 or an integer from 2 to steps - 1, got {job['plain_steps']!r}")
    check_kill(kill, job["nodes"], job["engine"], replace)
    if job["engine"] not in ENGINES:
        raise MlsysimError(f"engine must be one of {', '.join(ENGINES)}, got {job['engine']!r}")
    if job["mode"] not in MODES:
        raise MlsysimError(f"mode must be one of {', '.join(MODES)}, got {job['mode']!r}")
    if reshard_to is not None and kill == "node" and not replace:
        raise MlsysimError("reshard_to and kill='node' with replace=False both change the world size; choose one")
    if reference is not None:
        _check_reference(reference, **job)


def _reference_run(base: Path, nproc: int, steps: int, nodes: int, root, memory: bool, reference, kw) -> tuple:
    """The uninterrupted run, launched or ``reference``'s: ({step: loss}, its fields of the record, events or None)."""
    if reference is not None:
        names = ("stall_s", "durable_s", "stalls_s", "durables_s", "shards_s", "prepare_s", "memory_s",
                 "memory_stall_s", "plain_step_s", "plain_step_cpu_s", "plain_churn_Bps", "plain_gloo_cpu_s",
                 "overheads_s", "overhead_s", "overheads_cpu_s", "overhead_cpu_s", "step_ends_s", "job_terms")
        return dict(enumerate(reference.reference_losses, start=1)), {k: getattr(reference, k) for k in names}, None
    ref = launch(base / "reference", nproc, steps, nodes=nodes, memory_root=root and root / "reference", **kw)
    ref_losses = losses(ref.events)
    over = overhead_per_checkpoint(ref.events, kw["every"], kw["plain_steps"]) if kw["plain_steps"] else {}
    done, commits = [e for e in ref.events if "done" in e][-1], [e for e in ref.events if "commit" in e]
    stalls, durables = tuple(done["stall_s"]), tuple(e["durable_s"] for e in commits)
    return ref_losses, {
        "stall_s": _median(stalls), "durable_s": _median(durables), "stalls_s": stalls, "durables_s": durables,
        "shards_s": tuple(e["shard_s"] for e in commits if "shard_s" in e),
        "prepare_s": next((e["prepared_s"] for e in ref.events if "prepared_s" in e), None),
        "memory_s": _median(done.get("memory_s") or []) if memory else None,
        "memory_stall_s": _median(done.get("memory_stall_s") or []) if memory else None,
        "job_terms": next((e["job_terms"] for e in ref.events if "job_terms" in e), None),
        **{k: tuple(v) if isinstance(v, list) else v for k, v in over.items()}}, ref.events


def _killed_run(base: Path, nproc: int, steps: int, nodes: int, kill, loss_steps: tuple, replace: bool,
                ref_losses: dict, root, kw) -> tuple:
    """The job killed as ``kill`` plans and restarted by torchrun: (its fields of the record, its events)."""
    plan, random_kills, node_losses = _kill_plan(kill, nproc * nodes, loss_steps, replace)
    run = launch(base / "killed", nproc, steps, pause=plan, random_kills=random_kills, nodes=nodes,
                 node_losses=node_losses, replace=replace, checksums=kill == "node",
                 memory_root=None if root is None else root / "killed", **kw)
    after = losses(run.events)
    found = recoveries(run.events)[1:]
    resumed = tuple(e["resumed_from"] for e in found)
    first = found[0] if found else None
    storage = next((e for e in found if e["source"] == "storage"), None) if kill == "node" else None
    got = {"kills": tuple(run.killed), "downtime_s": tuple(run.downtimes()), "resumed_from": resumed,
           "start_s": run.start_s(), "teardown_s": tuple(run.teardowns),
           "prepares_s": tuple(e["prepared_s"] for e in run.events if "prepared_s" in e),
           "bytes_read_per_rank": tuple(recoveries(run.events)[-1]["bytes_read"]),
           "sources": tuple(e["source"] for e in found), "recovered_from": first["source"] if first else None,
           "recovery_s": first["recovery_s"] if first else None,
           "storage_bytes_read_per_rank": tuple(first["storage_bytes"]) if first else (),
           "peer_bytes_per_rank": tuple(first["peer_bytes"]) if first else (),
           "recovery_storage_s": storage["recovery_s"] if storage else None,
           "recovery_phases_s": first.get("phases_s") if first else None,
           "recovery_storage_phases_s": storage.get("phases_s") if storage else None}
    if kill == "node" and not replace:
        step = resumed[0] if resumed else None
        cont = {s: v for s, v in after.items() if step is not None and s > step}
        diff = max((abs(cont[s] - ref_losses[s]) for s in cont), default=None)
        saved = [e for e in run.events if e.get("checksums") == step]
        loaded = [e for e in run.events if e.get("loaded_checksums") == step]
        equal = bool(saved and loaded and saved[0]["crc32"] == loaded[-1]["crc32"])
        got.update(reshard_to=nproc, reshard_loss_max_abs=diff, reshard_equal=equal)
    else:
        got["resumed_exactly"] = (sorted(after) == sorted(ref_losses)
                                  and all(after[s] == ref_losses[s] for s in ref_losses))
    return got, run.events


def _resharded_run(base: Path, nproc: int, reshard_to: int, steps: int, every: int, nodes: int, ref_losses: dict,
                   root, kw) -> tuple:
    """A run stopped halfway and continued at ``reshard_to`` ranks: (its fields of the record, the first's events)."""
    half = steps // 2 - (steps // 2) % every
    first = launch(base / "reshard", nproc, steps, nodes=nodes, stop_after=half, checksums=True,
                   memory_root=None if root is None else root / "reshard-first", **kw)
    second = launch(base / "reshard", reshard_to, steps, checksums=True,
                    memory_root=None if root is None else root / "reshard-second", **kw)
    saved = [e for e in first.events if e.get("checksums") == half][-1]["crc32"]
    loaded = [e for e in second.events if "loaded_checksums" in e][-1]
    cont = losses(second.events)
    return {"reshard_equal": loaded["loaded_checksums"] == half and loaded["crc32"] == saved,
            "reshard_loss_max_abs": max(abs(cont[s] - ref_losses[s]) for s in cont),
            "bytes_read_per_rank": tuple(recoveries(second.events)[-1]["bytes_read"])}, first.events


def run_distributed(nproc: int = 2, engine: str = "concurrent", mode: str = "fsdp", kill=None,
                    reshard_to: int | None = None, directory=None, steps: int = 8, every: int = 2,
                    seed: int = 0, nodes: int = 1, persist_every: int = 1, replace: bool = True,
                    memory: bool = True, d_model: int = 32, layers: int = 2, predict: bool = False,
                    reference: DistributedRun | None = None, timeout_s: float = 300.0,
                    plain_steps: int = 0, probe_terms: int = 0) -> DistributedRun:
    """Run the distributed lab: an uninterrupted job of ``nodes`` x ``nproc`` ranks; with ``kill``
    the same job killed and restarted by torchrun, compared with it bit for bit:

    * ``"rank"``: one rank killed at each of :data:`KILL_POINTS` in turn; ``"random"``: one at a
      random time; a list of ``POINT@STEP:RANK``: those;
    * ``"node"`` (``nodes=2``): node 1 lost at the checkpoints of :func:`node_loss_steps` (its
      agent and workers SIGKILLed, its memory tier erased), a replacement joins, and the job
      recovers the lost shards from the peer replica on the survivor without reading durable
      storage; then, once the second checkpoint is durable, the replacement is lost with the
      survivor's memory too, and the job recovers from durable storage (``recovery_storage_s``).
      ``replace=False``: no replacement; the job continues alone on the surviving node at half
      the world size (``reshard_to``), from its own shards and the peer replica.

    With ``reshard_to`` (and no kill) a run stopped halfway and continued at ``reshard_to`` ranks
    on one node. ``memory``: the memory and peer-memory tiers (this package's engines); every
    ``persist_every``-th checkpoint also goes to durable storage. ``predict``: measure this
    machine and add ``mlsysim.lab.distributed.predict``'s prediction for the job. ``reference``: the
    result of an earlier call for the same job (engine, mode, nodes, ranks, steps, checkpoints,
    seed, model), whose uninterrupted run is reused instead of launched again. ``directory``: where
    the runs write (default: a temporary one, removed afterwards). ``plain_steps``: the first steps
    train without checkpoints, and the overhead per checkpoint is measured against them. ``probe_terms``: the
    uninterrupted job times its own terms that many times at its end (``job_terms``)."""
    check_nodes(nodes)
    job = {"engine": engine, "mode": mode, "nodes": nodes, "world_size": nproc * nodes, "steps": steps,
           "every": every, "persist_every": persist_every, "seed": seed, "d_model": d_model, "layers": layers,
           "plain_steps": plain_steps}
    _check_run(job, reshard_to, kill, replace, reference)
    check_probe_terms(probe_terms)
    loss_steps = node_loss_steps(steps, every, replace) if kill == "node" else ()
    t0 = time.perf_counter()
    own_tmp = directory is None
    base = Path(tempfile.mkdtemp(prefix="mlsysim-dist-")) if own_tmp else Path(directory)
    memory = memory and engine in ("sync", "concurrent")
    root = tiers.make_memory_root() if memory else None
    try:
        for sub in ("reference", "killed", "reshard"):
            d = base / sub
            if d.exists() and any(d.iterdir()) and not (d / shards.RUN_FILE).exists():
                raise MlsysimError(f"{d} holds files this lab did not write; use another directory")
        kw = {"every": every, "engine": engine, "mode": mode, "seed": seed, "persist_every": persist_every,
              "d_model": d_model, "layers": layers, "memory": memory, "timeout_s": timeout_s,
              "plain_steps": plain_steps, "probe_terms": probe_terms}
        ref_losses, ref, ref_events = _reference_run(base, nproc, steps, nodes, root, memory, reference, kw)
        got = {"kills": (), "resumed_from": (), "resumed_exactly": None, "bytes_read_per_rank": (),
               "reshard_to": reshard_to, "reshard_equal": None, "reshard_loss_max_abs": None}
        if kill is not None:
            killed, events = _killed_run(base, nproc, steps, nodes, kill, loss_steps, replace, ref_losses, root, kw)
            got.update(killed)
            ref_events = ref_events or events
        if reshard_to is not None:
            resharded, events = _resharded_run(base, nproc, reshard_to, steps, every, nodes, ref_losses, root, kw)
            got.update(resharded)
            ref_events = ref_events or events
        prediction = (job_prediction(ref_events, {**job, "memory": memory, "kill": kill}, base)
                      if predict and ref_events else None)
        if prediction and kill == "node":      # each loss: its teardown + the job's own start + the recovery
            recovery = (prediction["recovery_s"], prediction["recovery_storage_s"])
            prediction["downtime_s"] = [e + got["start_s"] + rec for e, rec in zip(got["teardown_s"], recovery)]
        return DistributedRun(**job, **ref, **got, reference_losses=tuple(ref_losses[s] for s in sorted(ref_losses)),
                              wall_s=time.perf_counter() - t0, prediction=prediction,
                              memory_root=None if root is None else str(root))
    finally:
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
        if own_tmp:
            shutil.rmtree(base, ignore_errors=True)


def _kill_plan(kill, world: int, loss_steps: tuple, replace: bool) -> tuple:
    """(``POINT@STEP:RANK`` per attempt, random kills, :class:`NodeLoss` es) for ``kill``."""
    if kill == "rank":
        return [f"{p}@{3 + i}:{(i + 1) % world}" if p == "step" else f"{p}@{2 * (i + 1)}:{(i + 1) % world}"
                for i, p in enumerate(KILL_POINTS)], 0, []
    if kill == "random":
        return [], 1, []
    if kill == "node":
        lost = [NodeLoss(loss_steps[0])]
        if replace:
            lost.append(NodeLoss(loss_steps[1], point="stored", memory_too=True))
        return [], 0, lost
    return list(kill), 0, []


def _check_reference(reference, **want) -> None:
    if not isinstance(reference, DistributedRun):
        raise MlsysimError(f"reference must be an earlier run_distributed result, got {type(reference).__name__}")
    for k, v in want.items():
        if getattr(reference, k) != v:
            raise MlsysimError(f"reference is another job: its {k} is {getattr(reference, k)!r}, this one's {v!r}")
    if len(reference.reference_losses) != want["steps"]:
        raise MlsysimError("reference holds no uninterrupted run's losses")
