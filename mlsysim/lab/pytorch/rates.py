"""This machine's rates that the PyTorch comparison's model needs, each timed on its own (needs torch).

The floors (:func:`mlsysim.lab.floors.measure_floors`) time a copy, a write and a read of one buffer. The
engines do more, and each extra step is timed here the way the floors are: this package's snapshot into
a ready buffer, the copy into new tensors, DCP ``async_save``'s staging copy, ``torch.load`` of the state
piece by piece, ``torch.save``'s own CRC-32, and the cold read tensor by tensor. Each timing that a save
would start from the same memory state (:func:`prepare_memory`) starts from it; each is a median (the
CRC-32 a best of), as the comparison's figures are. :mod:`mlsysim.lab.pytorch.model` names each term.
"""
from __future__ import annotations

import io
import math
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from ...errors import MlsysimError
from ...measure import drop_page_cache
from .. import store
from ..floors import cache_write_once

PREPARED_FILES = 2                      # files of the state's size freed before each save: DCP's async_save
                                        # takes new memory twice (its staging copy, then the page cache)


def flat(obj, prefix=""):
    """(dotted key path, value) of every leaf of a nested state of dicts, lists and tuples."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from flat(v, f"{prefix}{k}.")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from flat(v, f"{prefix}{i}.")
    else:
        yield prefix, obj


def snapshot_copy(state, repeats: int, directory: Path) -> tuple[float, int]:
    """Seconds to copy ``state`` into a buffer allocated and touched beforehand, as the concurrent
    engine's ``save`` does, and the number of tensors copied: the copy floor moves one contiguous
    buffer, the snapshot one tensor after another. Timed as the rounds time a save: into two buffers
    in turn, as the engine keeps them, each copy from the memory state every timed save starts from
    (:func:`prepare_memory`, in ``directory``); the median of ``repeats``, as the stalls are medians."""
    lay = store.layout(state, 0)
    buffers = [np.empty(lay.size_B, dtype=np.uint8) for _ in range(2)]
    for b in buffers:
        b.fill(0)
    data, times = np.full(lay.size_B, 7, dtype=np.uint8), []
    for i in range(repeats):
        prepare_memory(directory, data)
        t0 = time.perf_counter()
        store.fill(buffers[i % 2], lay)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), len(lay.arrays)


def alloc_copy_Bps(state, repeats: int) -> float:
    """Bytes per second of copying ``state``'s tensors into new tensors (``torch.empty_like``) while the
    previous such copy is still held, as one load follows another (the loader's result lives until the
    next load has returned): what PyTorch's allocator hands back is memory an earlier copy freed.
    The median of ``repeats`` (at least two) after one untimed copy, as the loads are medians."""
    tensors = [v for _, v in flat(state) if isinstance(v, torch.Tensor)]
    size = sum(t.numel() * t.element_size() for t in tensors)
    held, times = [torch.empty_like(t).copy_(t) for t in tensors], []
    for _ in range(max(repeats, 2)):
        t0 = time.perf_counter()
        new = [torch.empty_like(t).copy_(t) for t in tensors]
        times.append(time.perf_counter() - t0)
        held = new
    del held
    typical = statistics.median(times)
    return size / typical if typical > 0 else float("nan")


def deserialize_s(state, repeats: int) -> float:
    """Seconds for ``torch.load`` to deserialize ``state`` piece by piece from memory, as DCP's loader does
    from its files: each tensor saved beforehand (untimed) into an archive of its own (``torch.save`` into a
    ``BytesIO``, as DCP writes each tensor), then loaded one after another (``weights_only``, onto the CPU),
    each result held until the next has returned, as the loader's loop holds its last piece. What this
    adds to a copy is the allocator's new storage per piece and ``torch.load``'s own work per record. The
    median of ``repeats`` (at least two) after one untimed pass."""
    archives = []
    for _, v in flat(state):
        if isinstance(v, torch.Tensor) and v.numel():
            buf = io.BytesIO()
            torch.save(v, buf)
            archives.append(buf.getvalue())

    def load_all() -> None:
        piece = None
        for raw in archives:
            piece = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
        del piece

    load_all()
    times = []
    for _ in range(max(repeats, 2)):
        t0 = time.perf_counter()
        load_all()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def staging_copy_s(state, repeats: int, directory: Path) -> float:
    """Seconds to stage ``state`` as DCP's ``async_save`` does with its default stager: each tensor's
    storage copied into a new one that PyTorch's allocator makes just before (``UntypedStorage(n)``,
    then ``copy_``; ``torch.distributed.checkpoint._state_dict_stager``), the previous staging freed
    first, as a checkpoint's is once its upload is done. Each timing starts from the memory state
    every timed save starts from (:func:`prepare_memory`, in ``directory``); the median of ``repeats``
    after one untimed staging."""
    storages = _storages(state)
    data = np.full(sum(x.nbytes() for x in storages), 7, dtype=np.uint8)
    staged, times = _stage(storages), []
    for _ in range(repeats):
        staged = None                       # the previous staging freed, then the prepared state
        prepare_memory(directory, data)
        t0 = time.perf_counter()
        staged = _stage(storages)
        times.append(time.perf_counter() - t0)
    del staged
    return statistics.median(times)


def staging_once_s(state) -> float:
    """Seconds of one staging of ``state`` as :func:`staging_copy_s` times it, but from the memory as it is,
    unprepared: the comparison's overhead runs time it after a pair of runs, from the memory as the training
    left it, as ``async_save`` stages in training. The staged copy is freed before this returns."""
    storages = _storages(state)
    t0 = time.perf_counter()
    staged = _stage(storages)
    took = time.perf_counter() - t0
    del staged
    return took


def _storages(state) -> list:
    return list({id(v.untyped_storage()): v.untyped_storage() for _, v in flat(state)
                 if isinstance(v, torch.Tensor)}.values())


def _stage(storages) -> list:
    return [torch.UntypedStorage(x.nbytes()).copy_(x) for x in storages]


def prepare_memory(directory: Path, data: np.ndarray) -> None:
    """The memory state every timed save starts from: :data:`PREPARED_FILES` files of ``data`` written
    into the page cache in ``directory``, flushed (``os.sync``) and deleted, so that what the save takes
    first is a page cache's worth of memory freed a moment before, whichever engine went before it."""
    paths = [directory / f"prepare-{i}.bin" for i in range(PREPARED_FILES)]
    try:
        for path in paths:
            cache_write_once(path, data)
        os.sync()
    finally:
        for path in paths:
            path.unlink(missing_ok=True)


