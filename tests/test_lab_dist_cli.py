"""``mlsysim lab distributed``: its bad input (one line, exit 2, before anything starts) and one real
run through the command line (torchrun, a rank SIGKILLed, the JSON record). Real processes."""
import json
import subprocess
import sys

import pytest

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def _cli(*argv, env=None, timeout=60):
    return subprocess.run([sys.executable, "-m", "mlsysim.cli", "lab", "distributed", *argv], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=env)


@pytest.mark.parametrize("argv, says", [
    (["--nproc", "3"], "world size of 3 cannot split the global batch of 8"),
    (["--nproc", "2", "--nodes", "3"], "--nodes must be 1 or 2"),
    (["--nproc", "2", "--kill", "node"], "--kill node needs --nodes 2"),
    (["--kill", "disk"], "--kill"),
    (["--engine", "torch.save"], "distributed checkpoint engine"),
    (["--mode", "zero"], "data-parallel mode"),
    (["--reshard-to", "5"], "world size of 5"),
    (["--steps", "0"], "--steps must be a positive integer"),
    (["--plain-steps", "1"], "--plain-steps must be 0 or from 2 to --steps - 1 (7), got 1"),
    (["--plain-steps", "8"], "--plain-steps must be 0 or from 2 to --steps - 1 (7), got 8"),
    (["--plain-steps", "2", "--kill", "rank"], "--plain-steps measures the overhead on an uninterrupted run"),
    (["--plain-steps", "2", "--reshard-to", "2"], "cannot go with --kill or --reshard-to"),
    (["--refined", "--engine", "sync", "--plain-steps", "2"], "predicts the engines concurrent, dcp-async, got 'sync'"),
    (["--refined"], "the refined model needs steps without checkpoints (plain_steps)"),
    (["--refined", "--plain-steps", "2", "--nproc", "1", "--nodes", "2"], "a job on one node, got 2 nodes"),
])
def test_bad_input_is_one_line_and_exit_2(argv, says):
    r = _cli(*argv)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], r.stderr


def test_without_torch_names_the_extra(tmp_path):
    fake = tmp_path / "notorch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError('No module named torch', name='torch')\n")
    env = {**__import__("os").environ, "PYTHONPATH": str(fake.parent)}
    r = _cli("--nproc", "2", env=env)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install -e '.[torch]'" in lines[0]


def test_a_directory_of_someone_elses_files_is_refused_and_left_alone(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "reference").mkdir()
    mine = tmp_path / "reference" / "notes.txt"
    mine.write_text("not a checkpoint")
    r = _cli("--nproc", "2", "--dir", str(tmp_path))
    assert r.returncode == 2 and "holds files this lab did not write" in r.stderr
    assert mine.read_text() == "not a checkpoint"


def test_a_node_lost_through_the_command_line(tmp_path):
    """Two agents of one rank each, node 1 killed with its memory tier: the JSON record says the
    job resumed exactly from the peer's copy, with nothing read from storage."""
    pytest.importorskip("torch")
    r = _cli("--nproc", "1", "--nodes", "2", "--kill", "node", "--steps", "6", "--dir", str(tmp_path), "--json",
             timeout=240)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["engine"] == "concurrent" and d["world_size"] == 2 and d["nodes"] == 2
    assert d["resumed_from"] == [2, 4] and d["resumed_exactly"] is True and d["reshard_equal"] is None
    assert d["sources"] == ["peer-memory", "storage"] and d["recovered_from"] == "peer-memory"
    assert d["storage_bytes_read_per_rank"] == [0, 0]
    assert d["recovery_s"] > 0 and d["peer_bytes_per_rank"][1] > 0 and all(b > 0 for b in d["bytes_read_per_rank"])
    assert d["stall_s"] > 0 and d["durable_s"] >= d["stall_s"]
    p = d["prediction"]
    assert p["world"] == 2 and 0 < p["concurrent_stall_s"] <= p["durable_s"] and p["restore_s"] > 0
    assert p["rank_B"] < d["bytes_read_per_rank"][0] < 1.5 * p["rank_B"]    # the shard read back, with its header
    # every figure measured has the first model's beside it: the memory tiers' save, both recoveries
    assert d["memory_stall_s"] > 0 and d["memory_s"] > 0 and d["recovery_storage_s"] > 0
    assert p["memory_stall_s"] == p["copy_s"] and 0 < p["recovery_s"] and 0 < p["recovery_storage_s"]
    # one rank per node: the shard sent over the link (rank_B / link) is in both the save and the peer's recovery
    assert p["memory_s"] == pytest.approx(2 * p["copy_s"] + (p["recovery_s"] - p["copy_s"]))
    # each loss's downtime beside its prediction: the teardown and the job's own start, measured, + the recovery
    assert len(p["downtime_s"]) == len(d["downtime_s"]) == 2 and d["start_s"] > 0
    assert p["downtime_s"] == pytest.approx([e + d["start_s"] + x for e, x in
                                             zip(d["teardown_s"], (p["recovery_s"], p["recovery_storage_s"]))])
    assert not __import__("os").path.exists(d["memory_root"])             # the memory tiers removed


