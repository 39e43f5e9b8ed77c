"""PyTorch's checkpointing beside this package's engines: the comparison, the floors, the CLI, and
the rule that torch stays an optional extra. Real files, real processes; nothing mocked."""
import json
import math
import statistics
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def test_import_mlsysim_and_the_lab_never_import_torch():
    code = "import sys, mlsysim, mlsysim.lab; mlsysim.lab.train; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def _without_torch(tmp_path):
    """An environment in which ``import torch`` fails, as on a machine without the extra."""
    fake = tmp_path / "notorch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError('No module named torch', name='torch')\n")
    return {**__import__("os").environ, "PYTHONPATH": str(fake.parent)}


def test_cli_without_torch_names_the_extra(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mlsysim.cli", "lab", "checkpoint", "--framework", "torch",
                        "--engine", "dcp"], capture_output=True, text=True, timeout=60, env=_without_torch(tmp_path))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install -e '.[torch]'" in lines[0] and "requirements-lab.txt" in lines[0]


def test_numpy_lab_runs_without_torch(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mlsysim.cli", "lab", "checkpoint", "--engine", "sync", "--size-mb", "1",
                        "--steps", "2", "--every", "1", "--json"], capture_output=True, text=True, timeout=120,
                       env=_without_torch(tmp_path))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["resumed_exactly"] is True


torch = pytest.importorskip("torch")

from mlsysim.lab.floors import measure_floors  # noqa: E402
from mlsysim.lab.pytorch.compare import (LOAD_ROUNDS, OVERHEAD_ROUNDS, _load_rounds, compare,  # noqa: E402
                                         engine_folder, flip_middle_byte, round_order, same_state, targets)
from mlsysim.lab.pytorch.engines import ALL_ENGINES, ENGINES  # noqa: E402
from mlsysim.lab.pytorch.train import TorchConfig  # noqa: E402
from mlsysim.lab.pytorch.model import pieces_extra_s  # noqa: E402

SMALL = TorchConfig(layers=2, d_model=64, heads=4, kv_heads=2, d_ff=96)


@pytest.fixture(scope="module")
def compare_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("compare")


@pytest.fixture(scope="module")
def small(compare_dir):
    return compare(cfg=SMALL, repeats=1, directory=compare_dir)


def test_every_engine_on_one_state(small):
    assert [r.engine for r in small.runs] == list(ALL_ENGINES) and ALL_ENGINES == ENGINES + ("pipelined",)
    assert small.size_B == SMALL.state_B + 4 * (9 * SMALL.layers + 3)   # + AdamW's step counters (fp32)
    for r in small.runs:
        assert r.resumed_exactly, r.engine
        assert r.stall_s > 0 and r.load_s > 0 and r.size_B > SMALL.state_B
        assert (r.durable_s != r.durable_s) == (r.engine == "torch.save")      # NaN only for plain torch.save
        if r.engine in ("dcp-async", "concurrent", "pipelined"):   # durable after the save returned
            assert all(d >= s for d, s in zip(r.durables_s, r.stalls_s))
        elif r.engine != "torch.save":                         # durable before it returned
            assert all(0 < d <= s for d, s in zip(r.durables_s, r.stalls_s))


def test_every_loader_loads_once_per_round_from_the_checkpoints_left_intact(small, compare_dir):
    folders = {e: engine_folder(compare_dir, e) for e in ALL_ENGINES}
    loads, reads = _load_rounds(ALL_ENGINES, folders, SMALL, 3, (compare_dir / "read-floor.bin", [1000, 5000]))
    assert set(loads) == set(ALL_ENGINES)
    assert all(len(t) == 3 and min(t) > 0 for t in loads.values())
    assert all(len(v) == 3 and min(v) > 0 for v in reads.values()) and not (compare_dir / "read-floor.bin").exists()
    assert all(len(r.loads_s) == LOAD_ROUNDS and r.load_s == statistics.median(r.loads_s) for r in small.runs)


def test_our_loaders_refuse_a_flipped_byte_and_fall_back(small):
    for e in ("sync", "concurrent"):
        r = small.run(e)
        assert r.corruption_noticed and "fell back" in r.corruption and "named the file" in r.corruption


def test_the_corruption_outcome_is_one_of_three(small):
    outcomes = {r.engine: r.corruption for r in small.runs}
    for e, text in outcomes.items():
        assert text.startswith(("refused", "loaded changed tensors", "loaded; the byte")), (e, text)


