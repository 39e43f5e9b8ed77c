"""The checkpoint lab: a real training run, real checkpoints, real kills, measured stalls.

Kept apart from the formula modules (which never import it) and loaded only on
first use (``ms.lab`` or ``import mlsysim.lab``):

* ``mlsysim.lab.train`` — a character-level MLP language model in NumPy with
  AdamW, a warm-up + cosine schedule and a per-epoch shuffling loader; its whole
  state (weights, moments, schedule, loader order and generator) is a mapping of
  arrays and scalars, from kilobytes to gigabytes (:meth:`~mlsysim.lab.train.LabConfig.for_size`).
* ``mlsysim.lab.store`` — the checkpoint files: data file with a JSON header and
  aligned arrays, CRC-32, write to a temporary name + ``fsync`` + atomic rename +
  directory ``fsync``, then a commit record written the same way (a checkpoint exists
  only once that record is durable); :func:`~mlsysim.lab.store.load_latest` returns
  the newest committed and verified checkpoint and warns, naming each file, about
  the torn, corrupt or uncommitted ones it skips.
* ``mlsysim.lab.engines`` — the sync engine (training blocked for the whole
  write) and the concurrent engine (a pool of preallocated buffers, background
  writers, back-pressure counted as stall), both keeping the newest ``keep``
  committed checkpoints; a full disk or an unwritable directory is a
  :class:`~mlsysim.lab.store.CheckpointError` and never costs the last good one.
* ``mlsysim.lab.experiment`` and ``mlsysim.lab.predict`` — the timed experiment,
  and what :func:`mlsysim.checkpoint` predicts for this machine's measured memory
  and disk bandwidth.
* ``mlsysim.lab.runner`` — a killable training process (``python -m
  mlsysim.lab.runner``) that stops at a named point so that a test can SIGKILL it there.

PyTorch is the optional extra (``pip install -e '.[torch]'``): when it is installed, the
engines also store tensors and ``state_dict()`` structures, and four modules that import it
(nothing else does) run the same questions on a PyTorch model:

* ``mlsysim.lab.torch_train`` — a small decoder-only transformer (RMSNorm, RoPE, grouped-query
  attention, SwiGLU) with AdamW, a warm-up + cosine ``LambdaLR``, a ``DataLoader`` whose
  sampler's position is state, and the torch, NumPy and Python random states;
* ``mlsysim.lab.torch_engines`` — ``torch.save`` (with and without ``fsync``), DCP ``save`` and
  ``async_save`` behind the engines' interface, each with its own loader;
* ``mlsysim.lab.floors`` (no torch) — the machine's memory-copy, write + fsync and read floors;
* ``mlsysim.lab.torch_compare`` — every engine on one state, beside the floors and the model,
  with resume and flipped-byte checks.
"""
from .train import LabConfig, Trainer, learning_rate
