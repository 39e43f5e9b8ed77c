"""Each engine of the PyTorch comparison predicted from this machine's measured rates (no torch import).

The first prediction, :func:`mlsysim.checkpoint` through :func:`~mlsysim.lab.pytorch.results.predicted`,
knows two rates, the memory copy and the disk's write + ``fsync``, and gives every blocking engine
the same d + W. The engines do more than copy and write, and each extra step is a rate that can be
measured on its own, as the floors are (:func:`mlsysim.lab.floors.measure_floors`). For S bytes:

=====================  =====================================  =================================  ==================
engine                 stall (blocked)                        durable                            load
=====================  =====================================  =================================  ==================
``torch.save``         S/t + S/q (in training p_t for S/q)    never                              R + A
``torch.save+fsync``   S/t + S/q + W (training: p_t)          = stall                            R + A
``dcp``                S/t + S/q + W (training: p_t)          = stall                            G + Z − S/c + d
``dcp-async``          D (training: D_t)                      D + S/t + S/q + W                  G + Z − S/c + d
``sync``               max(S/k, W) (training: max(S/k, V))    = stall                            max(R, S/k) + A
``concurrent``         L + d                                  d + max(S/k, W)                    max(R, S/k) + A
``pipelined``          L + d; in training L + max(0, d − τ)   d + max(S/k, W)                    max(R, S/k) + A
=====================  =====================================  =================================  ==================

D DCP's staging copy as its default stager makes it: a new storage from PyTorch's allocator for each tensor,
then the copy, from the rounds' memory state (the median; S/F where it was not timed), c memory copy into
touched memory, f copy into memory allocated just before by NumPy (page faults included, huge pages where
Linux gives them), F the same into an anonymous mapping, as PyTorch allocates its tensors (4 KB pages unless
transparent huge pages are ``always`` on), p write into the page cache (pages new to it, as a file that stays
cached takes them), q the same into pages the cache just gave back (this package's writers keep at most 64 MiB
of a file cached: :func:`mlsysim.lab.store.write_chunks`), W the write + ``fsync`` of S as the disk ran
between the saves (the median of its timings, :attr:`~mlsysim.lab.floors.Floors.typical_write_s`), k this
package's CRC-32, t the CRC-32 that ``torch.save``'s zip writer computes for every record (DCP writes each
tensor with ``torch.save``), r a read from the device (the floor, in one call), R the cold read of S tensor by
tensor, front to back, as ``torch.load`` and this package's loader read, as the disk ran during the loads (the
median of one per load round; S/r where not timed: :func:`~mlsysim.lab.pytorch.compare.compare` records it
beside the loads but predicts them with r), G the same with each tensor's archive read from its end first, as
DCP's loader reads: R + max(0, ΔG), ΔG what that order adds to the front-to-back read, the two timed back to back
in each load round (:func:`mlsysim.lab.pytorch.rates.cold_read_s`; the median of the rounds' differences,
:func:`pieces_extra_s`; G = R where not timed), τ the forward and
backward pass that the pipelined copy hides behind, d the copy of the state itself into a ready buffer, one
tensor after another, two buffers in turn, from the rounds' memory state (the median; S/c where it was not
timed), L the layout of the state that this package's ``save`` plans before it copies (one walk over the
tensors). This package's writers checksum in a second thread while they write (the longer of the two). The
loaders read into tensors they allocate through PyTorch's allocator (this package's loader into memory of each
large array's own, as ``torch.load`` does), and pay what that memory costs beyond a copy into touched memory:
A = S/u − S/c, u the copy of the state into new tensors while the previous copy is still held
(:func:`mlsysim.lab.pytorch.rates.alloc_copy_Bps`: the allocator hands back what an earlier load freed, as
the loads of a run follow one another). Without u, A = S/F − S/c (every page new). This package's loader
checksums while it reads, in a second thread (the longer of the two).

**DCP's loader** reads each tensor as an archive of its own: ``torch.load`` of a view of the file, into a
storage PyTorch's allocator makes for that piece, while the piece before is still held; then it copies the
piece into the state it loads in place, tensor after tensor. Z is that deserialization of the state from
memory, each tensor's archive made beforehand (:func:`mlsysim.lab.pytorch.rates.deserialize_s`, the
median): it holds the copy out of the archive into new storage, the allocator's pattern and
``torch.load``'s own work per record. The load from the device is then G (the read, which holds one copy
into memory already touched), plus what Z adds to a copy (Z − S/c), plus d, the copy into the state. Where
Z was not timed, DCP's load is predicted as G + A + S/c.

**Which pages the page cache takes.** In the rounds of the comparison every save starts from the
same state: two files of the state's size written into the page cache and deleted just before
(:func:`mlsysim.lab.pytorch.rates.prepare_memory`), so PyTorch's writers, which keep their whole
file in the cache, write into pages freed a moment before (q), and DCP's ``async_save`` finds enough
for its staging copy and its write. In training a checkpoint follows seconds of training, and the
memory an older checkpoint's deletion freed may have gone back to the host. This package's writers reuse
their own 64 MiB window either way.

**In training the disk and the page cache are timed again.** A shared disk drifts from minute to minute, and
the memory a file's pages take is as the training left it: the figures measured in the overhead runs (the
stall in training, the overhead) take W_t, the write + ``fsync`` of S, timed after every pair of overhead runs,
and two rates timed from the memory as the training left it, in turn, one after each pair (either would take
the memory the other meets): p_t, the page-cache write of S, and D_t, DCP's staging copy of the state
(:func:`mlsysim.lab.pytorch.rates.staging_once_s`); medians, S/p and D where not timed. DCP ``async_save``'s
stall in training is D_t.

**This package's window in training.** Its writers keep at most w = 80 MiB of a file cached (the 64 MiB
window and the chunk being written): after the first w bytes, each chunk lands in pages the cache has just
given back. In the rounds those first pages too were freed a moment before; in training they are memory as
the training left it, and write at p_t's pace, which on a machine whose host takes freed memory back is slower
than the disk. With ω = min(1, w/S), the sync engine's write in training takes V = W_t + ω max(0, p_t − W_t)
(its first window at the page cache's pace, the rest at the disk's), and the writers' page-cache work beside
the training is (1 − ω) S/q + ω p_t.

**Overhead per checkpoint** (training time with checkpoints minus without, per checkpoint): the
stall in training, plus the deletion of the older checkpoint (P, ``prune_s``, timed in the save rounds)
where the engine deletes it in the caller's thread before ``save`` returns (``torch.save``, DCP's ``save``,
this package's ``sync``: outside the stall, as the protocol times it, but not outside the training), plus,
for the engines that work beside the training, the CPU time of that work (the CRC-32 and the
page-cache write, S/k + (1 − ω) S/q + ω p_t; DCP's serialization; the pipelined engine's copy; the
deletion, which they run in their writer thread) where it has to take a core from the training:
nothing while the machine has a core the training leaves free (``train_threads`` < ``cores``), else
its seconds / ``cores``, as a step that runs on every core slows by 1/n of what another thread takes.
Where the run timed it, B, what one durable write of S beside the training cost a run of it (a plain run
beside this package's writer less the plain run before it, the median over the rounds), stands for the
background engines' write at that share (their deletion stays at the share): it holds what the thread
count does not show, the host's work for the writes and the memory bandwidth and caches the training
shares with the writer.

**Back-pressure in training.** A background engine starts a save only once the write before it is durable
(DCP's ``async_save`` as the comparison calls it, this package's engines by design). An overhead run trains
I between its two checkpoints (the plain runs' steps, median) and then waits until the last one is durable.
Where the writer's work in training, P_t (``dcp-async``: S/t + p_t + W_t; this package's: max(S/k, V)),
takes longer than I, the second save and the final wait each wait w = max(0, P_t − I): the overhead per
checkpoint adds w, and the stall in training, the median over first and second checkpoints alike, lies
midway, w/2 above the first's. Without I, no save waits.

Every term is a measured rate of this machine, none a fit to an engine's own timing; where an
engine's measured time still differs, notebook 06b names what the table leaves out.

>>> from mlsysim.lab.floors import Floors
>>> f = Floors(size_B=1e9, copy_Bps=10e9, write_Bps=1e9, read_cold_Bps=2e9, read_warm_Bps=4e9,
...            write_rounds_s=(1.0, 1.2, 1.4), cache_write_Bps=4e9, cache_rewrite_Bps=5e9, fresh_copy_Bps=4e9,
...            fresh_copy_small_pages_Bps=2e9, crc_Bps=20e9)
>>> e = engines_model(f, torch_crc_Bps=4e9, pass_s=0.05, cores=2, train_threads=2)
>>> round(e["sync"]["stall_s"], 3), round(e["torch.save+fsync"]["durable_s"], 3)   # max(0.05, 1.2); 0.25 + 0.2 + 1.2
(1.2, 1.65)
>>> round(e["torch.save+fsync"]["training_stall_s"], 3)      # in training, pages new to the cache: 0.25 + 0.25 + 1.2
1.7
>>> round(e["pipelined"]["training_stall_s"], 3), round(e["concurrent"]["overhead_s"], 3)  # 0.05; 0.1+(0.05+0.204)/2
(0.05, 0.227)
>>> w = engines_model(f, 4e9, pass_s=0.05, training_cache_write_s=2.0)   # p_t: 2 s; the first 80 MiB at its pace
>>> round(w["terms"]["V"], 3), round(w["sync"]["training_stall_s"], 3)    # 1.2 + 0.0839 * (2.0 - 1.2)
(1.267, 1.267)
>>> round(engines_model(f, 4e9, pass_s=0.05, cores=2, train_threads=1)["concurrent"]["overhead_s"], 3)  # a free core
0.1
>>> t = engines_model(f, 4e9, pass_s=0.05, snapshot_s=0.12, layout_s=0.01, training_write_s=1.5)
>>> round(t["concurrent"]["stall_s"], 3), round(t["pipelined"]["training_stall_s"], 3), t["sync"]["training_stall_s"]
(0.13, 0.08, 1.5)
>>> z = engines_model(f, 4e9, pass_s=0.05, pieces_extra_s=0.25, deserialize_s=0.4, snapshot_s=0.2)
>>> round(z["dcp"]["load_s"], 3), round(z["dcp-async"]["load_s"], 3)   # G + (Z - S/c) + d = 0.75 + 0.3 + 0.2
(1.25, 1.25)
>>> s = engines_model(f, 4e9, pass_s=0.05, staging_s=0.3, training_staging_s=0.9)
>>> s["dcp-async"]["stall_s"], s["dcp-async"]["training_stall_s"]    # D in the rounds, D_t in training
(0.3, 0.9)
>>> b = engines_model(f, 4e9, pass_s=0.05, interval_s=1.0, training_cache_write_s=1.0)   # P_t 0.25 + 1 + 1.2
>>> round(b["dcp-async"]["training_stall_s"], 3), round(b["dcp-async"]["overhead_s"], 3)   # 0.5 + 1.45/2; 0.5 + 1.45
(1.225, 1.95)
>>> p = engines_model(f, 4e9, pass_s=0.05, train_threads=1, prune_s={"sync": 0.1, "concurrent": 0.1})
>>> round(p["sync"]["overhead_s"], 3), round(p["concurrent"]["overhead_s"], 3)   # 1.2 + 0.1 in the caller; beside
(1.3, 0.1)
"""
from __future__ import annotations