@pytest.mark.parametrize("value, live", [(None, True), ("1", True), ("0", False)])
def test_the_notebook_switch_for_live_runs(monkeypatch, value, live):
    """MLSYSIM_LAB_LIVE=0 turns the notebook's live jobs off and says so; anything else leaves them on."""
    pytest.importorskip("torch")
    from mlsysim.lab.distributed.launcher import LIVE_ENV, live_runs
    if value is None:
        monkeypatch.delenv(LIVE_ENV, raising=False)
    else:
        monkeypatch.setenv(LIVE_ENV, value)
    assert live_runs() == ((True, "") if live else (False, "MLSYSIM_LAB_LIVE=0"))


def test_the_overhead_per_checkpoint_through_the_command_line():
    """Four plain steps, then a checkpoint every 2 of the next 8: the three checkpoints with a full interval
    after them each cost the training some time, their mean is the overhead, and the first model's
    prediction beside it is the background engine's stall."""
    pytest.importorskip("torch")
    r = _cli("--nproc", "2", "--steps", "12", "--every", "2", "--plain-steps", "4", "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["plain_steps"] == 4 and d["plain_step_s"] > 0 and len(d["stalls_s"]) == 4 and len(d["overheads_s"]) == 3
    assert d["overhead_s"] == pytest.approx(sum(d["overheads_s"]) / 3) and d["overhead_cpu_s"] is not None
    p = d["prediction"]
    assert p["overhead_s"] == p["concurrent_stall_s"] < p["sync_stall_s"]


def test_the_refined_model_beside_a_run_through_the_command_line(tmp_path):
    """--refined: the job checkpoints to storage only (no memory tier), then a restore job times gloo and the
    engines' fixed costs and the rest of the terms are measured; the refined figures stand beside the
    measured ones for the same state, with the terms that made them."""
    pytest.importorskip("torch")
    r = _cli("--engine", "concurrent", "--plain-steps", "4", "--steps", "12", "--every", "4", "--refined", "--json",
             "--dir", str(tmp_path), timeout=400)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    p = d["prediction"]
    assert d["memory_s"] is None and d["overhead_s"] is not None           # storage only, the overhead measured
    ends = d["step_ends_s"]                     # rank 0's step ends, kept: another cycle can be taken from them
    assert len(ends) == 12 and ends[0] == 0 and all(b > a for a, b in zip(ends, ends[1:]))
    assert p["refined_state_B"] == p["size_B"]                             # the restore job's state is the run's
    assert 0 < p["refined_stall_s"] < p["refined_durable_s"] and p["refined_overhead_s"] > 0
    t = p["refined_terms"]
    assert t["world"] == 2 and 0 < t["busy_share"] and t["churn_Bps"] > 0 and t["torch_crc_Bps"] > 0
    # the copies timed in pieces of rank 0's largest tensor (its FSDP shard's), less than the rank's bytes
    assert 0 < t["copy_piece_B"] < p["size_B"] / 2
    # the fixed time to durable, timed beside the training's steps, stands for 2 z + l
    assert t["own_durable_beside_s"] >= t["own_stall_s"] and p["refined_durable_s"] >= t["own_durable_beside_s"] - \
        t["own_stall_s"]
