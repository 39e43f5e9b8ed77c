"""What the distributed lab accepts: its engines, modes and kills, and the refusals that name the input
and its limit (no PyTorch; :mod:`mlsysim.lab.distributed.launcher` and the command line use them)."""
from __future__ import annotations

from ...errors import MlsysimError

ENGINES = ("sync", "concurrent", "dcp", "dcp-async")
MODES, KILLS = ("fsdp", "ddp"), ("rank", "random", "node")
#: the checkpoints a job keeps unless told otherwise (``launcher.launch``'s and the worker's ``keep``)
KEEP = 2


def check_world(nproc: int, batch: int = 8) -> None:
    """The state and the batch must split over ``nproc`` ranks: ``batch % nproc == 0``."""
    if type(nproc) is not int or nproc < 1:
        raise MlsysimError(f"nproc must be a positive integer, got {nproc!r}")
    if batch % nproc:
        raise MlsysimError(f"a world size of {nproc} cannot split the global batch of {batch} windows evenly "
                           f"(use a divisor of {batch})")


def check_nodes(nodes) -> None:
    """Torchrun agents on this machine: 1 or 2."""
    if type(nodes) is not int or nodes not in (1, 2):
        raise MlsysimError(f"nodes must be 1 or 2 (torchrun agents on this machine), got {nodes!r}")


def check_probe_terms(probe_terms) -> None:
    """The times a training job times its own terms at its end: a whole number, 0 for none."""
    if type(probe_terms) is not int or probe_terms < 0:
        raise MlsysimError(f"probe_terms must be an integer >= 0 (times the job times its terms), got {probe_terms!r}")


def check_kill(kill, nodes: int, engine: str, replace: bool) -> None:
    """``kill`` one of :data:`KILLS` or a list of pauses; a node loss needs two nodes and this package's engines
    (their memory tiers); ``replace=False`` applies to a node loss only."""
    if kill is not None and not isinstance(kill, (list, tuple)) and kill not in KILLS:
        raise MlsysimError(f"kill must be one of {', '.join(KILLS)}, a list of POINT@STEP:RANK or None, got {kill!r}")
    if kill == "node" and nodes != 2:
        raise MlsysimError("kill='node' needs nodes=2: the lost node's shards come back from its peer's memory")
    if kill == "node" and engine not in ("sync", "concurrent"):
        raise MlsysimError(f"kill='node' needs this package's engines (sync, concurrent) and their memory tiers, "
                           f"got engine={engine!r}")
    if not replace and kill != "node":
        raise MlsysimError("replace=False (continue on the nodes left) applies to kill='node' only")
