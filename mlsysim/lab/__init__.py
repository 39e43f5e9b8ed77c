"""The checkpoint lab: a real training run, real checkpoints, real kills, measured stalls.

Kept apart from the formula modules (which never import it) and loaded only on
``import mlsysim.lab``: a small NumPy training loop (:mod:`~mlsysim.lab.train`),
a checkpoint file format with checksums and commit records
(:mod:`~mlsysim.lab.store`), a synchronous and a concurrent checkpoint engine
(:mod:`~mlsysim.lab.engines`), and the experiment that times them against
:func:`mlsysim.checkpoint` (:mod:`~mlsysim.lab.experiment`).
"""
from .train import LabConfig, Trainer, learning_rate
