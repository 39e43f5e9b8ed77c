"""Every lab command leaves the checkpoints it wrote in ``--dir`` as it wrote them.

Each command runs for real with ``--dir``; then the newest checkpoint is loaded with warnings turned
into errors (a skipped, torn or corrupt file warns) and must be the last one the run wrote. The
PyTorch comparison flips a byte of each engine's newest checkpoint to show which loaders notice: it
must flip it back. Flags a run would not use are refused, never ignored. Real processes, no mocks.
"""
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from mlsysim.lab import store
from mlsysim.lab.distributed import shards

ROOT = Path(__file__).resolve().parents[1]


def _cli(*argv, timeout=300):
    return subprocess.run([sys.executable, "-m", "mlsysim.cli", "lab", *map(str, argv)], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def test_numpy_lab_leaves_its_newest_checkpoint_intact(tmp_path):
    d = tmp_path / "ck"
    r = _cli("checkpoint", "--engine", "concurrent", "--size-mb", 2, "--steps", 6, "--every", 2, "--dir", d)
    assert r.returncode == 0, r.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("error", store.CheckpointWarning)
        got = store.load_latest(d)
    assert got.step == store.committed_steps(d)[-1]


def test_pytorch_comparison_flips_each_byte_back(tmp_path):
    pytest.importorskip("torch")
    from mlsysim.lab.pytorch.compare import engine_folder
    from mlsysim.lab.pytorch.engines import ENGINES, load_latest, newest_path
    from mlsysim.lab.pytorch.train import TorchConfig, TorchTrainer
    d = tmp_path / "ck"
    r = _cli("checkpoint", "--framework", "torch", "--compare", "--size-mb", 4, "--repeats", 1, "--dir", d, "--json")
    assert r.returncode == 0, r.stderr
    noticed = {e["engine"]: e["corruption_noticed"] for e in json.loads(r.stdout)["engines"]}
    assert noticed["sync"] and noticed["concurrent"]              # the demonstration ran
    cfg = TorchConfig.for_size(4e6)
    for kind in ENGINES:
        folder = engine_folder(d, kind)
        template = TorchTrainer(cfg).state() if kind.startswith("dcp") else None
        with warnings.catch_warnings():
            warnings.simplefilter("error", store.CheckpointWarning)
            got = load_latest(kind, folder, template=template)
        assert got.path == str(newest_path(kind, folder)), kind


def test_distributed_lab_leaves_every_shard_intact(tmp_path):
    pytest.importorskip("torch")
    r = _cli("distributed", "--nproc", 2, "--steps", 4, "--every", 2, "--dir", tmp_path, "--json")
    assert r.returncode == 0, r.stderr
    run = tmp_path / "reference"
    step = shards.global_steps(run)[-1]
    assert step == 4
    record = shards.read_global(run, step)
    for rank in range(record["world_size"]):
        store.read_checkpoint(shards.rank_dir(run, rank), step)   # raises on a torn or corrupt shard


@pytest.mark.parametrize("argv, says", [
    (["--framework", "torch", "--engine", "sync", "--steps", 12, "--every", 4], "--steps, --every do not apply"),
    (["--framework", "torch", "--compare", "--keep", 3], "--keep does not apply"),
    (["--engine", "sync", "--repeats", 2], "--repeats does not apply"),
])
def test_a_flag_the_run_would_not_use_is_refused(argv, says):
    r = _cli("checkpoint", *argv, timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and says in lines[0], r.stderr