import dataclasses
import math
import statistics

from ...errors import MlsysimError
from ..floors import Floors
from .. import store
from .results import ENGINES

ALL = ENGINES + ("pipelined",)
BACKGROUND = ("dcp-async", "concurrent", "pipelined")   # persist (and delete) in a thread of their own
PRUNE_IN_CALLER = tuple(e for e in ALL if e not in BACKGROUND)   # delete the older checkpoint in save()


def _terms(f: Floors, torch_crc_Bps: float) -> dict:
    """Seconds per term for the floors' size: the letters of the module's table."""
    s = f.size_B
    return {"c": s / f.copy_Bps, "f": s / f.fresh_copy_Bps, "F": s / f.fresh_copy_small_pages_Bps,
            "p": s / f.cache_write_Bps, "q": s / f.cache_rewrite_Bps, "W": f.typical_write_s,
            "k": s / f.crc_Bps, "t": s / torch_crc_Bps, "r": s / f.read_cold_Bps}


def engines_model(f: Floors, torch_crc_Bps: float, pass_s: float, cores: int = 2, train_threads: int = 1,
                  alloc_copy_Bps: float | None = None, snapshot_s: float | None = None, layout_s: float = 0.0,
                  training_write_s: float | None = None, prune_s: dict | None = None,
                  training_cache_write_s: float | None = None, read_s: float | None = None,
                  pieces_extra_s: float | None = None, staging_s: float | None = None,
                  training_staging_s: float | None = None,
                  write_beside_s: float | None = None, deserialize_s: float | None = None,
                  interval_s: float | None = None) -> dict:
    """Predicted ``stall_s``, ``durable_s`` (None: never durable), ``load_s``, ``overhead_s`` and
    ``training_stall_s`` per engine (see the module's table), and the terms in seconds (``terms``).

    ``f`` the floors measured in the run (with the write rounds, the page-cache write, the copy into
    new memory and the CRC-32 rate), ``torch_crc_Bps`` the rate of ``torch.save``'s own CRC-32,
    ``pass_s`` the forward and backward time, ``cores`` the machine's cores, ``train_threads`` the
    threads the training computes with, ``alloc_copy_Bps`` the copy into new tensors as the loads
    allocate them (u; None: every page new, F), ``snapshot_s`` the state's own copy into a ready buffer
    (d; None: S/c), ``layout_s`` the layout planned before it (L), ``training_write_s`` the write +
    ``fsync`` timed between the overhead runs (W_t; None: W), ``prune_s`` the deletion of an older
    checkpoint per engine, as the save rounds timed it (P; an engine not named: 0),
    ``training_cache_write_s`` the page-cache write timed between the overhead runs (p_t; None: S/p),
    ``read_s`` the cold read front to back (R; None: S/r), ``pieces_extra_s`` what each archive read from its
    end first adds to it in the load rounds (ΔG, :func:`pieces_extra_s`; None: 0; G = R + max(0, ΔG)),
    ``staging_s`` DCP's staging copy as its default stager makes it (D; None: S/F), ``training_staging_s``
    the same timed between the overhead runs (D_t; None: D), ``write_beside_s``
    what a durable write of S beside the training costs it (B; None: the work beside at the training's
    share of the cores), ``deserialize_s`` ``torch.load`` of the state piece by piece from memory, as DCP's
    loader deserializes it (Z; None: DCP's load predicted as G + A + S/c), ``interval_s`` the training between
    two checkpoints of an overhead run (I; None: long enough that no save waits for the write before it)."""
    times = {"snapshot_s": snapshot_s, "training_write_s": training_write_s,
             "training_cache_write_s": training_cache_write_s, "read_s": read_s,
             "staging_s": staging_s, "training_staging_s": training_staging_s, "deserialize_s": deserialize_s,
             "interval_s": interval_s}
    prune = dict(prune_s or {})
    _check_inputs(f, torch_crc_Bps, pass_s, (cores, train_threads), alloc_copy_Bps, times,
                  {"write_beside_s": write_beside_s, "pieces_extra_s": pieces_extra_s}, layout_s, prune)
    x = _timed_terms(f, torch_crc_Bps, times, alloc_copy_Bps, layout_s, write_beside_s)
    x["G"] = x["R"] + max(0.0, pieces_extra_s or 0.0)    # the same bytes in more pieces are read no faster
    omega = min(1.0, (store.WINDOW_B + store.CHUNK_B) / f.size_B)   # the share of S cached at once
    x["V"] = x["W_t"] + omega * max(0.0, x["p_t"] - x["W_t"])     # sync's write in training
    faults = max(0.0, x.get("u", x["F"]) - x["c"])     # A: the loaders' new tensors beyond a copy
    dcp_load = (x["G"] + max(0.0, x["Z"] - x["c"]) + x["d"] if "Z" in x   # pieces deserialized, copied in place
                else x["G"] + faults + x["c"])
    own_load = max(x["R"], x["k"]) + faults
    torch_write = x["t"] + x["p_t"]                   # in training: the memory as the training left it
    persist = max(x["k"], x["W"])                     # the CRC-32 beside the write
    snap = x["L"] + x["d"]                             # plan the layout, then copy tensor after tensor
    rounds_write = x["t"] + x["q"]                    # into the pages an older checkpoint's deletion freed
    cached = (1 - omega) * x["q"] + omega * x["p_t"]   # this package's writers in training: the first window new
    table = {
        "torch.save": (rounds_write, None, x["R"] + faults, 0.0),
        "torch.save+fsync": (rounds_write + x["W"], rounds_write + x["W"], x["R"] + faults, 0.0),
        "dcp": (rounds_write + x["W"], rounds_write + x["W"], dcp_load, 0.0),
        "dcp-async": (x["D"], x["D"] + rounds_write + x["W"], dcp_load, torch_write),
        "sync": (persist, persist, own_load, 0.0),
        "concurrent": (snap, x["d"] + persist, own_load, x["k"] + cached),
        "pipelined": (snap, x["d"] + persist, own_load, x["d"] + x["k"] + cached),
    }
    share = 0.0 if train_threads < cores else 1.0 / cores     # of the work beside, what the training pays
    out = {}
    torch_durable, own_write = torch_write + x["W_t"], max(x["k"], x["V"])   # each writer's work in training
    in_training = {"torch.save": torch_write, "torch.save+fsync": torch_durable, "dcp": torch_durable,
                   "dcp-async": x.get("D_t", x["D"]),
                   "sync": own_write, "pipelined": x["L"] + max(0.0, x["d"] - pass_s)}
    persist_t = {"dcp-async": torch_durable, "concurrent": own_write, "pipelined": own_write}   # in the background
    for e, (stall, durable, load, beside) in table.items():
        training, deletion = in_training.get(e, stall), prune.get(e, 0.0)
        wait = max(0.0, persist_t[e] - x["I"]) if e in persist_t and "I" in x else 0.0   # back-pressure
        if e in PRUNE_IN_CALLER:
            caller, lost = deletion, beside * share
        else:                                          # the write measured beside the training, where timed
            caller, lost = wait, (x["B"] if "B" in x else beside * share) + deletion * share
        out[e] = {"stall_s": stall, "durable_s": durable, "load_s": load, "training_stall_s": training + wait / 2,
                  "overhead_s": training + caller + lost}
    out["terms"] = x
    return out


