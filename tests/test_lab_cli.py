"""``mlsysim lab checkpoint`` runs the experiment for real and reports measured beside predicted."""
import json
import subprocess
import sys

import pytest


def _lab(*args):
    return subprocess.run([sys.executable, "-m", "mlsysim.cli", "lab", "checkpoint", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("engine", ["sync", "concurrent", "pipelined"])
def test_lab_checkpoint_json(tmp_path, engine):
    r = _lab("--engine", engine, "--size-mb", 2, "--steps", 6, "--every", 2, "--dir", tmp_path / "ck", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["schema"] == "mlsysim.lab.checkpoint/1" and d["engine"] == engine
    assert d["checkpoints"] == 3 and len(d["stalls_s"]) == 3 and d["resumed_exactly"] is True
    assert 1.5e6 < d["size_B"] < 2.5e6 and d["stall_s"] > 0 and d["load_Bps"] > 0
    p = d["predicted"]
    assert p["write_s"] > 0 and (p["stall_s"] > 0 if engine != "pipelined" else   # the copy may hide in a step,
                                 0 <= p["stall_s"] <= p["concurrent_stall_s"])    # the back-pressure may not
    assert d["overhead_s"] == pytest.approx((d["train_s"] - d["steps"] * d["step_s"]) / d["checkpoints"])
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == [
        "ckpt-000000007.commit", "ckpt-000000007.data", "ckpt-000000009.commit", "ckpt-000000009.data"]  # 3 warm-up steps


def test_lab_checkpoint_text_and_bad_input(tmp_path):
    r = _lab("--engine", "sync", "--size-mb", 1, "--steps", 2, "--every", 1)
    assert r.returncode == 0 and "stall per checkpoint" in r.stdout and "(model " in r.stdout
    bad = _lab("--engine", "lazy", "--size-mb", 1)
    assert bad.returncode == 2 and "lazy" in bad.stderr
    assert _lab("--steps", 2, "--every", 5, "--size-mb", 1).returncode == 2
    f = tmp_path / "file"
    f.write_text("x")
    r = _lab("--size-mb", 1, "--steps", 2, "--every", 1, "--dir", f / "sub")
    assert r.returncode == 2 and "not writable" in r.stderr


def test_lab_checkpoint_refuses_a_directory_with_checkpoints(tmp_path):
    from mlsysim.lab.engines import SyncEngine
    import numpy as np
    with SyncEngine(tmp_path) as e:
        e.save(1, {"w": np.zeros(3)})
    r = _lab("--size-mb", 1, "--steps", 2, "--every", 1, "--dir", tmp_path)
    assert r.returncode == 2 and "already holds checkpoints" in r.stderr
    assert (tmp_path / "ckpt-000000001.commit").exists()
