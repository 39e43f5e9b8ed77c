"""The mlsysim command: instant help, one subcommand per task, clear errors, JSON output."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mlsysim import cli
from mlsysim.assign import read

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("matplotlib", "ipywidgets", "nbformat", "nbclient", "IPython", "torch")


def test_help_imports_nothing_heavy():
    """What keeps --help fast: none of the heavy libraries loads (benchmarks/run.py times it)."""
    code = ("import sys, time; t = time.perf_counter(); from mlsysim import cli\n"
            "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
            f"print('LOADED', [m for m in {HEAVY!r} if m in sys.modules], time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "usage: mlsysim" in out and "assign" in out
    loaded = out.split("LOADED ")[1]
    assert loaded.startswith("[]"), f"--help imported {loaded}"


def test_no_command_prints_help_and_fails(capsys):
    assert cli.main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


def test_version(capsys):
    import mlsysim
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == mlsysim.__version__


def test_assign_writes_student_copies(tmp_path, capsys):
    out = tmp_path / "student"
    assert cli.main(["assign", str(ROOT / "notebooks"), "--out", str(out)]) == 0
    lines = capsys.readouterr().out.strip().split("\n")
    written = sorted(out.glob("*.ipynb"))
    assert len(lines) == len(written) == len(list((ROOT / "notebooks").glob("*.ipynb")))
    assert all("replaced by stubs" in line for line in lines)
    assert all("BEGIN SOLUTION" not in json.dumps(read(p)) for p in written)


def test_assign_nbgrader_mode(tmp_path, capsys):
    nb = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))[0]
    assert cli.main(["assign", str(nb), "--out", str(tmp_path), "--nbgrader"]) == 0
    assert "marked for nbgrader" in capsys.readouterr().out
    cells = read(tmp_path / nb.name)["cells"]
    assert any(c["metadata"].get("nbgrader", {}).get("grade") for c in cells)


def test_package_errors_are_one_line_with_status_2(tmp_path, capsys):
    assert cli.main(["assign", str(tmp_path / "missing.ipynb"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mlsysim assign: error:") and "missing.ipynb" in err and err.count("\n") == 1


def test_console_script_is_declared():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'mlsysim = "mlsysim.cli:main"' in text


def test_emit_prints_text_or_json(capsys):
    @dataclasses.dataclass(frozen=True)
    class R:
        time_s: float
        sweep: np.ndarray
        bound: str

        def __str__(self):
            return f"time {self.time_s} s"

    r = R(0.5, np.array([1.0, 2.0]), "memory")
    cli.emit(r, cli.argparse.Namespace(json=False))
    assert capsys.readouterr().out == "time 0.5 s\n"
    cli.emit(r, cli.argparse.Namespace(json=True))
    assert json.loads(capsys.readouterr().out) == {"time_s": 0.5, "sweep": [1.0, 2.0], "bound": "memory"}


def test_score_counts_correct_exercises(tmp_path, capsys):
    nb = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))[0]
    assert cli.main(["score", str(nb)]) == 0
    out = capsys.readouterr().out
    import mlsysim
    n = len(mlsysim.exercises.ids(nb.name[:2]))
    assert f"{n} / {n} correct" in out
    assert cli.main(["assign", str(nb), "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert cli.main(["score", "--json", str(tmp_path / nb.name)]) == 0
    marks = json.loads(capsys.readouterr().out)[str(tmp_path / nb.name)]
    assert len(marks) == n and not any(marks.values())  # a fresh student copy has no outputs


# --- the solver commands, run as a user runs them (a subprocess) ------------------------------------

EXAMPLE = ROOT / "examples" / "llama3_70b_audit.yaml"


def _mlsysim(*args):
    return subprocess.run([sys.executable, "-m", "mlsysim.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT)


def test_help_lists_every_command():
    r = _mlsysim("--help")
    assert r.returncode == 0
    for name in ("zoo", "roofline", "serve", "train", "checkpoint", "audit", "assign", "score", "lab"):
        assert f"    {name}" in r.stdout


def test_audit_of_the_example_scenario_as_json():
    r = _mlsysim("audit", EXAMPLE, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["schema"] == "mlsysim.audit/1" and d["feasible"] and d["model"] == "Llama-3-70B"
    assert d["accelerators"] == 512 and all(c["passed"] for c in d["expect"])
    assert {c["metric"] for c in d["expect"]} == {"mfu", "days", "goodput"}
    assert d["metrics"]["wall_s"] == d["waterfall_s"]["wall_s"]
    import mlsysim as ms
    assert d["metrics"]["days"] == ms.audit_scenario(EXAMPLE).days


def test_audit_text_and_options_override_the_scenario():
    r = _mlsysim("audit", EXAMPLE, "--grid", "quebec", "--nodes", "128")
    assert r.returncode == 0, r.stderr
    assert "Walls by domain" in r.stdout and "Quebec grid" in r.stdout and "1,024 × H100-SXM" in r.stdout
    r = _mlsysim("audit", "--model", "llama-3-8b", "--cluster", "dgx-h100", "--nodes", "8", "--tokens", "0.2T",
                 "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["tokens"] == 0.2e12


def test_failed_assertion_exits_1_with_a_message(tmp_path):
    f = tmp_path / "tight.yaml"
    f.write_text(EXAMPLE.read_text().replace("days: {max: 90}", "days: {max: 5}"))
    r = _mlsysim("audit", f)
    assert r.returncode == 1
    assert "expectation failed: days =" in r.stderr and "breaks days <= 5" in r.stderr
    assert "Traceback" not in r.stderr


def test_infeasible_exits_3_with_reason_and_fix():
    r = _mlsysim("audit", "--model", "llama-3-70b", "--cluster", "dgx-h100", "--nodes", "1", "--json")
    assert r.returncode == 3 and "Traceback" not in r.stderr
    assert r.stderr.startswith("mlsysim audit: infeasible: No layout") and "Suggested fix" in r.stderr
    d = json.loads(r.stdout)
    assert d["feasible"] is False and "80 GB" in d["reason"] and "nodes" in d["fix"]
    r = _mlsysim("roofline", "llama-3-70b", "h100", "--phase", "training", "--seq-len", "4096")
    assert r.returncode == 3 and "Traceback" not in r.stderr


@pytest.mark.parametrize("args", [
    ("audit", "missing.yaml"), ("audit",), ("audit", "--model", "gpt-9", "--cluster", "dgx-h100"),
    ("roofline", "llama-3-8b", "h1000"), ("serve", "llama-3-8b", "h100", "--batch", "-1"),
    ("train", "llama-3-70b", "dgx-h100", "--tp", "four"), ("checkpoint", "llama-3-70b", "dgx-h100",
                                                            "--strategy", "fast"),
    ("zoo", "planets"),
])
def test_bad_input_exits_2_without_a_traceback(args):
    r = _mlsysim(*args)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.strip()


def test_bad_scenario_value_is_one_line(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("model: llama-3-70b\ncluster: dgx-h100\nglobal_batch: many\n")
    r = _mlsysim("audit", f)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1


def test_zoo_lists_with_key_specs_and_as_json():
    r = _mlsysim("zoo", "hardware")
    assert r.returncode == 0 and "H100-SXM" in r.stdout and "989 TFLOP/s" in r.stdout
    for kind in ("hardware", "models", "clusters", "grids"):
        d = json.loads(_mlsysim("zoo", kind, "--json").stdout)
        assert d["schema"] == "mlsysim.zoo/1" and d["kind"] == kind and d["entries"]
        assert all(e["source"] for e in d["entries"])
    h100 = next(e for e in json.loads(_mlsysim("zoo", "--json").stdout)["entries"] if e["name"] == "H100-SXM")
    assert h100["memory_B"] == 80e9 and h100["peak_flops"]["bf16"] == pytest.approx(989.4e12, rel=1e-3)


def test_zoo_shows_a_16_bit_peak_and_never_an_integer_one():
    import mlsysim as ms
    from mlsysim.units import fmt
    rows = {l.split()[0]: l for l in _mlsysim("zoo", "hardware").stdout.splitlines()[3:]}
    t4 = ms.hardware("t4").peak_flops
    assert f"{fmt(t4['fp16'], 'FLOP/s')} (fp16)" in rows["T4"] and fmt(t4["int4"], "FLOP/s") not in rows["T4"]
    orin = ms.hardware("jetson-orin").peak_flops
    assert f"{fmt(orin['fp16'], 'FLOP/s')} (fp16)" in rows["Jetson-AGX-Orin-64GB"]
    assert fmt(ms.hardware("h100").peak_flops["bf16"], "FLOP/s") + " " in rows["H100-SXM"]


def test_zoo_peak_column_for_every_device():
    import mlsysim as ms
    from mlsysim.units import fmt
    import re
    lines = _mlsysim("zoo", "hardware").stdout.splitlines()
    spans = [m.span() for m in re.finditer(r"-+", lines[2])]          # the columns, from the rule under the header
    column = next(sp for sp in spans if lines[1][sp[0]:sp[1]].strip() == "16-bit peak (dense)")
    rows = {l.split()[0]: l for l in lines[3:] if l.strip()}
    assert set(rows) == set(ms.zoo("hardware"))
    for name, line in rows.items():
        peaks = ms.hardware(name).peak_flops
        cell = line[column[0]:column[1]].strip()
        if "bf16" in peaks:
            assert cell == fmt(peaks["bf16"], "FLOP/s"), name
        elif "fp16" in peaks:
            assert cell == f"{fmt(peaks['fp16'], 'FLOP/s')} (fp16)", name
        else:
            assert cell == "-", name


def test_solver_commands_print_tables_and_json():
    import mlsysim as ms
    d = json.loads(_mlsysim("roofline", "llama-3-8b", "h100", "--batch", "8", "--json").stdout)
    assert d["schema"] == "mlsysim.roofline/1" and d["bound"] == "memory"
    assert d["time_s"] == ms.roofline("llama-3-8b", "h100", batch=8).time_s
    d = json.loads(_mlsysim("serve", "llama-3-70b", "h100", "--tp", "4", "--batch", "16", "--json").stdout)
    assert d["ttft_s"] == ms.generate("llama-3-70b", "h100", batch=16, tp=4).ttft_s
    r = _mlsysim("train", "llama-3-70b", "dgx-h100", "--nodes", "64", "--tp", "8", "--json")
    d = json.loads(r.stdout)
    assert d["layout"]["tp"] == 8 and d["step_s"] > 0 and 0 < d["mfu"] < 1
    r = _mlsysim("checkpoint", "llama-3-70b", "dgx-h100", "--nodes", "64", "--strategy", "async")
    assert r.returncode == 0 and "stall per checkpoint" in r.stdout
    d = json.loads(_mlsysim("checkpoint", "llama-3-70b", "dgx-h100", "--nodes", "64", "--json").stdout)
    assert d["size_B"] == ms.checkpoint("llama-3-70b", ms.cluster("dgx-h100", nodes=64), tp=8).size_B


# --- serve under load ------------------------------------------------------------------------------

LOAD = ("serve", "llama-3.1-8b", "h100", "--precision", "fp8", "--prompt", "512", "--output", "128")


def test_serve_under_load_as_json_is_serve_itself():
    from mlsysim.serving import serve
    r = _mlsysim(*LOAD, "--rate", "20", "--requests", "200", "--prompt-std", "50", "--seed", "3", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    run = serve("llama-3.1-8b", "h100", precision="fp8", prompt=512, output=128, rate=20.0, requests=200,
                   prompt_std=50, seed=3)
    assert d["schema"] == "mlsysim.serve-load/1" and d["model"] == run.workload and d["load"] == "rate 20 req/s"
    assert (d["kv_precision"], d["engine"], d["chunked_prefill"], d["seed"]) == ("fp8", "trtllm", False, 3)
    expected = run.to_json()
    for key in ("ttft_s", "itl_s", "e2e_s", "output_tokens_per_s", "total_tokens_per_s", "requests_per_s",
                "preemptions", "max_batch", "max_tokens", "kv_capacity_tokens", "duration_s", "timeline"):
        assert d[key] == expected[key], key
    assert set(d["ttft_s"]) == {"mean", "p50", "p90", "p99"}
    assert len(d["timeline"]["t_s"]) == len(d["timeline"]["batch"]) == len(d["timeline"]["kv_used"]) > 0


def test_serve_each_load_form_and_the_engine_flags(capsys):
    assert cli.main([*LOAD, "--concurrency", "8", "--requests", "32"]) == 0
    out = capsys.readouterr().out
    assert "concurrency 8, 32 requests" in out and "TTFT" in out and "preemptions" in out
    assert cli.main([*LOAD, "--rate", "inf", "--requests", "50", "--engine", "vllm", "--max-batch", "16",
                     "--max-tokens", "1024", "--no-chunked-prefill", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["load"] == "all queued" and d["engine"] == "vllm" and d["chunked_prefill"] is False
    assert (d["max_batch"], d["max_tokens"]) == (16, 1024)
    assert cli.main([*LOAD, "--concurrency", "2", "--requests", "4", "--output", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["itl_s"]["p50"] is None   # no NaN in the JSON


def test_serve_batch_form_keeps_its_schema(capsys):
    assert cli.main(["serve", "llama-3-70b", "h100", "--tp", "4", "--batch", "16", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["schema"] == "mlsysim.serve/1" and set(d) == {
        "schema", "model", "hardware", "tp", "batch", "prompt_tokens", "output_tokens", "ttft_s", "itl_s", "e2e_s",
        "tokens_per_s", "footprint_B", "capacity_B", "prefill_efficiency"}


@pytest.mark.parametrize("args, status, named", [
    (("--concurrency", "0"), 2, "concurrency must be"),
    (("--concurrency", "4", "--requests", "0"), 2, "requests must be"),
    (("--rate", "0"), 2, "rate must be"),
    (("--rate", "-5"), 2, "rate must be"),
    (("--concurrency", "4", "--rate", "2"), 2, "not both"),
    (("--batch", "8", "--rate", "2"), 2, "--batch does not apply under load"),
    (("--efficiency", "0.7", "--concurrency", "2"), 2, "--efficiency does not apply"),
    (("--requests", "100",), 2, "--requests does not apply to a batch"),
    (("--rate", "2", "--seed", "-1"), 2, "--seed must be"),
    (("--rate", "2", "--engine", "tensorrt"), 2, "Did you mean: trtllm"),
    (("--rate", "2", "--prompt", "130000", "--output", "2000"), 3, "context window of 131,072"),
])
def test_serve_under_load_bad_input_is_one_line(capsys, args, status, named):
    assert cli.main([*LOAD, *args]) == status
    err = capsys.readouterr().err
    assert named in err and err.count("\n") == 1 and err.startswith("mlsysim serve: ")


def test_serve_under_load_a_model_that_does_not_fit_exits_3(capsys):
    assert cli.main(["serve", "llama-3.3-70b", "h100", "--rate", "1", "--requests", "4", "--json"]) == 3
    captured = capsys.readouterr()
    assert captured.err.startswith("mlsysim serve: infeasible: ") and "141 GB" in captured.err
    assert json.loads(captured.out)["feasible"] is False


def test_checkpoint_pipelined_needs_and_takes_the_step_time():
    import subprocess
    import sys
    base = [sys.executable, "-m", "mlsysim.cli", "checkpoint", "llama-3-70b", "dgx-h100", "--nodes", "128",
            "--pp", "4", "--strategy", "pipelined", "--json"]
    r = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "step_s" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = subprocess.run(base + ["--step-s", "0.05"], capture_output=True, text=True, timeout=60)
    out = __import__("json").loads(r.stdout)
    assert r.returncode == 0 and 0.0 < out["stall_s"] < 0.05
