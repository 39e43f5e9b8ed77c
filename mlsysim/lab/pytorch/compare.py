"""Every engine on one PyTorch training state, in one run, beside the machine's floors.

Needs the optional extra (``pip install -e .[torch]``). :func:`compare` trains the lab's
transformer (:mod:`mlsysim.lab.pytorch.train`) for two steps, then checkpoints that one
state with each engine: PyTorch's four, this package's three (or the ones asked for). In the save
rounds no training runs between the saves, so the pipelined engine's copy hides behind nothing
there; the overhead runs (2.) train beside it:

1. **Save.** One untimed warm-up save per engine, then ``repeats`` timed rounds; in each
   round every engine saves once, in an order that changes from round to round
   (:func:`round_order`: a shared disk drifts, so no engine always goes first, and what one
   save leaves behind slows the next, so none always follows the same one). After each save
   the run waits until it is durable and flushes the page cache's dirty pages (``os.sync``,
   untimed), so that one engine's unwritten bytes never slow the next; each round ends with
   one more timing of the write floor, and the fastest write seen sets it. Every save (and every
   timing of the floor) starts from the same memory state: two files of the state's size
   (:data:`~mlsysim.lab.pytorch.rates.PREPARED_FILES`) written into the page cache, flushed and deleted
   just before, untimed (:func:`~mlsysim.lab.pytorch.rates.prepare_memory`). On a virtual machine a
   write into the page cache is fast into pages a deletion has just freed and several times slower into
   memory the host took back; without this the state would depend on which engine went before (one
   that keeps its files cached frees a file's worth when it deletes its older checkpoint, one that
   writes past the cache frees none). One protocol for every engine, ours and PyTorch's: stall
   (blocked) = the time ``save`` held the caller; durable = the time until the data and the commit
   were on disk (NaN for plain ``torch.save``, which never is); deleting the checkpoints older than
   the newest two runs after both and is timed on its own (prune). Medians over the rounds.
2. **Overhead.** What training pays, which a stall does not show (a background write
   slows the steps beside it). One trainer of the lab's transformer runs pairs of timed runs
   of :data:`OVERHEAD_STEPS` steps: one without checkpoints, then one with a checkpoint after
   every :data:`OVERHEAD_EVERY` steps, timed until its last checkpoint is durable; each engine
   gets one pair per round (at most :data:`OVERHEAD_ROUNDS` rounds, engines in :func:`round_order`).
   Overhead per checkpoint = the median over the rounds of (the run with checkpoints − the run
   without, just before it) / checkpoints: the pair shares the machine's state of the moment,
   so a drift of the shared machine cancels. The stall of each of those checkpoints is kept too
   (``training_stall_s``, median; each one with the back-pressure inside it and its time to durable):
   only there does the pipelined engine's copy have a forward and backward pass to hide behind, timed
   on its own (``pass_s``). After each pair, from the memory as the training left it, the page-cache
   write of the state's size (``training_cache_write_s``) or, after every other pair, DCP's staging
   copy of the state (``training_staging_s``) is timed, then the write floor of the state's size once
   more (``training_write_s``), each the median: the disk drifts between the save rounds and these
   runs, and the figures of these runs are predicted with the rates timed here. Once
   a round, one more pair: a plain run, then the same run beside one durable write of the state's size
   by this package's writer, started with it: what a write beside the training costs it, whoever
   writes (``write_beside_s``, median). The plain runs also give the training between two checkpoints,
   :data:`OVERHEAD_EVERY` of their steps (``interval_s``, median): a background write longer than that
   makes the next ``save`` wait.
3. **Load.** :data:`LOAD_ROUNDS` × ``repeats`` rounds (a load is short, and the disk's read rate
   drifts from one to the next as its write rate does); in each, every engine's own loader reads its
   newest checkpoint once, in the order of :func:`round_order` (what the previous load left in
   memory changes the next one's time: no loader always follows the same one). Every load starts
   from the same state: the checkpoint's pages dropped from the page cache, the previous load's
   result still held (it is released once this load has returned, as a program holds its old state
   while it loads the new). Medians over the rounds. DCP loads in place into a state of the same
   structure made beforehand (its normal use: the model's own tensors); the other loaders
   allocate what they return.
4. **Resume.** A trainer built from each engine's newest checkpoint, loaded once more (untimed),
   trains two more steps; their losses must equal, bit for bit, those of the run that never stopped.
5. **Corruption.** One byte in the middle of each engine's newest checkpoint (its largest
   file) is flipped, and the engine's loader is asked again: it refuses the file (and
   falls back to the previous checkpoint), fails, or returns changed tensors without
   an error — the finding this step exists to show. The byte is then flipped back: the
   checkpoints left in ``directory`` are the ones the engines wrote, every one loadable.

Two predictions stand beside each engine. The refined one (``model``, :mod:`mlsysim.lab.pytorch.model`) adds
each engine's own work to the floors, from rates measured in the same run: the page-cache write, the copy into
new memory, DCP ``async_save``'s staging copy as its default stager allocates it (from the same memory state
as the saves, the median), this package's snapshot into a ready buffer (timed as a save of the rounds is: from
the same memory state, the median), the copy into the tensors a load allocates (``alloc_copy_Bps``, the
median), ``torch.load`` of the state piece by piece from memory as DCP's loader deserializes it
(``deserialize_s``, the median), this package's CRC-32 and ``torch.save``'s own (``torch_crc_Bps``), and, where
the memory state or the disk drifts, rates timed again in the same stretch of the run: the page-cache write
after each overhead pair, the cold read tensor by tensor in each load round, each tensor's archive from its end,
as DCP's loader reads (the same read front to back is recorded beside it; the other loads keep the read
floor). The first,
:func:`mlsysim.checkpoint`'s (measured floors as its memory and storage rates, see
:mod:`mlsysim.lab.predict`), is kept as ``predicted``: the ``sync`` strategy for the engines that block until
durable, ``async`` for those that snapshot and persist in the background.
"""
from __future__ import annotations