def _timed_terms(f: Floors, torch_crc_Bps: float, times: dict, alloc_copy_Bps, layout_s: float,
                 write_beside_s) -> dict:
    """The floors' terms (:func:`_terms`) and those the run timed itself, each in its stand-in where not."""
    x = _terms(f, torch_crc_Bps)
    x["d"] = x["c"] if times["snapshot_s"] is None else times["snapshot_s"]
    x["L"] = layout_s
    x["W_t"] = x["W"] if times["training_write_s"] is None else times["training_write_s"]
    if alloc_copy_Bps is not None:
        x["u"] = f.size_B / alloc_copy_Bps
    x["p_t"] = x["p"] if times["training_cache_write_s"] is None else times["training_cache_write_s"]
    x["R"] = x["r"] if times["read_s"] is None else times["read_s"]
    x["D"] = x["F"] if times["staging_s"] is None else times["staging_s"]
    if times["training_staging_s"] is not None:
        x["D_t"] = times["training_staging_s"]
    if write_beside_s is not None:
        x["B"] = max(0.0, write_beside_s)
    if times["deserialize_s"] is not None:
        x["Z"] = times["deserialize_s"]
    if times["interval_s"] is not None:
        x["I"] = times["interval_s"]
    return x


def _check_inputs(f: Floors, torch_crc_Bps: float, pass_s: float, counts: tuple, alloc_copy_Bps, times: dict,
                  differences: dict, layout_s: float, prune: dict) -> None:
    """Refuse what :func:`engines_model` cannot predict from, naming the input and its limit."""
    rates = {"copy_Bps": f.copy_Bps, "fresh_copy_Bps": f.fresh_copy_Bps,
             "fresh_copy_small_pages_Bps": f.fresh_copy_small_pages_Bps, "cache_write_Bps": f.cache_write_Bps,
             "cache_rewrite_Bps": f.cache_rewrite_Bps,
             "crc_Bps": f.crc_Bps, "read_cold_Bps": f.read_cold_Bps, "torch_crc_Bps": torch_crc_Bps}
    for name, v in rates.items():
        if not (v > 0):                   # NaN too: a rate the floors did not measure
            raise MlsysimError(f"{name} must be a measured rate > 0 B/s to predict the engines, got {v!r}")
    if not (0 <= pass_s < math.inf):
        raise MlsysimError(f"pass_s must be a finite time >= 0 s, got {pass_s!r}")
    for name, v in zip(("cores", "train_threads"), counts):
        if type(v) is not int or v < 1:
            raise MlsysimError(f"{name} must be a positive integer, got {v!r}")
    if alloc_copy_Bps is not None and not (alloc_copy_Bps > 0):
        raise MlsysimError(f"alloc_copy_Bps must be a measured rate > 0 B/s, got {alloc_copy_Bps!r}")
    for name, v in times.items():
        if v is not None and not (0 < v < math.inf):
            raise MlsysimError(f"{name} must be a measured time > 0 s, got {v!r}")
    for name, v in differences.items():              # differences of two timings: noise may make them < 0
        if v is not None and not (-math.inf < v < math.inf):
            raise MlsysimError(f"{name} must be a measured time in s, got {v!r}")
    if not (0 <= layout_s < math.inf):
        raise MlsysimError(f"layout_s must be a measured time >= 0 s, got {layout_s!r}")
    for name, v in prune.items():
        if not (0 <= v < math.inf):
            raise MlsysimError(f"prune_s[{name!r}] must be a measured time >= 0 s, got {v!r}")