def tensor_sizes(state) -> list[int]:
    return [v.numel() * v.element_size() for _, v in flat(state) if isinstance(v, torch.Tensor)]


def cold_read_s(path: Path, buf: np.ndarray, sizes: list[int], tail_first: bool = False,
                tail_B: int = 4096) -> float:
    """Seconds to read ``path`` into ``buf`` (touched beforehand) tensor by tensor, one read per size in
    ``sizes``, with its pages dropped from the page cache first: front to back, as ``torch.load`` reads
    a file's records and this package's loader its arrays, or with ``tail_first`` as DCP's loader reads,
    which stores each tensor as an archive of its own (``torch.save``) whose directory lies at its end,
    so each piece is read from its last ``tail_B`` bytes first, then from its start. A sequential read
    lets the kernel read ahead of the reader; these jumps back restart it at every tensor."""
    sizes = list(sizes)
    if not sizes or min(sizes) < 1 or sum(sizes) > buf.nbytes:
        raise MlsysimError(f"sizes must be tensor sizes of at least 1 B that fit the buffer, "
                           f"got {len(sizes)} sizes")
    view = memoryview(buf)
    drop_page_cache(path)
    with open(path, "rb", buffering=0) as f:
        t0, at = time.perf_counter(), 0
        for n in sizes:
            if tail_first:
                os.pread(f.fileno(), min(tail_B, n), at + n - min(tail_B, n))
            f.seek(at)
            f.readinto(view[at:at + n])
            at += n
        return time.perf_counter() - t0


def torch_crc_Bps(repeats: int, size_B: int = 64 * 2 ** 20) -> float:
    """The rate of the CRC-32 that ``torch.save``'s zip writer computes over every record: ``torch.save``
    of one ``size_B`` tensor into memory with the check on, less the same with it off (each the best
    of ``repeats``, at least five, the two taken in turn so that the machine's other work falls on
    both alike). NaN where this torch has no such switch (``torch.utils.serialization.config``, 2.6+)
    or the two cannot be told apart."""
    try:
        from torch.utils.serialization import config
    except ImportError:
        return float("nan")
    tensor = torch.ones(size_B, dtype=torch.uint8)
    times, before = {True: math.inf, False: math.inf}, config.save.compute_crc32
    try:
        for _ in range(max(repeats, 5)):
            for crc in (True, False):
                config.save.compute_crc32 = crc
                times[crc] = min(times[crc], _save_to_memory_s(tensor))
    finally:
        config.save.compute_crc32 = before
    extra = times[True] - times[False]
    return size_B / extra if extra > 0 else float("nan")


def _save_to_memory_s(state) -> float:
    buf = io.BytesIO()
    t0 = time.perf_counter()
    torch.save(state, buf)
    return time.perf_counter() - t0
