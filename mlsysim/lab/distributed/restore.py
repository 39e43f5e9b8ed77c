"""Load amplification: restore the distributed lab's checkpoint three ways and count what each rank reads.

Worker: ``torchrun --nproc-per-node N -m mlsysim.lab.distributed.restore --dir D [--scheme S] [--make STEPS]``
(PyTorch, gloo). ``D/ddp`` holds a DDP checkpoint of the lab's job (replicated state, stored once,
by rank 0) and ``D/fsdp`` an FSDP2 one (every rank's shard), in the format of
:mod:`mlsysim.lab.distributed.worker` (``launcher.launch(D / "ddp", N, steps, mode="ddp", stop_after=s)``
makes one); with ``--make STEPS`` the worker trains that many steps and saves both itself (the
same :class:`~mlsysim.lab.distributed.worker.Job`, sync engine and global commit). Then, for each scheme
in turn (``--scheme all``: the three), it overwrites every live tensor with NaN, drops the
checkpoint's pages from the page cache, and restores:

* ``replicated`` — the DDP checkpoint, read from storage by every rank
  (:func:`~mlsysim.lab.distributed.shards.read_for_rank`): N times the bytes, load amplification;
* ``sharded`` — the FSDP checkpoint, each owner reading its own shard once;
* ``broadcast`` — the DDP checkpoint read once by rank 0, which sends every tensor to the other
  ranks with ``torch.distributed.broadcast`` (gloo), as MegaScale does; the other ranks read only
  their own small file (random state, sampler, schedule).

With ``--probe-B B`` the job first times gloo (a broadcast and point-to-point transfers of B bytes,
a small collective: :func:`mlsysim.lab.distributed.probes.gloo_probe`) and each engine's fixed cost per
save, on the job at its smallest width (:func:`~mlsysim.lab.distributed.probes.engine_probe`), and after
every round of restores, in DDP mode, the broadcast of the job's own tensors into tensors the receivers
allocate (:func:`~mlsysim.lab.distributed.probes.state_bcast_s`) and, in FSDP mode, every rank's cold read of its
own shard file, all at once (:func:`~mlsysim.lab.distributed.probes.shard_read_s`), and in each mode every rank's
copy of its own tensors into new ones against touched ones, in the restores' warmed memory
(:func:`~mlsysim.lab.distributed.probes.new_tensors_s`), and at the end, in FSDP mode, DCP's
staging of the job's state (:func:`~mlsysim.lab.distributed.probes.dcp_stage`): the terms of the refined
model.

Per rank it reports the bytes read from the shard files (each verified against the global
commit record's size and CRC-32), the bytes the kernel fetched from the disk for this process
(``read_bytes`` of ``/proc/self/io``: 0 when the page cache served the read), and the seconds
to read, broadcast and copy into the live tensors. Each restore is verified: the CRC-32 of every
full tensor each rank ends up with (gathered under FSDP) must equal the CRC-32 of the same tensor
assembled from the files, and, with ``--make``, the CRC-32 taken before the save.

**The page cache.** All ranks share one machine, so the second reader of a file may find its
pages in memory. Before each scheme rank 0 asks the kernel to drop the checkpoint's pages
(``posix_fadvise(POSIX_FADV_DONTNEED)``, as :func:`mlsysim.measure.drop_page_cache` does) and
checks with ``mincore`` that none stayed resident (``resident_before``). Concurrent readers of
one file still share one fetch from the disk: the device bytes show how much of the
amplification reached the disk, the file bytes how much a shared file system would have served.

**Memory.** This machine may hand memory that stays free back to its host (a virtual machine's free
page reporting: :mod:`~mlsysim.lab.distributed.beside`), which must back it again before the guest uses it,
at several times the cost of a page fault (h against p in :mod:`~mlsysim.lab.distributed.terms`). A restore's
new tensors and page-cache pages would then cost what the host's pages cost at that moment: in one job
the broadcast phase of a 1 GB restore on 2 ranks took 2.7, 1.9, 0.8 and 0.6 s in four rounds back to back,
as the rounds before freed memory the host still backed; warmed, the whole restore (read, broadcast, load)
took 1.2 to 1.3 s in every round. So before each restore every rank touches and frees :data:`WARM_FACTOR`
times the bytes it holds (:func:`warm_memory`): the kernel hands the pages just freed to the next allocation
first, and every scheme reads into memory the host backs, as on a machine that keeps its memory (bare metal).
The stated state is the same for every scheme.

Driver: :func:`measure_restores` (no PyTorch import here) launches the worker with ``torchrun`` on
127.0.0.1 at a free port, as :func:`mlsysim.lab.distributed.launcher.launch` does, and sets each scheme's
measurement beside :func:`mlsysim.lab.distributed.predict.predict_restore`.
"""
from __future__ import annotations