def test_json_has_a_record_per_engine_and_the_floors(small):
    d = json.loads(json.dumps(small.to_dict()))
    assert d["schema"] == "mlsysim.lab.torch-compare/1"
    assert d["copy_floor_s"] > 0 and d["write_floor_s"] > 0
    for r in d["engines"]:
        for key in ("engine", "size_B", "stall_s", "durable_s", "load_s", "resumed_exactly", "copy_floor_s",
                    "write_floor_s"):
            assert key in r
    plain = next(r for r in d["engines"] if r["engine"] == "torch.save")
    assert plain["durable_s"] is None and plain["predicted"]["durable_s"] is None   # null, not a bare NaN
    json.loads(json.dumps(small.to_dict(), allow_nan=False))
    assert [name for name, _, _ in targets(d)] == [name for name, _, _ in targets(small)]
    assert set(d["terms_s"]) == set("cfFpqWktrudLRGVDBZI") | {"W_t", "p_t", "D_t"}
    assert d["terms_s"]["B"] >= 0          # a short write beside a short run may cost it nothing measurable
    assert all(v > 0 for k, v in d["terms_s"].items() if k != "B")
    assert d["pass_s"] > 0 and d["torch_crc_Bps"] > 0 and d["alloc_copy_Bps"] > 0
    assert d["training_cache_write_s"] > 0
    assert len(d["read_rounds_s"]) == len(d["pieces_rounds_s"]) == LOAD_ROUNDS * small.repeats
    extra = pieces_extra_s(d["read_rounds_s"], d["pieces_rounds_s"])     # what each archive from its end adds
    assert d["terms_s"]["G"] == pytest.approx(d["terms_s"]["R"] + max(0.0, extra))
    assert d["terms_s"]["p_t"] == d["training_cache_write_s"]
    for r in d["engines"]:                 # the refined model beside every measured figure
        assert r["training_stall_s"] >= 0 and r["overhead_s"] == statistics.median(r["overheads_s"])
        assert len(r["training_stalls_s"]) == len(r["training_waits_s"]) == len(r["training_durables_s"]) \
            == 2 * len(r["overheads_s"]) and r["training_stall_s"] == statistics.median(r["training_stalls_s"])
        assert all(0 <= w <= st for w, st in zip(r["training_waits_s"], r["training_stalls_s"]))   # within it
        assert (r["engine"] == "torch.save") == all(x is None for x in r["training_durables_s"])
        assert len(r["overheads_s"]) == min(small.repeats, OVERHEAD_ROUNDS)     # one difference per pair of runs
        assert set(r["model"]) == {"stall_s", "durable_s", "load_s", "training_stall_s", "overhead_s"}
        assert (r["model"]["durable_s"] is None) == (r["durable_s"] is None)
    assert "median of 1" in str(small) and "<table>" in small._repr_html_()


def test_floors_are_rates_of_the_given_size(tmp_path):
    f = measure_floors(8e6, tmp_path, repeats=1)
    assert f.size_B == 8e6 and f.copy_Bps > f.write_Bps > 0
    assert f.cache_write_Bps > 0 and f.fresh_copy_Bps > 0 and f.fresh_copy_small_pages_Bps > 0 and f.crc_Bps > 0
    assert f.copy_floor_s == pytest.approx(8e6 / f.copy_Bps) and f.write_floor_s == pytest.approx(8e6 / f.write_Bps)
    assert list(tmp_path.iterdir()) == []                                   # its file is removed


def test_same_state_sees_one_flipped_bit():
    a = {"w": torch.arange(6, dtype=torch.float32), "n": {"k": (1, 2.5, None)}}
    b = {"w": a["w"].clone(), "n": {"k": (1, 2.5, None)}}
    assert same_state(a, b)
    b["w"].view(torch.int32)[3] ^= 1
    assert not same_state(a, b)
    assert not same_state(a, {"w": a["w"]})