import copy
import math
import os
import statistics
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ...errors import MlsysimError, UnknownNameError
from ...measure import drop_page_cache
from ...tables import Table
from .. import store
from ..floors import Floors, cache_write_once, measure_floors, with_write_rounds, write_once
from ..predict import machine_from, predict
from .engines import ALL_ENGINES, load_latest, make, newest_path
from .model import engines_model, pieces_extra_s
from .rates import (alloc_copy_Bps, cold_read_s, deserialize_s, flat, prepare_memory, snapshot_copy, staging_copy_s,
                    staging_once_s, tensor_sizes, torch_crc_Bps)
from .results import ASYNC, ENGINES, recorded, targets  # noqa: F401  (read without torch; used from here too)
from .train import TorchConfig, TorchTrainer

RESUME_STEPS = 2
OVERHEAD_STEPS, OVERHEAD_EVERY = 6, 2   # an overhead run: 6 training steps, a checkpoint after steps 2 and 4
OVERHEAD_ROUNDS = 7                     # at most: pairs of runs per engine, the overhead their median (one
                                        # pair's difference varies by about a tenth of a second here)
LOAD_ROUNDS = 3                         # load rounds per save round: one loader's cold reads of a 1 GB file
                                        # spread here by a factor of two and more


@dataclass(frozen=True)
class EngineRun:
    """One engine on the shared state: medians of the timed rounds, and what its loader did."""

    engine: str
    size_B: int                 # bytes on disk of one checkpoint
    stall_s: float
    durable_s: float            # NaN: never durable (plain torch.save)
    load_s: float
    resumed_exactly: bool
    corruption: str             # what the loader did with a flipped byte
    corruption_noticed: bool
    predicted_stall_s: float
    predicted_durable_s: float
    predicted_load_s: float
    stalls_s: tuple = ()
    durables_s: tuple = ()
    loads_s: tuple = ()
    prune_s: float = float("nan")       # deleting the older checkpoints, after blocked and durable
    overhead_s: float = float("nan")    # training time per checkpoint (see the module's text)
    overheads_s: tuple = ()             # each pair's difference per checkpoint, in the order run
    training_stall_s: float = float("nan")   # the stall per checkpoint in the overhead runs (median)
    training_stalls_s: tuple = ()       # each checkpoint of the overhead runs, in the order run: its stall,
    training_waits_s: tuple = ()        # the part of it spent waiting for the write before (back-pressure),
    training_durables_s: tuple = ()     # and its time from save until durable
    model: dict = field(default_factory=dict)    # mlsysim.lab.pytorch.model's prediction for this engine

    def to_dict(self, floors: Floors) -> dict:
        return {"engine": self.engine, "size_B": self.size_B, "stall_s": self.stall_s,
                "durable_s": _or_none(self.durable_s),
                "durable": self.durable_s == self.durable_s, "load_s": self.load_s,
                "resumed_exactly": self.resumed_exactly, "corruption": self.corruption,
                "corruption_noticed": self.corruption_noticed, "copy_floor_s": floors.copy_floor_s,
                "write_floor_s": floors.write_floor_s,
                "predicted": {"stall_s": self.predicted_stall_s,
                              "durable_s": _or_none(self.predicted_durable_s), "load_s": self.predicted_load_s},
                "stalls_s": list(self.stalls_s), "durables_s": [_or_none(d) for d in self.durables_s],
                "loads_s": list(self.loads_s), "prune_s": _or_none(self.prune_s),
                "overhead_s": _or_none(self.overhead_s), "overheads_s": list(self.overheads_s),
                "training_stall_s": _or_none(self.training_stall_s),
                "training_stalls_s": list(self.training_stalls_s), "training_waits_s": list(self.training_waits_s),
                "training_durables_s": [_or_none(d) for d in self.training_durables_s],
                "model": dict(self.model)}