import argparse
import ctypes
import errno
import json
import mmap
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import MlsysimError
from ...measure import drop_page_cache
from .. import store
from ..checksum import crc32
from . import shards
from .failures import failure_line
from .launcher import LaunchError, _kill, check_world, free_port, has_torch
from .predict import SCHEME_MODE, SCHEMES, DistMachine, RestorePrediction, JobPrediction, measure_dist_machine, \
    predict_job, predict_restore

MODES = ("ddp", "fsdp")


# --- the page cache and the kernel's I/O counters (Linux; None elsewhere) ---------------------------
def resident_fraction(paths) -> float | None:
    """Share of the pages of ``paths`` in the page cache now (``mincore`` on a read-only mapping of
    each file), 0.0 to 1.0; None where ``mincore`` is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)   # the C library this process already uses
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    except (OSError, AttributeError):
        return None
    resident = pages = 0
    for path in paths:
        size = os.path.getsize(path)
        if not size:
            continue
        n = -(-size // mmap.PAGESIZE)
        fd = os.open(path, os.O_RDONLY)
        try:
            addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        finally:
            os.close(fd)
        if addr in (None, ctypes.c_void_p(-1).value):
            return None
        try:
            vec = (ctypes.c_ubyte * n)()
            if libc.mincore(addr, size, vec) != 0:
                return None
            resident += sum(v & 1 for v in vec)
            pages += n
        finally:
            libc.munmap(addr, size)
    return resident / pages if pages else 0.0


def device_read_B() -> int | None:
    """Bytes this process (all its threads) caused to be fetched from a storage device
    (``read_bytes`` in ``/proc/self/io``); None where the kernel does not count them."""
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


#: each rank touches and frees this many times the bytes it holds before a timed restore
#: (:func:`warm_memory`): its new tensors and the file's pages in the page cache
WARM_FACTOR = 2


def available_B() -> int | None:
    """The memory Linux estimates it can give new allocations now (``MemAvailable`` of ``/proc/meminfo``,
    bytes); None where the kernel does not say."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def warm_memory(nbytes: int, share: int = 1) -> int:
    """Touch ``nbytes`` bytes of new memory and free it, so that the allocations that follow take pages
    the host backs (the module's *Memory*); at most half the available memory over ``share`` processes
    doing the same at once (:func:`available_B`). Returns the bytes touched.

    >>> warm_memory(4096)
    4096
    """
    if type(nbytes) is not int or nbytes < 0:
        raise MlsysimError(f"nbytes must be an integer >= 0, got {nbytes!r}")
    if type(share) is not int or share < 1:
        raise MlsysimError(f"share must be an integer >= 1 (processes warming at once), got {share!r}")
    avail = available_B()
    n = nbytes if avail is None else min(nbytes, avail // (2 * share))
    if n > 0:
        np.ones(n, dtype=np.uint8)         # every page written, then freed with the array
    return n


# --- the worker (runs under torchrun; PyTorch imported inside) --------------------------------------
def _warm(job, world: int) -> int:
    """:func:`warm_memory` before one of ``job``'s restores (or a probe in the same state): :data:`WARM_FACTOR`
    times a rank's bytes of the job's tensors, ``world`` ranks at once."""
    from .staging import local_B
    return warm_memory(WARM_FACTOR * sum(local_B(t) for t in job.tensors().values()), world)


def _say(**event) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def config_for(size_B: float | None, d_model: int, layers: int, steps: int):
    """The lab's config (:func:`mlsysim.lab.distributed.worker.lab_config`): ``d_model`` as given, or, with
    ``size_B``, the multiple of 32 whose weights + AdamW moments (12 B/param) come closest to it."""
    from .worker import lab_config
    if size_B is None:
        return lab_config(steps, d_model=d_model, layers=layers)
    return min((lab_config(steps, d_model=32 * k, layers=layers) for k in range(1, 257)),
               key=lambda c: abs(c.state_B - size_B))


def _crc(t) -> int:
    return crc32(t.detach().contiguous().numpy().tobytes())


def file_checksums(directory, record: dict) -> dict:
    """{key: CRC-32 of the full tensor} assembled from every shard file of ``record`` (the expected
    result of a restore, independent of the live tensors)."""
    import torch
    step = record["step"]
    states = {s["rank"]: store.read_checkpoint((Path(directory) / s["file"]).parent, step)[0]
              for s in record["shards"]}
    out = {}
    for key, pieces in shards.specs_of(record).items():
        specs = [s for _, s in pieces]
        arrays = [states[o]["tensors"][key] for o, _ in pieces]
        full = shards.gather(arrays, specs, lambda shape, like=arrays[0]: torch.empty(shape, dtype=like.dtype))
        out[key] = _crc(full)
    return out


def _read_shard(directory, record: dict, old: int):
    """Old rank ``old``'s shard file of ``record``: (state, bytes read, path), verified against the
    global record as :func:`~mlsysim.lab.distributed.shards.read_for_rank` verifies it."""
    shard = record["shards"][old]
    path = Path(directory) / shard["file"]
    state, _, size = store.read_checkpoint(path.parent, record["step"])
    crc = json.loads((path.parent / store.commit_name(record["step"])).read_text())["crc32"]
    if size != shard["size_B"] or crc != shard["crc32"]:
        raise store.CheckpointError(errno.EIO, f"{path}: not the file the global commit names ({size} B, CRC {crc})")
    return state, size, str(path)


def _empty(shape, like):
    import torch
    return torch.empty(shape, dtype=like.dtype)


def _scramble(job) -> None:
    """Every live tensor NaN and the step count −1: a restore that misses anything fails its check."""
    import torch
    from torch.distributed.tensor import DTensor
    with torch.no_grad():
        for t in job.tensors().values():
            (t.to_local() if isinstance(t, DTensor) else t).fill_(float("nan"))
    job.step_count = -1


def _make(directory: Path, mode: str, cfg, steps: int, group):
    """Train ``steps`` steps in ``mode`` and save one global checkpoint with the sync engine, as
    :mod:`mlsysim.lab.distributed.worker` does. Returns (job, CRC-32s before the save, event)."""
    import torch.distributed as dist
    from dataclasses import asdict
    from .worker import NEVER_PRUNE, Job
    from ..engines import make_engine
    rank, world = dist.get_rank(), dist.get_world_size()
    job = Job(cfg, mode)
    identity = {"format": "mlsysim", "mode": mode, "config": asdict(cfg)}
    if rank == 0:
        shards.claim(directory, identity)
    dist.barrier()
    for _ in range(steps):
        job.step()
    saved = job.checksums()
    state, specs = job.shard_state()
    step, t0, durable = job.step_count, time.perf_counter(), [float("nan")]

    def on_commit(s: int) -> None:
        rec = shards.shard_record(directory, s, rank, world, mode, specs)
        records = [None] * world if rank == 0 else None
        dist.gather_object(rec, records, dst=0, group=group)
        if rank == 0:
            shards.write_global_commit(directory, s, records, json.dumps(identity, sort_keys=True))
            durable[0] = time.perf_counter() - t0

    engine = make_engine("sync", shards.rank_dir(directory, rank), keep=NEVER_PRUNE, on_commit=on_commit)
    stall = engine.save(step, state)
    engine.close()
    stalls = [None] * world
    dist.all_gather_object(stalls, stall, group=group)
    files = [s["size_B"] for s in shards.read_global(directory, step)["shards"]] if rank == 0 else None
    event = {"made": mode, "step": step, "params": cfg.params, "state_B": cfg.state_B, "d_model": cfg.d_model,
             "layers": cfg.layers, "save_s": stalls, "durable_s": durable[0], "file_B": files}
    return job, saved, event


def _open(directory: Path, mode: str):
    """A job of the config that ``directory``'s run was trained with (its ``run.json``)."""
    from .worker import Job
    from ..pytorch.train import TorchConfig
    identity = json.loads((directory / shards.RUN_FILE).read_text())
    if identity.get("format") != "mlsysim" or identity.get("mode") != mode:
        raise MlsysimError(f"{directory} holds a {identity.get('format')} {identity.get('mode')} run, "
                           f"not this lab's {mode} checkpoints")
    return Job(TorchConfig(**identity["config"]), mode)


def _restore(scheme: str, directory: Path, job, expected: dict, saved: dict | None, group, drop: bool) -> dict:
    """Restore ``job`` from the newest global checkpoint in ``directory`` with ``scheme``; every rank
    returns its part of the event, rank 0 the whole event (the others None)."""
    import torch
    import torch.distributed as dist
    rank, world = dist.get_rank(), dist.get_world_size()
    steps = shards.global_steps(directory)
    if not steps:
        raise MlsysimError(f"{directory} holds no global checkpoint (make one with --make)")
    record = shards.read_global(directory, steps[-1])
    step = record["step"]
    paths = [directory / s["file"] for s in record["shards"]]
    _scramble(job)
    warmed = _warm(job, world)
    dist.barrier()
    before = None
    if rank == 0:
        if drop:
            for p in paths:
                drop_page_cache(p)
                drop_page_cache(p.parent / store.commit_name(step))
        before = resident_fraction(paths)
    dist.barrier()
    dev0, t0 = device_read_B(), time.perf_counter()
    if scheme == "broadcast":
        only0 = sorted(k for k, pieces in shards.specs_of(record).items() if {o for o, _ in pieces} == {0})
        if rank == 0:
            got = shards.read_for_rank(directory, record, world, rank, _empty)
            bufs, nbytes, files = {k: got.tensors[k] for k in only0}, got.bytes_read, got.files
        else:
            own, nbytes, path = _read_shard(directory, record, rank)
            live = job.tensors()
            bufs, files = {k: torch.empty_like(live[k]) for k in only0}, (path,)
        t_read = time.perf_counter()
        for w in [dist.broadcast(bufs[k], src=0, async_op=True) for k in only0]:
            w.wait()
        t_bcast = time.perf_counter()
        if rank:
            got = shards.RankLoad(step=step, tensors={**own["tensors"], **bufs}, shared=own["shared"],
                                      rank_state=own["rank_state"], files=files, bytes_read=nbytes)
        job.load(got)
    else:
        got = shards.read_for_rank(directory, record, world, rank, _empty)
        nbytes, files = got.bytes_read, got.files
        t_read = t_bcast = time.perf_counter()
        job.load(got)
    t1, dev1 = time.perf_counter(), device_read_B()
    dist.barrier()
    after = resident_fraction(paths) if rank == 0 else None
    sums = job.checksums()                  # a collective under FSDP (full tensors), local under DDP
    mine = {"bytes": nbytes, "warmed": warmed, "device": None if dev0 is None or dev1 is None else dev1 - dev0,
            "files": [str(Path(f).relative_to(directory)) for f in files], "restore_s": t1 - t0,
            "read_s": t_read - t0, "broadcast_s": t_bcast - t_read, "load_s": t1 - t_bcast,
            "clock": (t0, t_read, t_bcast, t1),   # perf_counter: one monotonic clock for all processes here
            "crc_ok": sums == expected, "saved_ok": None if saved is None else sums == saved,
            "step_ok": job.step_count == step}
    every = [None] * world
    dist.all_gather_object(every, mine, group=group)
    if rank:
        return None
    col = {k: [m[k] for m in every] for k in mine}
    start, read0, done, end = zip(*col.pop("clock"))
    verified = all(col["crc_ok"]) and all(col["step_ok"]) and (saved is None or all(col["saved_ok"]))
    return {"scheme": scheme, "mode": SCHEME_MODE[scheme], "step": step, "world_size": world,
            "file_B": [s["size_B"] for s in record["shards"]], "bytes_read": col["bytes"],
            "device_bytes": col["device"], "warmed_B": col["warmed"], "files": col["files"],
            "restore_s": col["restore_s"],
            "job_restore_s": max(end) - min(start),
            "job_broadcast_s": max(done) - read0[0] if scheme == "broadcast" else 0.0,
            "read_s": col["read_s"], "broadcast_s": col["broadcast_s"], "load_s": col["load_s"],
            "resident_before": before, "resident_after": after, "dropped": bool(drop and before == 0.0),
            "crc_ok": col["crc_ok"], "saved_ok": col["saved_ok"], "step_ok": col["step_ok"], "verified": verified}


def parse_schemes(text: str) -> tuple:
    """``"all"`` or a comma-separated list of :data:`~mlsysim.lab.distributed.predict.SCHEMES`."""
    names = SCHEMES if text == "all" else tuple(s.strip() for s in text.split(","))
    bad = [s for s in names if s not in SCHEMES]
    if bad or not names:
        raise MlsysimError(f"--scheme must be 'all' or a comma-separated list of {', '.join(SCHEMES)}, got {text!r}")
    return names


def _round_probes(group, jobs: dict, shard_path, rounds: dict) -> None:
    """The terms timed after every round of restores (every rank calls it), appended to ``rounds``: the
    broadcast restore's transfer, its read aside (``bcast``, DDP); the disk's read of the shards where and when
    the restores run (``read``, FSDP: ``shard_path``, this rank's file); each mode's new tensors, in the
    restores' memory state (warmed as before a restore)."""
    import torch.distributed as dist
    from .probes import new_tensors_s, shard_read_s, state_bcast_s
    if "ddp" in jobs:
        rounds["bcast"].append(state_bcast_s(group, jobs["ddp"].tensors()))
    if "fsdp" in jobs:
        rounds["read"].append(shard_read_s(group, shard_path))
    for mode, job in jobs.items():
        _warm(job, dist.get_world_size())
        rounds[mode].append(new_tensors_s(group, job.tensors()))


def _round_terms(rounds: dict, jobs: dict, shards_B: int) -> dict:
    """The probe's fields from :func:`_round_probes`' rounds (``shards_B``: the FSDP shard files' bytes)."""
    out: dict = {}
    if rounds["read"]:
        out.update(shard_read_B=shards_B, shard_read_rounds_s=rounds["read"],
                   shard_read_Bps=shards_B / statistics.median(rounds["read"]))
    if rounds["bcast"]:
        size = sum(t.numel() * t.element_size() for t in jobs["ddp"].tensors().values())
        out.update(state_bcast_B=size, state_bcast_rounds_s=rounds["bcast"],
                   bcast_state_Bps=size / statistics.median(rounds["bcast"]))
    for mode in jobs:                      # rank 0's bytes: a whole replica (DDP) or its shard (FSDP)
        if rounds[mode]:
            size = rounds[mode][0]["bytes"]
            out[f"new_tensors_{mode}"] = {"bytes": size, "new_rounds_s": [x["new_s"] for x in rounds[mode]],
                                          "touched_rounds_s": [x["touched_s"] for x in rounds[mode]],
                                          "largest_B": rounds[mode][0].get("largest_B")}
            out[f"new_tensor_{mode}_s_per_B"] = statistics.median(x["new_s"] - x["touched_s"]
                                                                  for x in rounds[mode]) / size
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="torchrun ... -m mlsysim.lab.distributed.restore")
    p.add_argument("--dir", required=True, help="holds ddp/ and fsdp/ (the checkpoints of each mode)")
    p.add_argument("--scheme", default="all", help="all, or a comma-separated list of " + ", ".join(SCHEMES))
    p.add_argument("--make", type=int, default=0, help="first train this many steps and save (0: restore only)")
    p.add_argument("--d-model", type=int, default=32)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--size-B", type=float, default=None, help="with --make: pick d_model for this state size")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--keep-cache", action="store_true", help="do not drop the page cache before a scheme")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a collective may wait")
    p.add_argument("--probe-B", type=float, default=0.0, help="first time gloo with this many bytes")
    p.add_argument("--stage-steps", type=int, default=0,
                   help="with --probe-B: hold each of DCP's probe stagings while this many steps train")
    a = p.parse_args(argv)
    schemes = parse_schemes(a.scheme)
    if a.make < 0 or a.repeats < 1 or a.stage_steps < 0:
        p.error("--make and --stage-steps must be >= 0 and --repeats >= 1")

    from datetime import timedelta

    import torch.distributed as dist
    from .worker import init
    _store = init(0, timedelta(seconds=a.timeout))   # noqa: F841  (kept alive with the group)
    rank = dist.get_rank()
    _say(start=0, rank=rank, pid=os.getpid())
    group = dist.new_group(backend="gloo", timeout=timedelta(seconds=a.timeout))
    base = Path(a.dir)
    if a.probe_B > 0:
        from .probes import engine_probe, gloo_probe
        probe = {**gloo_probe(group, a.probe_B), **engine_probe(group, base / "engine-probe", a.layers)}
    modes = [m for m in MODES if any(SCHEME_MODE[s] == m for s in schemes)]
    jobs, expected, saved = {}, {}, {}
    for mode in modes:
        d = base / mode
        if a.make:
            cfg = config_for(a.size_B, a.d_model, a.layers, max(a.make, 1))
            jobs[mode], saved[mode], event = _make(d, mode, cfg, a.make, group)
            if rank == 0:
                _say(**event)
        else:
            jobs[mode] = _open(d, mode)
        expected[mode] = file_checksums(d, shards.read_global(d, shards.global_steps(d)[-1])) \
            if rank == 0 else None
        box = [expected[mode]]
        dist.broadcast_object_list(box, src=0, group=group)
        expected[mode] = box[0]
    rounds: dict = {"bcast": [], "read": [], **{m: [] for m in jobs}}
    own = shards.read_global(base / "fsdp", shards.global_steps(base / "fsdp")[-1])["shards"] \
        if a.probe_B > 0 and "fsdp" in jobs else []     # the FSDP job's shard files, read for r_S
    for repeat in range(a.repeats):
        for scheme in schemes:
            mode = SCHEME_MODE[scheme]
            event = _restore(scheme, base / mode, jobs[mode], expected[mode], saved.get(mode), group,
                             drop=not a.keep_cache)
            if rank == 0:
                _say(repeat=repeat, **event)
        if a.probe_B > 0:
            _round_probes(group, jobs, base / "fsdp" / own[rank]["file"] if own else None, rounds)
    if a.probe_B > 0:
        if "fsdp" in jobs:     # DCP's staging of the sharded job's state at its full size
            from .staging import dcp_stage
            stage = dcp_stage(group, jobs["fsdp"], steps=a.stage_steps) or {}
            if stage and a.stage_steps:   # and back to back in the same job: the job's staging lies between the two
                back = dcp_stage(group, jobs["fsdp"])
                stage.update(dcp_stage_back_s=back["dcp_stage_s"], dcp_stage_back_own_s=back["dcp_stage_own_s"])
            probe.update(stage)
        probe.update(_round_terms(rounds, jobs, sum(f["size_B"] for f in own)))
        if rank == 0:
            _say(probe=True, **probe)
    dist.barrier()
    dist.destroy_process_group()
    return 0