def remodel(record: dict) -> dict:
    """``record`` (a run's ``to_dict()``, as stored) with each engine's ``model`` and the ``terms_s`` computed
    again by :func:`mlsysim.lab.pytorch.model.engines_model` from the rates the run measured (its floors,
    ``torch_crc_Bps``, ``pass_s``, ``alloc_copy_Bps``, DCP's staging copy, the rates timed again in training
    and the load rounds' cold reads, cores and training threads, each engine's ``prune_s``); the
    measurements are left as they are."""
    names = {f.name for f in dataclasses.fields(Floors)}
    floors = {k: v for k, v in record["floors"].items() if k in names}
    floors["write_rounds_s"] = tuple(floors.get("write_rounds_s", ()))
    prune = {r["engine"]: r["prune_s"] for r in record["engines"] if r.get("prune_s") is not None}
    model = engines_model(Floors(**floors), record["torch_crc_Bps"], record["pass_s"],
                          cores=record["machine"]["cores"], train_threads=record["config"]["threads"],
                          alloc_copy_Bps=record.get("alloc_copy_Bps"), snapshot_s=record.get("snapshot_copy_s"),
                          layout_s=record.get("layout_s") or 0.0, training_write_s=record.get("training_write_s"),
                          prune_s=prune, training_cache_write_s=record.get("training_cache_write_s"),
                          pieces_extra_s=pieces_extra_s(record.get("read_rounds_s"), record.get("pieces_rounds_s")),
                          staging_s=record.get("staging_copy_s"), training_staging_s=record.get("training_staging_s"),
                          write_beside_s=record.get("write_beside_s"),
                          deserialize_s=record.get("deserialize_s"), interval_s=record.get("interval_s"))
    engines = [{**r, "model": {k: model[r["engine"]][k] for k in r["model"]}} for r in record["engines"]]
    return {**record, "engines": engines, "terms_s": model["terms"]}


def pieces_extra_s(read_rounds_s, pieces_rounds_s) -> float | None:
    """What reading each tensor's archive from its end first, as DCP's loader reads, adds to reading the same
    bytes front to back (ΔG): the median over the load rounds of the difference of the two cold reads that each
    round times back to back (:func:`mlsysim.lab.pytorch.rates.cold_read_s`, front to back first); None where the
    rounds timed no pair. A difference is taken, not either read alone: both ran slower than the loads that read
    the same bytes (notebook 06b), so neither stands for a loader's read; the two are timed in one round, in turn.

    >>> round(pieces_extra_s([0.8, 0.5, 0.9], [0.6, 0.7, 1.0]), 3)     # -0.2, 0.2, 0.1
    0.1
    """
    pairs = list(zip(read_rounds_s or (), pieces_rounds_s or ()))
    if not pairs or len(read_rounds_s) != len(pieces_rounds_s):
        return None
    return statistics.median(g - r for r, g in pairs)