def test_flip_middle_byte_changes_one_byte(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(bytes(100))
    flip_middle_byte(p)
    data = p.read_bytes()
    assert data[50] == 0xFF and sum(data) == 0xFF


def test_bad_input(tmp_path):
    from mlsysim.errors import MlsysimError
    with pytest.raises(MlsysimError, match="checkpoint engine"):
        compare(cfg=SMALL, engines=("torch.save", "pickle"))
    with pytest.raises(MlsysimError, match="repeats"):
        compare(cfg=SMALL, repeats=0)
    with pytest.raises(MlsysimError, match="each engine once"):
        compare(cfg=SMALL, engines=("sync", "sync"))
    (tmp_path / "sync").mkdir()
    (tmp_path / "sync" / "ckpt-000000001.commit").write_text("{}")
    with pytest.raises(MlsysimError, match="already holds files"):
        compare(cfg=SMALL, engines=("sync",), directory=tmp_path)
    assert (tmp_path / "sync" / "ckpt-000000001.commit").exists()       # nothing it did not write is deleted
    with pytest.raises(MlsysimError, match="kv_heads"):
        TorchConfig(heads=4, kv_heads=3)
    with pytest.raises(MlsysimError, match="size_B"):
        TorchConfig.for_size(0)


def test_config_counts_parameters_as_the_model_and_ms_transformer_do():
    from mlsysim.lab.pytorch.train import TinyDecoder
    for cfg in (SMALL, TorchConfig.for_size(16e6)):
        model = TinyDecoder(cfg)
        assert sum(p.numel() for p in model.parameters()) == cfg.params == int(cfg.workload().params)


def test_cli_compare_json(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mlsysim.cli", "lab", "checkpoint", "--framework", "torch",
                        "--engine", "dcp-async", "--size-mb", "4", "--repeats", "1", "--dir", str(tmp_path / "ck"),
                        "--json"], capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert [e["engine"] for e in d["engines"]] == ["dcp-async"] and d["engines"][0]["resumed_exactly"] is True
    bad = subprocess.run([sys.executable, "-m", "mlsysim.cli", "lab", "checkpoint", "--framework", "torch",
                          "--engine", "pickle"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "pickle" in bad.stderr
    numpy_compare = subprocess.run([sys.executable, "-m", "mlsysim.cli", "lab", "checkpoint", "--compare"],
                                   capture_output=True, text=True, timeout=60)
    assert numpy_compare.returncode == 2 and "--framework torch" in numpy_compare.stderr


def test_machine_facts_name_the_cpu_and_the_file_system(tmp_path):
    from mlsysim.lab.floors import machine_facts
    f = machine_facts(tmp_path)
    assert f["cores"] >= 1 and f["memory_B"] > 1e8 and f["cpu"]
    if __import__("os").path.exists("/proc/mounts"):
        assert " on " in f["file_system"]


def test_the_write_floor_is_the_fastest_write_seen(tmp_path):
    from mlsysim.lab.floors import Floors, with_write_rounds, write_once
    f = Floors(size_B=1e9, copy_Bps=10e9, write_Bps=0.5e9, read_cold_Bps=1e9, read_warm_Bps=2e9)
    assert with_write_rounds(f, [2.5, 1.6, 3.0]).write_floor_s == pytest.approx(1.6)   # a faster round wins
    assert with_write_rounds(f, [2.5, 1.6, 3.0]).to_dict()["write_rounds_s"] == [2.5, 1.6, 3.0]
    assert with_write_rounds(f, [2.5, 3.0]).write_floor_s == pytest.approx(2.0)        # a slower one does not
    assert with_write_rounds(f, []) == f
    t = write_once(tmp_path / "x.bin", bytes(3 * 2 ** 20))
    assert t > 0 and (tmp_path / "x.bin").stat().st_size == 3 * 2 ** 20


def test_the_snapshot_copy_is_timed_beside_the_floor(small):
    d = small.to_dict()
    per_parameter = 4 * (9 * SMALL.layers + 3)       # weight, AdamW's step, m and v of each parameter tensor
    assert d["snapshot_copy_s"] > 0 and d["tensors"] == per_parameter + 2   # + torch's and NumPy's random states
    assert d["staging_copy_s"] > 0 and d["terms_s"]["D"] == d["staging_copy_s"]   # DCP's staging, as its stager
    assert d["training_staging_s"] > 0 and d["terms_s"]["D_t"] == d["training_staging_s"]   # and in training
    async_model = next(r for r in d["engines"] if r["engine"] == "dcp-async")["model"]
    assert async_model["training_stall_s"] >= d["training_staging_s"]                # D_t, and any wait
    assert math.isfinite(d["write_beside_s"]) and d["terms_s"]["B"] == max(0.0, d["write_beside_s"])
    assert d["deserialize_s"] > 0 and d["terms_s"]["Z"] == d["deserialize_s"]     # DCP's pieces from memory
    # the training between two checkpoints, two steps (not compared with pass_s: both are a few milliseconds here,
    # and a busy machine can time one pass longer than the median of two steps)
    assert d["interval_s"] > 0 and d["pass_s"] > 0 and d["terms_s"]["I"] == d["interval_s"]
    dcp = next(r for r in d["engines"] if r["engine"] == "dcp")
    t = d["terms_s"]
    assert dcp["model"]["load_s"] == pytest.approx(t["G"] + max(0.0, t["Z"] - t["c"]) + t["d"])


def test_the_pipelined_engine_in_the_comparison_resumes_and_refuses_a_flipped_byte(tmp_path):
    """Asked for by name, it runs the comparison's protocol; with no training between the saves its
    copy hides behind nothing, and its stall is a copy, as the concurrent engine's is."""
    c = compare(cfg=SMALL, engines=("concurrent", "pipelined"), repeats=1, directory=tmp_path)
    conc, pipe = c.run("concurrent"), c.run("pipelined")
    assert pipe.resumed_exactly and pipe.corruption_noticed and pipe.durable_s > 0 and pipe.stall_s > 0
    # each save's time to durable runs from the same call as its stall (a loaded machine may return
    # from save only after the commit, so the medians of a few rounds need not be ordered)
    assert all(rec_d > 0 and rec_s > 0 for rec_d, rec_s in zip(pipe.durables_s, pipe.stalls_s))
    assert pipe.predicted_stall_s == conc.predicted_stall_s
    # in training its copy hides behind the next pass: the model's stall there is the layout planned
    # before the copy starts, and the part of the copy the pass cannot hide
    assert pipe.model["training_stall_s"] == c.layout_s + max(0.0, c.snapshot_copy_s - c.pass_s)
    assert c.terms_s["d"] == c.snapshot_copy_s and c.terms_s["L"] == c.layout_s and c.terms_s["W_t"] == c.training_write_s


@pytest.mark.parametrize("kind", ["torch.save+fsync", "dcp", "sync", "concurrent"])
def test_pruning_is_outside_the_stall_and_the_time_to_durable(kind, tmp_path, monkeypatch):
    """One protocol for every engine: pruning (here made to take 1 s by a real pause before the real
    deletion, longer than any save of this small state takes on a loaded machine) runs after save
    returns and after the commit, and is timed on its own."""
    pytest.importorskip("torch")
    import time
    from mlsysim.lab import store
    from mlsysim.lab.pytorch import engines as te
    from mlsysim.lab.pytorch.train import TorchConfig, TorchTrainer
    pause = 1.0
    real_prune = store.prune
    monkeypatch.setattr(store, "prune", lambda d, keep: (time.sleep(pause), real_prune(d, keep))[1])
    for cls in (te.TorchSaveEngine, te.DcpEngine):
        real = cls._remove_old
        monkeypatch.setattr(cls, "_remove_old", lambda self, real=real: (time.sleep(pause), real(self))[1])
    state = TorchTrainer(TorchConfig(layers=1, d_model=32, heads=2, kv_heads=1, d_ff=48, context=8,
                                     batch=2)).state()
    eng = te.make(kind, tmp_path / "ckpt", keep=1)
    try:
        for step in (1, 2, 3):
            eng.save(step, state)
            eng.wait()
        recs = eng.summary()
    finally:
        eng.close()
    for r in recs:
        assert r.stall_s < pause and r.durable_s < pause, r
        assert r.prune_s >= pause, r
    assert [p.name for p in (tmp_path / "ckpt").iterdir() if "3" in p.name]


def test_every_round_orders_the_engines_anew():
    orders = [round_order(ALL_ENGINES, k) for k in range(1, 8)]       # seven rounds, after the warm-up
    assert all(sorted(o) == sorted(ALL_ENGINES) for o in orders)
    assert len({o[0] for o in orders}) == 7 and len({o[-1] for o in orders}) >= 6
    for e in ALL_ENGINES:                                             # none always after the same one
        before = {o[o.index(e) - 1] for o in orders if o.index(e) > 0}
        assert len(before) >= 3, (e, before)
    assert round_order(("sync",), 3) == ("sync",) and round_order(("a", "b"), 1) == ("b", "a")


def test_every_save_starts_from_the_same_memory_state(tmp_path):
    from mlsysim.lab.pytorch.rates import PREPARED_FILES, prepare_memory
    data = np.full(3 << 20, 7, dtype=np.uint8)
    (tmp_path / "keep.bin").write_bytes(b"x")
    prepare_memory(tmp_path, data)                      # files written, flushed and deleted, nothing else touched
    assert PREPARED_FILES >= 2 and sorted(p.name for p in tmp_path.iterdir()) == ["keep.bin"]


def test_the_cold_read_tensor_by_tensor_reads_every_piece(tmp_path):
    from mlsysim.errors import MlsysimError
    from mlsysim.lab.pytorch.rates import cold_read_s
    data = np.arange(3 << 20, dtype=np.uint32).view(np.uint8)
    (tmp_path / "f.bin").write_bytes(data.tobytes())
    buf = np.zeros_like(data)
    sizes = [1000, data.nbytes - 1010, 10]
    assert cold_read_s(tmp_path / "f.bin", buf, sizes, tail_first=True) > 0 and np.array_equal(buf, data)
    buf[:] = 0
    assert cold_read_s(tmp_path / "f.bin", buf, sizes) > 0 and np.array_equal(buf, data)
    for bad in ([1000, 0], [], [data.nbytes + 1]):
        with pytest.raises(MlsysimError, match="sizes must be tensor sizes"):
            cold_read_s(tmp_path / "f.bin", buf, bad)