# --- the driver (no PyTorch here) -------------------------------------------------------------------
def run_worker(args: list, nproc: int, timeout_s: float = 300.0) -> list[dict]:
    """Run ``torchrun --nproc-per-node nproc -m mlsysim.lab.distributed.restore *args`` on 127.0.0.1 at a free
    port and return its JSON events; every process it started is SIGKILLed by its pid before it
    returns. :class:`~mlsysim.lab.distributed.launcher.LaunchError` if it fails or runs past ``timeout_s``."""
    if not has_torch():
        raise LaunchError("the distributed lab needs PyTorch, the optional extra: pip install -e '.[torch]'")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(nproc),
           "--max-restarts", "0", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
           "--rdzv-id", f"mlsysim-restore-{os.getpid()}-{time.time_ns()}", "--monitor-interval", "0.2",
           "-m", "mlsysim.lab.distributed.restore", *map(str, args)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "TORCHELASTIC_ERROR_FILE": "",
           "LOGLEVEL": "ERROR"}
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env, start_new_session=True)
    events, pids, buf, status = [], set(), b"", None
    deadline = time.monotonic() + timeout_s
    try:
        fd = proc.stdout.fileno()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise LaunchError(f"the {nproc}-rank restore did not finish within {timeout_s:.0f} s")
            if not select.select([fd], [], [], min(left, 1.0))[0]:
                if proc.poll() is not None:
                    break
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if isinstance(ev, dict):
                    events.append(ev)
                    if "start" in ev:
                        pids.add(ev["pid"])
        status = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for pid in pids:
            _kill(pid)
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait(timeout=30)
        proc.stdout.close()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
        err.close()
    if status != 0:
        raise LaunchError(f"the {nproc}-rank restore failed (exit status {status})" + failure_line(stderr))
    return events