def _or_none(x: float):
    """NaN (never durable) as JSON's null: strict JSON readers refuse a bare NaN."""
    return None if x != x else x


@dataclass(frozen=True)
class Comparison:
    """Result of :func:`compare`: the floors and one :class:`EngineRun` per engine."""

    size_B: int                 # bytes of the state's tensors
    config: TorchConfig
    repeats: int
    floors: Floors
    runs: tuple
    snapshot_copy_s: float = float("nan")   # this package's snapshot of the state into a ready buffer (median)
    tensors: int = 0                        # how many tensors the state holds
    torch_crc_Bps: float = float("nan")     # torch.save's own CRC-32 of its records (a model term)
    pass_s: float = float("nan")            # one forward and backward pass (the pipelined copy's cover)
    alloc_copy_Bps: float = float("nan")    # the copy into new tensors while the previous copy is held (u)
    layout_s: float = float("nan")          # this package's layout of the state, planned before its copy (L)
    training_write_s: float = float("nan")  # write + fsync of the state's size between the overhead runs (W_t)
    training_cache_write_s: float = float("nan")   # page-cache write of the state's size there (p_t, median)
    write_beside_s: float = float("nan")    # what a durable write of that size beside the training costs it (B)
    staging_copy_s: float = float("nan")    # DCP async_save's staging copy, as its default stager makes it (D)
    training_staging_s: float = float("nan")   # the same between the overhead runs (D_t, median)
    deserialize_s: float = float("nan")     # torch.load of the state piece by piece from memory, as DCP loads (Z)
    interval_s: float = float("nan")        # the training between two checkpoints of an overhead run (I, median)
    read_rounds_s: tuple = ()               # cold read of the state's size tensor by tensor, once per load round
    pieces_rounds_s: tuple = ()             # the same tensor by tensor, each archive from its end (DCP's loads)
    terms_s: dict = field(default_factory=dict)   # the model's terms in seconds (see mlsysim.lab.pytorch.model)

    def run(self, engine: str) -> EngineRun:
        for r in self.runs:
            if r.engine == engine:
                return r
        raise UnknownNameError("engine in this comparison", engine, [r.engine for r in self.runs])

    def table(self) -> Table:
        f = self.floors
        rows = [{"engine": r.engine, "blocked s": r.stall_s,
                 "durable s": "never" if r.durable_s != r.durable_s else r.durable_s,
                 "prune s": r.prune_s, "overhead s": r.overhead_s, "stall in training s": r.training_stall_s,
                 "load s": r.load_s, "model stall s": r.model.get("stall_s", r.predicted_stall_s),
                 "resumed exactly": r.resumed_exactly, "flipped byte": r.corruption} for r in self.runs]
        title = (f"{self.size_B / 1e6:.0f} MB of state, median of {self.repeats}; floors: copy "
                 f"{f.copy_floor_s:.3g} s, write + fsync {f.write_floor_s:.3g} s, read {f.read_floor_s:.3g} s")
        return Table(rows, title)

    def __str__(self) -> str:
        return str(self.table())

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()

    def to_dict(self) -> dict:
        """Plain SI values (schema ``mlsysim.lab.torch-compare/1``): one record per engine, and the floors."""
        f = self.floors
        return {"schema": "mlsysim.lab.torch-compare/1", "size_B": self.size_B, "repeats": self.repeats,
                "config": vars(self.config).copy(), "floors": f.to_dict(), "copy_floor_s": f.copy_floor_s,
                "write_floor_s": f.write_floor_s, "snapshot_copy_s": _or_none(self.snapshot_copy_s),
                "tensors": self.tensors, "torch_crc_Bps": _or_none(self.torch_crc_Bps),
                "pass_s": _or_none(self.pass_s), "alloc_copy_Bps": _or_none(self.alloc_copy_Bps),
                "layout_s": _or_none(self.layout_s), "training_write_s": _or_none(self.training_write_s),
                "training_cache_write_s": _or_none(self.training_cache_write_s),
                "staging_copy_s": _or_none(self.staging_copy_s),
                "training_staging_s": _or_none(self.training_staging_s),
                "write_beside_s": _or_none(self.write_beside_s),
                "deserialize_s": _or_none(self.deserialize_s), "interval_s": _or_none(self.interval_s),
                "read_rounds_s": list(self.read_rounds_s), "pieces_rounds_s": list(self.pieces_rounds_s),
                "terms_s": dict(self.terms_s),
                "engines": [r.to_dict(f) for r in self.runs]}


