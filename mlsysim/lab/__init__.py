"""The labs: real runs beside the models. This package is their shared core: a real training run
in NumPy, real checkpoints, real kills, measured stalls (notebook ``06a_lab_checkpoint``).

Kept apart from the formula modules (which never import it) and loaded only on
first use (``ms.lab`` or ``import mlsysim.lab``):

* ``mlsysim.lab.train`` — a character-level MLP language model in NumPy with
  AdamW, a warm-up + cosine schedule and a per-epoch shuffling loader; its whole
  state (weights, moments, schedule, loader order and generator) is a mapping of
  arrays and scalars, from kilobytes to gigabytes (:meth:`~mlsysim.lab.train.LabConfig.for_size`).
* ``mlsysim.lab.store`` — the checkpoint files: data file with a JSON header and
  aligned arrays, CRC-32 (:mod:`mlsysim.lab.checksum`), write to a temporary name +
  ``fsync`` + atomic rename + directory ``fsync``, then a commit record written the
  same way (a checkpoint exists only once that record is durable); :func:`~mlsysim.lab.store.load_latest` returns
  the newest committed and verified checkpoint and warns, naming each file, about
  the torn, corrupt or uncommitted ones it skips.
* ``mlsysim.lab.engines`` — the sync engine (training blocked for the whole
  write), the concurrent engine (a pool of preallocated buffers, background
  writers, back-pressure counted as stall) and the pipelined engine (the copy itself
  in the background, beside the next forward and backward pass), all keeping the
  newest ``keep`` committed checkpoints; a full disk or an unwritable directory is a
  :class:`~mlsysim.lab.store.CheckpointError` and never costs the last good one.
* ``mlsysim.lab.experiment`` and ``mlsysim.lab.predict`` — the timed experiment,
  and what :func:`mlsysim.checkpoint` predicts for this machine's measured memory
  and disk bandwidth.
* ``mlsysim.lab.runner`` — a killable training process (``python -m
  mlsysim.lab.runner``) that stops at a named point so that a test can SIGKILL it there.
* ``mlsysim.lab.floors`` — the machine's memory-copy, write + fsync and read floors that every
  engine is measured against.
* ``mlsysim.lab.reporting`` — when the host of a virtual machine takes back the memory its guest frees
  (Linux's free page reporting), and what a touch of new memory costs some seconds after a free.

Two rooms build on this shared core, each a package of its own that ``import mlsysim.lab``
does not load:

* :mod:`mlsysim.lab.pytorch` — the same questions on a PyTorch transformer, with ``torch.save`` and
  DCP as baselines (PyTorch, the optional extra: ``pip install -e '.[torch]'``);
* :mod:`mlsysim.lab.distributed` — a ``torchrun`` job: shards, a global commit, rank and node loss,
  reshard, memory, peer and durable tiers.

Imports go one way only: core <- pytorch <- distributed; the formula modules of ``mlsysim``
never import the lab, and neither ``import mlsysim`` nor ``import mlsysim.lab`` loads PyTorch.
"""
from .train import LabConfig, Trainer, learning_rate