@dataclass(frozen=True)
class SchemeRestore:
    """One restore scheme, measured (the median of the repeats) beside its prediction. Bytes, seconds.

    ``bytes_read_per_rank``: bytes of the shard files each rank read (each verified);
    ``device_bytes_per_rank``: bytes the kernel fetched from the disk for each rank (None where not
    counted); ``amplification``: bytes read / bytes of the checkpoint's files; ``restore_s``: from
    the common start (after a barrier) until the last rank has read, received and copied everything
    into its live tensors (``restore_s_per_rank``: each rank's own); ``read_s``, ``load_s``: the
    slowest rank's read and copy; ``broadcast_s``: from the end of rank 0's read until the last
    rank holds every tensor (0 for the other schemes); ``cache_dropped``: no page of
    the checkpoint was in the page cache when the scheme began (None: not checked);
    ``verified``: every rank ended up with every tensor's saved CRC-32, and the saved step (in every
    repeat); ``rounds_s``: ``restore_s`` of every repeat, in the order they ran; ``warmed_B_per_rank``: the
    bytes each rank touched and freed before the restore (:func:`warm_memory`)."""

    scheme: str
    mode: str
    bytes_read_per_rank: tuple
    bytes_read_total: int
    device_bytes_per_rank: tuple | None
    checkpoint_file_B: int
    amplification: float
    restore_s: float
    restore_s_per_rank: tuple
    read_s: float
    broadcast_s: float
    load_s: float
    files_per_rank: tuple
    cache_dropped: bool | None
    verified: bool
    predicted: RestorePrediction
    rounds_s: tuple = ()
    warmed_B_per_rank: tuple = ()

    @property
    def device_amplification(self) -> float | None:
        """Bytes fetched from the disk / bytes of the checkpoint's files (1 when the page cache
        served every reader of a file after the first)."""
        d = self.device_bytes_per_rank
        return None if d is None or None in d else sum(d) / self.checkpoint_file_B