def same_state(a, b) -> bool:
    """Whether two states hold the same values, tensors compared bit for bit."""
    fa, fb = dict(flat(a)), dict(flat(b))
    if fa.keys() != fb.keys():
        return False
    for k, x in fa.items():
        y = fb[k]
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            x, y = torch.as_tensor(x), torch.as_tensor(y)
            if x.dtype != y.dtype or x.shape != y.shape or not torch.equal(x.reshape(-1).view(torch.uint8),
                                                                           y.reshape(-1).view(torch.uint8)):
                return False
        elif x != y:
            return False
    return True


def _files(path: Path) -> list[Path]:
    return sorted(path.iterdir()) if path.is_dir() else [path]


def flip_middle_byte(path: Path) -> Path:
    """Flip every bit of the middle byte of ``path`` (of its largest file, for a directory)."""
    target = max(_files(path), key=lambda p: p.stat().st_size)
    with open(target, "r+b") as f:
        f.seek(target.stat().st_size // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
        f.flush()
        os.fsync(f.fileno())
    return target


def engine_folder(root: Path, engine: str) -> Path:
    """The folder under ``root`` that holds ``engine``'s checkpoints in a comparison."""
    return root / engine.replace("+", "-").replace(".", "-")


def round_order(engines: tuple, k: int) -> tuple:
    """The engines' order in round ``k``: it starts at engine ``2k`` and steps through them by a stride
    that changes from round to round (1, 2, ... up to one less than their number, where that stride
    reaches every engine), so that no engine always goes first and none always follows the same
    one: what a save or a load leaves behind (memory the host must back again, the disk's queue)
    slows the next. Two engines take turns going first.

    >>> round_order(tuple("abcdefg"), 0), round_order(tuple("abcdefg"), 1)
    (('a', 'b', 'c', 'd', 'e', 'f', 'g'), ('c', 'e', 'g', 'b', 'd', 'f', 'a'))
    """
    n = len(engines)
    if n <= 2:
        return tuple(engines[(k + j) % n] for j in range(n))
    stride = 1 + k % (n - 1)
    stride = stride if math.gcd(stride, n) == 1 else 1
    return tuple(engines[(2 * k + j * stride) % n] for j in range(n))


def _template(kind: str, cfg: TorchConfig):
    return TorchTrainer(cfg).state() if kind.startswith("dcp") else None


def _load_rounds(engines, folders: dict, cfg: TorchConfig, repeats: int, floor: tuple,
                 say=lambda message: None) -> tuple[dict, dict]:
    """Each engine's load times over ``repeats`` rounds (see the module's text, 3.): in each round
    every engine loads once, in :func:`round_order`, its newest checkpoint's pages dropped from the page
    cache first; the previous load's result is held until this one has returned, across rounds too.
    Each round ends, beside the last result, with two cold reads of a file of the state's size,
    ``floor`` = (path, tensor sizes), tensor by tensor: front to back, and each tensor from its end first
    (:func:`~mlsysim.lab.pytorch.rates.cold_read_s`). Returns the load times and those reads. ``say`` is told."""
    say("loading")
    path, sizes = floor
    times, reads = {e: [] for e in engines}, {"read_s": [], "pieces_read_s": []}
    buf = np.full(sum(sizes), 7, dtype=np.uint8)
    write_once(path, buf)
    held = None                    # every load and read, the first round's first load aside, runs beside one result
    try:
        for k in range(repeats):
            for e in round_order(engines, k):
                for p in _files(newest_path(e, folders[e])):
                    drop_page_cache(p)
                held = load_latest(e, folders[e], template=_template(e, cfg))   # the old one goes after
                times[e].append(held.read_s)
            reads["read_s"].append(cold_read_s(path, buf, sizes))
            reads["pieces_read_s"].append(cold_read_s(path, buf, sizes, tail_first=True))
    finally:
        del held
        path.unlink(missing_ok=True)
    return times, reads


def _corrupt(kind: str, directory: Path, cfg: TorchConfig, saved) -> tuple[str, bool]:
    """Flip a byte of the newest checkpoint, ask the loader again, then flip the byte back, so that
    the checkpoint the reader keeps is the one the engine wrote."""
    newest = newest_path(kind, directory)
    flipped = flip_middle_byte(newest)
    try:
        return _loaded_after_flip(kind, directory, cfg, saved, newest, flipped)
    finally:
        flip_middle_byte(newest)          # the same byte again: every bit back as written


def _loaded_after_flip(kind, directory, cfg, saved, newest: Path, flipped: Path) -> tuple[str, bool]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = load_latest(kind, directory, template=_template(kind, cfg))
        except Exception as e:
            return f"refused, nothing loaded ({type(e).__name__})", True
    if got.path != str(newest):
        named = any(flipped.name in str(w.message) or newest.name in str(w.message) for w in caught)
        return (f"refused; fell back to the previous checkpoint" + (", warning named the file" if named else "")), True
    if same_state(got.state, saved):
        return "loaded; the byte changed nothing that was read", False
    return "loaded changed tensors without an error", False


def compare(size_B: float = 16e6, engines=ALL_ENGINES, repeats: int = 3, directory=None,
            cfg: TorchConfig | None = None, floors: Floors | None = None, progress=None) -> Comparison:
    """Checkpoint one PyTorch training state with every engine (see the module's text).

    ``cfg`` (default :meth:`~mlsysim.lab.pytorch.train.TorchConfig.for_size` of ``size_B``)
    sets the model; ``floors`` reuses an earlier measurement; ``directory`` (default: a
    temporary one) receives one folder per engine and must not hold checkpoints already;
    ``progress(message)`` is told what is running.
    """
    engines = _checked(engines, repeats)
    cfg = cfg or TorchConfig.for_size(size_B)
    say = progress or (lambda message: None)
    with tempfile.TemporaryDirectory(prefix="mlsysim-torch-lab-") as tmp:
        root = store.check_directory(directory or tmp)
        folders = _empty_folders(root, engines)
        trainer = TorchTrainer(cfg)
        for _ in range(2):
            trainer.step()
        state = trainer.state()
        state_B = trainer.state_B
        say(f"measuring the floors with {state_B / 1e6:.0f} MB")
        floors = floors or measure_floors(state_B, root, repeats=repeats)
        snapshot_s, tensors = snapshot_copy(state, repeats, root)
        torch_crc = torch_crc_Bps(repeats)
        alloc_Bps = alloc_copy_Bps(state, repeats)
        staging = staging_copy_s(state, repeats, root)
        unpickle_s = deserialize_s(state, repeats)
        records, floor_rounds = _save_rounds(engines, folders, state, repeats, (root / "floor.bin", state_B), say)
        floors = with_write_rounds(floors, floor_rounds)
        machine = machine_from(floors.copy_Bps, floors.write_Bps, floors.read_cold_Bps)
        pred = predict(state_B, machine, interval_s=1e6)
        saved = copy.deepcopy(state)         # the state every engine saved, before training goes on
        reference = [trainer.step() for _ in range(RESUME_STEPS)]
        say("overhead: training with and without checkpoints")
        overhead, in_training, timed = _overheads(
            cfg, engines, {e: d.with_name(d.name + "-overhead") for e, d in folders.items()},
            min(repeats, OVERHEAD_ROUNDS))
        loads, reads = _load_rounds(engines, folders, cfg, LOAD_ROUNDS * repeats,
                                    (root / "read-floor.bin", tensor_sizes(state)), say)
        timed["pieces_extra_s"] = pieces_extra_s(reads["read_s"], reads["pieces_read_s"])
        timed.update(staging_s=staging, deserialize_s=unpickle_s)
        model = _model(floors, torch_crc, alloc_Bps, snapshot_s, timed,
                       {e: _median_known(r.prune_s for r in records[e]) for e in engines})
        runs = []
        for e in engines:
            say(f"resuming from {e}")
            back = TorchTrainer.from_state(load_latest(e, folders[e], template=_template(e, cfg)).state)
            resumed = [back.step() for _ in range(RESUME_STEPS)] == reference
            corruption, noticed = _corrupt(e, folders[e], cfg, saved)
            runs.append(_engine_run(e, records[e], loads[e], resumed, corruption, noticed, pred,
                                    (overhead[e], in_training[e]), model.get(e, {})))
    return Comparison(size_B=state_B, config=cfg, repeats=repeats, floors=floors, runs=tuple(runs),
                      snapshot_copy_s=snapshot_s, tensors=tensors, torch_crc_Bps=torch_crc, pass_s=timed["pass_s"],
                      alloc_copy_Bps=alloc_Bps, layout_s=timed["layout_s"], training_write_s=timed["write_s"],
                      training_cache_write_s=timed["cache_write_s"], staging_copy_s=staging,
                      training_staging_s=timed["training_staging_s"] or float("nan"),   # None: not timed
                      write_beside_s=timed["write_beside_s"],
                      deserialize_s=unpickle_s, interval_s=timed["interval_s"],
                      read_rounds_s=tuple(reads["read_s"]), pieces_rounds_s=tuple(reads["pieces_read_s"]),
                      terms_s=model.get("terms", {}))


def _checked(engines, repeats: int) -> tuple:
    """``engines`` as a tuple, each a known engine named once; ``repeats`` a positive integer."""
    engines = tuple(engines)
    for e in engines:
        if e not in ALL_ENGINES:
            raise UnknownNameError("checkpoint engine", e, ALL_ENGINES)
    if not engines or len(set(engines)) != len(engines):
        raise MlsysimError(f"engines must name each engine once, got {engines!r}")
    if type(repeats) is not int or repeats < 1:
        raise MlsysimError(f"repeats must be a positive integer, got {repeats!r}")
    return engines


def _empty_folders(root: Path, engines) -> dict:
    """Each engine's folder under ``root``; neither it nor its overhead folder may hold files yet."""
    folders = {e: engine_folder(root, e) for e in engines}
    for d in [*folders.values(), *(f.with_name(f.name + "-overhead") for f in folders.values())]:
        if d.exists() and any(d.iterdir()):
            raise MlsysimError(f"{d} already holds files; give an empty directory (the lab never deletes "
                               f"checkpoints it did not write)")
    return folders


def _save_rounds(engines, folders: dict, state, repeats: int, floor: tuple, say) -> tuple[dict, list]:
    """The save rounds (see the module's text, 1.): one untimed warm-up, then ``repeats`` rounds in
    :func:`round_order`, each save waited for and the dirty pages flushed, each round ended by a timing
    of the write floor, ``floor`` = (path, bytes); before each save and each floor timing,
    :func:`~mlsysim.lab.pytorch.rates.prepare_memory`. Returns each engine's timed save records and those timings."""
    (floor_path, floor_B), live = floor, {}
    try:
        _open_engines(live, engines, folders, state)
        floor_data, floor_rounds = np.full(floor_B, 7, dtype=np.uint8), []
        for k in range(repeats + 1):            # k = 0: the untimed warm-up
            say(f"round {k} of {repeats}" if k else "warm-up saves")
            for e in round_order(engines, k):
                prepare_memory(floor_path.parent, floor_data)
                live[e].save(k + 1, state)
                live[e].wait()
                os.sync()
            if k:                               # the write floor again, in the same round
                prepare_memory(floor_path.parent, floor_data)
                floor_rounds.append(write_once(floor_path, floor_data))
                floor_path.unlink()
        return {e: live[e].summary()[1:] for e in engines}, floor_rounds
    finally:
        for eng in live.values():
            eng.close()


def _open_engines(live: dict, engines, folders: dict, state) -> None:
    """Make each engine into ``live`` (filled as it goes, so that the caller closes every one made),
    keeping the newest two checkpoints; this package's background engines allocate their snapshot
    buffer for ``state`` before the first save."""
    size_B = store.layout(state, 0).size_B
    for e in engines:
        live[e] = make(e, folders[e], keep=2)
        if e in ("concurrent", "pipelined"):
            live[e].prepare(size_B)


def _model(floors: Floors, torch_crc_Bps: float, alloc_Bps: float, snapshot_s: float, timed: dict,
           prune_s: dict) -> dict:
    """The refined model's prediction per engine, or none where a rate could not be measured; ``timed``
    holds what the overhead runs timed (``pass_s``, ``layout_s``, ``write_s``, ``cache_write_s``), DCP's
    staging copy (``staging_s``; ``training_staging_s`` in the overhead runs) and what the load rounds' cold read
    tensor by tensor as DCP reads adds to the front-to-back read timed beside it (``pieces_extra_s``,
    :func:`~mlsysim.lab.pytorch.model.pieces_extra_s`; the loads keep the read floor), ``prune_s`` each engine's
    deletion of an older checkpoint in the save rounds (NaN: none timed)."""
    try:
        return engines_model(floors, torch_crc_Bps, timed["pass_s"], cores=os.cpu_count() or 1,
                             train_threads=torch.get_num_threads(),
                             alloc_copy_Bps=alloc_Bps if alloc_Bps == alloc_Bps else None, snapshot_s=snapshot_s,
                             layout_s=timed["layout_s"], training_write_s=timed["write_s"],
                             prune_s={e: v for e, v in prune_s.items() if v == v},
                             training_cache_write_s=timed["cache_write_s"],
                             pieces_extra_s=timed["pieces_extra_s"], staging_s=timed.get("staging_s"),
                             training_staging_s=timed.get("training_staging_s"),
                             write_beside_s=timed.get("write_beside_s"), deserialize_s=timed.get("deserialize_s"),
                             interval_s=timed.get("interval_s"))
    except MlsysimError:
        return {}


def _median_known(values) -> float:
    known = [v for v in values if v == v]
    return statistics.median(known) if known else float("nan")


def _timed_run(trainer: TorchTrainer, engine=None, first_step: int = 0) -> float:
    """Seconds for ``trainer`` to train :data:`OVERHEAD_STEPS` steps, checkpointing with ``engine`` after
    every :data:`OVERHEAD_EVERY` steps but the last (none when ``engine`` is None), until durable."""
    fence = getattr(engine, "fence", None)
    t0 = time.perf_counter()
    for k in range(1, OVERHEAD_STEPS + 1):
        trainer.step(before_update=fence)
        if engine is not None and k % OVERHEAD_EVERY == 0 and k < OVERHEAD_STEPS:
            engine.save(first_step + k, trainer.state())
    if engine is not None:
        engine.wait()
    return time.perf_counter() - t0


def _pass_s(trainer: TorchTrainer, steps: int = 3) -> float:
    """The forward and backward time of one step (median of ``steps``): from the step's start to the
    moment before the optimizer's update, where a pipelined checkpoint's fence waits."""
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        trainer.step(before_update=lambda: times.append(time.perf_counter() - t0))
    return statistics.median(times)


def _overheads(cfg: TorchConfig, engines, folders: dict, rounds: int) -> tuple[dict, dict, dict]:
    """Overhead per checkpoint of each engine (see the module's text): paired runs on one trainer, each pair's
    difference per checkpoint (the overhead is their median). Also the record of every checkpoint of those runs
    (:class:`~mlsysim.lab.engines.SaveRecord`: stall, back-pressure, durable), and what the model needs timed
    there: ``pass_s`` (the forward and backward), ``layout_s`` (this package's layout of the state, median of
    three), and after each pair, from the memory as the training left it, in turn the page-cache write of the
    state's size (``cache_write_s``) or DCP's staging copy of the state (``training_staging_s``,
    :func:`~mlsysim.lab.pytorch.rates.staging_once_s`; none where only one pair ran), then the write floor
    (``write_s``), each the median, and once a round what a durable write
    beside the training costs it (``write_beside_s``, :func:`_write_beside_s`, the median), and the training
    between two checkpoints, :data:`OVERHEAD_EVERY` steps of the plain runs (``interval_s``)."""
    checkpoints = (OVERHEAD_STEPS - 1) // OVERHEAD_EVERY
    trainer = TorchTrainer(cfg)
    trainer.step()                              # the optimizer's states exist from here on
    timed = {"pass_s": _pass_s(trainer), "layout_s": _layout_s(trainer.state())}
    floor = np.full(trainer.state_B, 7, dtype=np.uint8)
    scratch, writes = next(iter(folders.values())).with_name("floor-in-training.bin"), []
    caches, stagings, besides, plains = [], [], [], []
    live, diffs, saves = {}, {e: [] for e in engines}, {e: [] for e in engines}
    try:
        _open_engines(live, engines, folders, trainer.state())
        for r in range(rounds):
            for e in round_order(engines, r):
                plain = _timed_run(trainer)
                plains.append(plain)
                diffs[e].append((_timed_run(trainer, live[e], r * OVERHEAD_STEPS) - plain) / checkpoints)
                saves[e] += live[e].summary()[-checkpoints:]
                os.sync()
                if len(plains) % 2:                  # where the training left the memory: one or the other
                    caches.append(cache_write_once(scratch, floor))
                    os.sync()
                    scratch.unlink()
                else:
                    stagings.append(staging_once_s(trainer.state()))
                writes.append(write_once(scratch, floor))
                scratch.unlink()
            besides.append(_write_beside_s(trainer, scratch, floor))
    finally:
        for eng in live.values():
            eng.close()
    timed.update(write_s=statistics.median(writes), cache_write_s=statistics.median(caches),
                 write_beside_s=statistics.median(besides),
                 training_staging_s=statistics.median(stagings) if stagings else None,
                 interval_s=statistics.median(plains) * OVERHEAD_EVERY / OVERHEAD_STEPS)
    return diffs, saves, timed


def _write_beside_s(trainer: TorchTrainer, path: Path, data: np.ndarray) -> float:
    """What one durable write of ``data`` beside the training costs it, in seconds: a run of
    :data:`OVERHEAD_STEPS` steps with this package's writer (:func:`mlsysim.lab.store.write_durable`, its
    CRC-32 beside the write) started in a thread of its own as the run starts, less the plain run just
    before it; the file is removed after."""
    plain = _timed_run(trainer)
    writer = threading.Thread(target=store.write_durable, args=(path, [data]))
    writer.start()
    try:
        beside = _timed_run(trainer)
    finally:
        writer.join()
        path.unlink(missing_ok=True)
    return beside - plain


def _layout_s(state) -> float:
    """Seconds of :func:`mlsysim.lab.store.layout` of ``state`` (median of three): the walk over the
    tensors that this package's ``save`` makes before it copies."""
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        store.layout(state, 0)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _engine_run(e: str, recs, loads, resumed: bool, corruption: str, noticed: bool, pred, in_training, model):
    """One engine's :class:`EngineRun`: medians of its timed rounds beside the two predictions (the
    first, ``pred``, from :func:`mlsysim.checkpoint`; ``model``, the refined one), and
    ``in_training`` = (each pair's overhead per checkpoint, the record of each checkpoint) from the overhead runs."""
    overheads_s, saves = in_training
    never = e == "torch.save"
    return EngineRun(
        engine=e, size_B=recs[-1].size_B, stall_s=statistics.median(r.stall_s for r in recs),
        durable_s=float("nan") if never else statistics.median(r.durable_s for r in recs),
        load_s=statistics.median(loads), resumed_exactly=resumed, corruption=corruption, corruption_noticed=noticed,
        predicted_stall_s=pred.concurrent_stall_s if e in ASYNC else pred.sync_stall_s,
        predicted_durable_s=float("nan") if never else pred.copy_s + pred.write_s, predicted_load_s=pred.restore_s,
        stalls_s=tuple(r.stall_s for r in recs), durables_s=tuple(r.durable_s for r in recs), loads_s=tuple(loads),
        prune_s=_median_known(r.prune_s for r in recs), overhead_s=statistics.median(overheads_s),
        overheads_s=tuple(overheads_s), training_stall_s=statistics.median(r.stall_s for r in saves),
        training_stalls_s=tuple(r.stall_s for r in saves), training_waits_s=tuple(r.wait_s for r in saves),
        training_durables_s=tuple(r.durable_s for r in saves),
        model=model)