@dataclass(frozen=True)
class ModeSave:
    """The checkpoint saved in one mode: its stall (slowest rank's sync save) and time to the global
    commit, beside :func:`~mlsysim.lab.distributed.predict.predict_job`'s sync stall and durable time."""

    mode: str
    step: int
    file_B: tuple
    stall_s: float
    durable_s: float
    predicted: JobPrediction


@dataclass(frozen=True)
class RestoreComparison:
    """Result of :func:`measure_restores`: the job, the machine's rates, each mode's save and each
    scheme's restore beside the predictions."""

    world_size: int
    params: int
    state_B: int
    d_model: int
    layers: int
    machine: DistMachine
    saves: tuple
    schemes: tuple
    wall_s: float
    gloo: dict | None = None      # gloo's measured broadcast and pair rates (probes.gloo_probe), with probe_B

    def scheme(self, name: str) -> SchemeRestore:
        for s in self.schemes:
            if s.scheme == name:
                return s
        have = ", ".join(s.scheme for s in self.schemes)
        raise MlsysimError(f"no scheme {name!r} in this comparison (it has {have})")

    def __str__(self) -> str:
        mb, ms_ = 1e6, 1e3
        m = self.machine
        lines = [f"{self.world_size} ranks, lab transformer {self.layers}x{self.d_model}: {self.params:,} params, "
                 f"state {self.state_B / mb:.3f} MB; copy {m.copy_Bps / 1e9:.2f}, write {m.write_Bps / 1e9:.2f}, "
                 f"read {m.read_Bps / 1e9:.2f}, link {m.link_Bps / 1e9:.2f} GB/s",
                 "scheme      MB read per rank (predicted total)       x  disk x   restore ms (predicted cold, warm)"
                 "   read ms  bcast ms (pred)  verified"]
        for s in self.schemes:
            per = " ".join(f"{b / mb:.3f}" for b in s.bytes_read_per_rank)
            dev = "-" if s.device_amplification is None else f"{s.device_amplification:.2f}"
            p = s.predicted
            lines.append(f"{s.scheme:10s}  {per} = {s.bytes_read_total / mb:.3f} ({p.bytes_read_total / mb:.3f})"
                         f"  {s.amplification:.2f}  {dev}   {s.restore_s * ms_:.1f} ({p.restore_s * ms_:.1f}, "
                         f"{p.restore_cached_s * ms_:.1f})   {s.read_s * ms_:.1f}  {s.broadcast_s * ms_:.1f} "
                         f"({p.broadcast_s * ms_:.1f})  {'yes' if s.verified else 'NO'}"
                         f"{'' if s.cache_dropped else ' (page cache not dropped)'}")
        for v in self.saves:
            p = v.predicted
            lines.append(f"save {v.mode}: stall {v.stall_s * ms_:.1f} ms (predicted {p.sync_stall_s * ms_:.1f}), "
                         f"global commit after {v.durable_s * ms_:.1f} ms (predicted {p.durable_s * ms_:.1f})")
        return "\n".join(lines)


def _scheme_result(ev: dict, state_B: float, world: int, machine: DistMachine, rounds_s=()) -> SchemeRestore:
    files = sum(ev["file_B"])
    dev = ev["device_bytes"]
    return SchemeRestore(
        scheme=ev["scheme"], mode=ev["mode"], bytes_read_per_rank=tuple(ev["bytes_read"]),
        bytes_read_total=sum(ev["bytes_read"]), device_bytes_per_rank=None if None in dev else tuple(dev),
        checkpoint_file_B=files, amplification=sum(ev["bytes_read"]) / files, restore_s=ev["job_restore_s"],
        restore_s_per_rank=tuple(ev["restore_s"]), read_s=max(ev["read_s"]), broadcast_s=ev["job_broadcast_s"],
        load_s=max(ev["load_s"]), files_per_rank=tuple(tuple(f) for f in ev["files"]),
        cache_dropped=None if ev["resident_before"] is None else ev["dropped"], verified=ev["verified"],
        predicted=predict_restore(ev["scheme"], state_B, world, machine), rounds_s=tuple(rounds_s),
        warmed_B_per_rank=tuple(ev["warmed_B"]))


def measure_restores(nproc: int = 2, size_B: float | None = None, d_model: int = 32, layers: int = 2,
                     directory=None, machine: DistMachine | None = None, steps: int = 1, repeats: int = 1,
                     schemes=SCHEMES, drop_cache: bool = True, timeout_s: float = 300.0,
                     probe_B: float = 0.0, stage_steps: int = 0) -> RestoreComparison:
    """Save the lab's job in DDP and FSDP mode at ``nproc`` ranks after ``steps`` steps, restore it with
    each of ``schemes`` (one ``torchrun`` launch), and set each beside the prediction for ``machine``
    (default: measured here, :func:`~mlsysim.lab.distributed.predict.measure_dist_machine`).

    ``size_B``: pick the width whose state is closest to it (else ``d_model``); ``schemes``: names or
    ``"all"``; ``probe_B``: first time gloo's broadcast and pairs with this many bytes
    (:func:`~mlsysim.lab.distributed.probes.gloo_probe`, in ``gloo``); ``repeats``: each scheme restored that
    many times in one job, one scheme after another, the cache dropped before each; the scheme's figures
    are those of its median repeat (by ``restore_s``; the upper middle for an even count, as for the
    saves; verified only if every repeat was); ``stage_steps``: with ``probe_B``, each of DCP's probe stagings held
    while the job trains that many steps (:func:`~mlsysim.lab.distributed.probes.dcp_stage`; 0: back to back),
    then as many back to back in the same job (``dcp_stage_back_s``, ``dcp_stage_back_own_s`` in ``gloo``);
    ``directory``: an empty or new directory to write in (default: a temporary one, removed afterwards)."""
    check_world(nproc)
    if type(steps) is not int or steps < 1:
        raise MlsysimError(f"steps must be a positive integer (the checkpoint must differ from the "
                           f"initial weights), got {steps!r}")
    if type(repeats) is not int or repeats < 1:
        raise MlsysimError(f"repeats must be a positive integer, got {repeats!r}")
    if type(stage_steps) is not int or stage_steps < 0:
        raise MlsysimError(f"stage_steps must be an integer >= 0 (the training steps each of DCP's probe stagings "
                           f"is held through), got {stage_steps!r}")
    if size_B is not None and not size_B > 0:
        raise MlsysimError(f"size_B must be positive, got {size_B!r}")
    names = parse_schemes(schemes if isinstance(schemes, str) else ",".join(schemes))
    t0 = time.perf_counter()
    own = directory is None
    base = Path(tempfile.mkdtemp(prefix="mlsysim-restore-")) if own else Path(directory)
    try:
        if not own and base.exists() and any(base.iterdir()):
            raise MlsysimError(f"directory {base} is not empty; measure_restores writes new checkpoints "
                               f"into an empty or new directory")
        base.mkdir(parents=True, exist_ok=True)
        args = ["--dir", base, "--scheme", ",".join(names), "--make", steps, "--layers", layers,
                "--repeats", repeats, "--d-model", d_model] + (["--size-B", size_B] if size_B else []) \
            + ([] if drop_cache else ["--keep-cache"]) + (["--probe-B", probe_B] if probe_B else []) \
            + (["--stage-steps", stage_steps] if stage_steps else [])
        events = run_worker(args, nproc, timeout_s)
        if machine is None:
            machine = measure_dist_machine(directory=base)
    finally:
        if own:
            shutil.rmtree(base, ignore_errors=True)
    made = {e["made"]: e for e in events if "made" in e}
    first = next(iter(made.values()))
    state_B = first["state_B"]
    saves = tuple(ModeSave(mode=m, step=e["step"], file_B=tuple(e["file_B"]), stall_s=max(e["save_s"]),
                           durable_s=e["durable_s"], predicted=predict_job(state_B, nproc, m, machine, 1.0))
                  for m, e in made.items())
    results = []
    for name in names:
        evs = [e for e in events if e.get("scheme") == name]
        if not evs:
            raise LaunchError(f"the restore job reported nothing for scheme {name!r}")
        middle = sorted(evs, key=lambda e: e["job_restore_s"])[len(evs) // 2]
        ok = all(e["verified"] for e in evs)
        results.append(_scheme_result({**middle, "verified": ok}, state_B, nproc, machine,
                                      [e["job_restore_s"] for e in evs]))
    return RestoreComparison(world_size=nproc, params=first["params"], state_B=state_B, d_model=first["d_model"],
                             layers=first["layers"], machine=machine, saves=saves, schemes=tuple(results),
                             wall_s=time.perf_counter() - t0,
                             gloo=next(({k: v for k, v in e.items() if k != "probe"} for e in events if "probe" in e),
                                       None))


if __name__ == "__main__":
    raise SystemExit(main())
