"""Every count input of every public solver refuses what is not a whole number.

A count is an input that only takes whole values: sequences in a batch, tokens, layers, GPUs,
tp/pp/dp/cp/ep, micro-batches, steps, nodes, workers, wafers. A scalar call with a fractional,
boolean, text, NaN, infinite or too small count raises a ValueError naming the input and the
value; an array call returns NaN plus ``feasible`` False at a fractional entry.

The table below is checked against the package: every public function whose signature has a
count input must appear with all its count inputs, so a new solver cannot skip this sweep.
"""
import inspect
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mlsysim as ms

C = ms.cluster("dgx-h100", nodes=16)
LLM = dict(model="llama-3-8b", hardware="h100")
COLL = dict(bytes_=1e9, n=8, bandwidth_Bps=1e11, latency_s=1e-6)

# public function -> (valid keyword arguments, {count input: smallest valid value})
SOLVERS = {
    "roofline": (dict(workload="llama-3-8b", hardware="h100", phase="prefill"),
                 {"batch": 1, "seq_len": 1, "context_tokens": 0}),
    "pass_cost": (dict(workload="llama-3-8b", phase="prefill"), {"batch": 1, "seq_len": 1, "context_tokens": 0}),
    "crossover_batch": (dict(workload="llama-3-8b", hardware="h100"), {"context_tokens": 0}),
    "prefill": (LLM, {"prompt_tokens": 1, "batch": 1, "tp": 1, "context_tokens": 0}),
    "decode": (LLM, {"context_tokens": 0, "batch": 1, "tp": 1}),
    "generate": (LLM, {"prompt_tokens": 1, "output_tokens": 2, "batch": 1, "tp": 1}),
    "kv_cache_bytes": (dict(model="llama-3-8b"), {"context_tokens": 0, "batch": 1, "tp": 1}),
    "serving_memory": (LLM, {"context_tokens": 0, "batch": 1, "tp": 1}),
    "max_batch": (LLM, {"context_tokens": 0, "tp": 1}),
    "max_context": (LLM, {"batch": 1, "tp": 1}),
    "min_tp": (LLM, {"context_tokens": 0, "batch": 1, "prompt_tokens": 1, "max_tp": 1}),
    "paged_kv": (dict(LLM, lengths=[100, 200]), {"lengths": 1, "block_tokens": 1, "max_tokens": 1, "tp": 1}),
    "length_mix": (dict(mean_tokens=100, max_tokens=1000), {"max_tokens": 1}),
    "expected_accepted_tokens": (dict(k=4, acceptance_rate=0.8), {"k": 0}),
    "speculative_decode": (dict(model="llama-2-70b", hardware="h100", draft="llama-2-7b", tp=4),
                           {"k": 0, "context_tokens": 0, "batch": 1, "tp": 1}),
    "serving_plan": (LLM, {"prompt_tokens": 1, "output_tokens": 1, "tp": 1, "max_batch_tried": 1}),
    "iteration_model": (LLM, {"tp": 1, "max_tokens": 1}),
    "serve": (dict(LLM, prompt=16, output=4, rate=float("inf"), requests=2), {"tp": 1}),
    "datapipe": (dict(workload="resnet-50", hardware="a100-80gb"),
                 {"batch": 1, "workers": 1, "cores": 1, "readers": 1, "seq_len": 1}),
    "quantized": (dict(workload="llama-3-8b", hardware="h100", scheme="w8a8"),
                  {"batch": 1, "context_tokens": 0, "seq_len": 1, "group_size": 1}),
    "quantized_footprint": (dict(workload="llama-3-8b", hardware="h100", scheme="w8a8"),
                            {"batch": 1, "context_tokens": 0, "group_size": 1}),
    "weight_bytes_per_param": (dict(precision="int4"), {"group_size": 1}),
    "training_memory": (dict(m="llama-3-8b"), {"zero_stage": 0, "tp": 1, "pp": 1, "dp": 1, "micro_batch": 1,
                                               "seq_len": 1, "ep": 1, "cp": 1, "interleave": 1,
                                               "microbatches": 1}),
    "model_states_B": (dict(params=8e9), {"zero_stage": 0, "dp": 1}),
    "allreduce_time": (COLL, {"n": 1}),
    "all_gather_time": (COLL, {"n": 1}),
    "reduce_scatter_time": (COLL, {"n": 1}),
    "all_to_all_time": (COLL, {"n": 1}),
    "broadcast_time": (COLL, {"n": 1}),
    "hierarchical_allreduce_time": (dict(bytes_=1e9, ranks_per_node=8, nodes=4, intra_Bps=4e11, inter_Bps=5e10,
                                         intra_latency_s=1e-6, inter_latency_s=5e-6),
                                    {"ranks_per_node": 1, "nodes": 1}),
    "train_step": (dict(m="llama-3-8b", c=C, global_batch=256, seq_len=4096, tp=8, pp=1, dp=16),
                   {"global_batch": 1, "seq_len": 1, "tp": 1, "pp": 1, "dp": 1, "microbatches": 1,
                    "interleave": 1, "micro_batch": 1, "cp": 1, "ep": 1, "zero_stage": 0}),
    "best_parallelism": (dict(m="llama-3-8b", c=C, global_batch=256, seq_len=4096),
                         {"global_batch": 1, "seq_len": 1, "tp": 1, "pp": 1, "cp": 1, "ep": 1,
                          "micro_batch": 1, "interleave": 1, "zero_stage": 0, "top": 1}),
    "mfu": (dict(m="llama-3-8b", hardware="h100", accelerators=128, tokens_per_s=1e6, seq_len=4096),
            {"accelerators": 1, "seq_len": 1}),
    "time_to_train_s": (dict(flops=1e24, accelerators=1024, flops_per_s_per_accelerator=4e14),
                        {"accelerators": 1}),
    "training_flops": (dict(m="llama-3-8b", tokens=1e12, seq_len=4096), {"seq_len": 1}),
    "training_run": (dict(model="llama-3-8b", cluster=C, tokens=1e12), {"seq_len": 1}),
    "cluster_mtbf_h": (dict(cluster=C), {"nodes": 1}),
    "expected_failures": (dict(cluster=C, hours=24), {"nodes": 1}),
    "p_any_failure": (dict(cluster=C, hours=24), {"nodes": 1}),
    "goodput": (dict(cluster=C, checkpoint=30.0), {"nodes": 1}),
    "checkpoint": (dict(model="llama-3-8b", cluster=C, tp=8),
                   {"tp": 1, "pp": 1, "dp": 1, "zero_stage": 0, "replicas": 2, "persist_every": 1, "nodes": 1}),
    "cluster": (dict(name="dgx-h100"), {"nodes": 1}),
    "weight_streaming": (dict(workload="llama-3-8b", hardware="cs-3"),
                         {"batch": 1, "seq_len": 1, "context_tokens": 0, "wafers": 1}),
    "weights_resident": (dict(workload="llama-3-8b", hardware="cs-3", phase="prefill", seq_len=16),
                         {"batch": 1, "context_tokens": 0, "seq_len": 1, "wafers": 1}),
    "wafers_needed": (dict(workload="llama-3-8b", hardware="cs-3"), {"batch": 1, "context_tokens": 0}),
    "reasoning_service": (dict(model="llama-3-8b", hardware="h100", qps=1.0, price=2.0),
                          {"steps": 0, "tokens_per_step": 1, "prompt_tokens": 1, "answer_tokens": 1, "tp": 1,
                           "batch": 1, "max_tp": 1}),
    "routing": (dict(small_model="llama-3-8b", large_model="llama-3-70b", hardware="h100", qps=1.0,
                     fraction_small=0.5, price=2.0), {"steps_small": 0, "steps_large": 0}),
    "gemm_time": (dict(m=512, n=4096, k=4096, hw="h100"), {"m": 1, "n": 1, "k": 1, "batch": 1}),
    "gemm_efficiency": (dict(m=512, n=4096, k=4096, hw="h100"), {"m": 1, "n": 1, "k": 1, "batch": 1}),
    "audit": (dict(model="llama-3-8b", cluster=C, tokens=1e11, grid="quebec"),
              {"global_batch": 1, "seq_len": 1, "tp": 1, "pp": 1, "zero_stage": 0, "interleave": 1,
               "micro_batch": 1, "workers": 1}),
}

COUNT = re.compile(r"^(batch|global_batch|micro_?batch(es)?|.*_tokens|tokens|seq_len|layers|nodes|gpus|"
                   r"accelerators|tp|pp|dp|cp|ep|max_tp|interleave|zero_stage|k|replicas|persist_every|workers|"
                   r"cores|readers|wafers|steps(_\w+)?|tokens_per_step|max_batch_tried|lengths|n|ranks_per_node|"
                   r"top|group_size)$")
# inputs whose names look like counts but are amounts: a mean length, a token budget (1.41e12
# Chinchilla tokens need not be whole) and an average batch per accelerator
NOT_COUNTS = {("length_mix", "mean_tokens"), ("training_flops", "tokens"), ("training_run", "tokens"),
              ("audit", "tokens")}

CASES = [(name, arg, low) for name, (_, counts) in SOLVERS.items() for arg, low in counts.items()]
NAMED = [-1, 0, 2.5, True, False, "4", float("nan"), float("inf")]


def _call(name, arg, value):
    base, _ = SOLVERS[name]
    return getattr(ms, name)(**{**base, arg: value})


def _shown(value) -> set[str]:
    out = {repr(value), str(value)}
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        out.add(f"{value:g}")                   # how messages print numbers (nan, inf, 1e+09)
    return {s.lower() for s in out}


def _refuses(name, arg, value):
    with pytest.raises(ValueError) as info:
        _call(name, arg, value)
    text = str(info.value).lower()
    assert arg.lower() in text, f"{name}({arg}={value!r}): the message does not name {arg}: {info.value}"
    assert any(s in text for s in _shown(value)), \
        f"{name}({arg}={value!r}): the message does not show the value: {info.value}"


def test_every_public_count_input_is_in_the_sweep():
    for name in dir(ms):
        fn = getattr(ms, name)
        if name.startswith("_") or not inspect.isfunction(fn) or not fn.__module__.startswith("mlsysim"):
            continue
        counts = {p for p in inspect.signature(fn).parameters if COUNT.match(p) and (name, p) not in NOT_COUNTS}
        listed = set(SOLVERS[name][1]) if name in SOLVERS else set()
        assert counts <= listed, f"ms.{name}: count inputs {sorted(counts - listed)} are not swept"


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_the_base_calls_run(name):
    getattr(ms, name)(**SOLVERS[name][0])        # else every refusal below would prove nothing


def _valid(value, low) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and value == int(value) and value >= low)


@pytest.mark.parametrize("name, arg, low", CASES, ids=[f"{n}-{a}" for n, a, _ in CASES])
def test_named_bad_counts_are_refused(name, arg, low):
    for value in NAMED:
        if not _valid(value, low):          # 0 is a valid count where zero is allowed
            _refuses(name, arg, value)


bad_counts = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False).filter(lambda x: x != math.floor(x)),     # fractional
    st.sampled_from([float("nan"), float("inf"), float("-inf"), True, False, "4", "2.0", b"8"]),
    st.integers(-10**9, -1))                                                        # negative


@settings(max_examples=400, deadline=None)
@given(case=st.sampled_from(CASES), value=bad_counts)
def test_every_solver_refuses_any_bad_count(case, value):
    name, arg, _ = case
    _refuses(name, arg, value)


# --- sweeps: a fractional entry is NaN with feasible False, the whole ones are computed ----------
STEP = SOLVERS["train_step"][0]
REASONING = SOLVERS["reasoning_service"][0]


def _but(kw, *names):
    return {k: v for k, v in kw.items() if k not in names}


VECTOR = [  # (function, count input, a valid whole value, output read, keyword arguments[, other value])
    (ms.roofline, "batch", 4, "time_s", dict(workload="llama-3-8b", hardware="h100")),
    (ms.roofline, "seq_len", 512, "time_s", dict(workload="llama-3-8b", hardware="h100", phase="prefill")),
    (ms.roofline, "context_tokens", 512, "time_s", dict(workload="llama-3-8b", hardware="h100")),
    (ms.decode, "batch", 4, "time_s", LLM),
    (ms.decode, "context_tokens", 512, "time_s", LLM),
    (ms.prefill, "prompt_tokens", 512, "time_s", LLM),              # GEMMs timed by shape (the default)
    (ms.prefill, "prompt_tokens", 512, "time_s", dict(LLM, efficiency=0.70)),   # the scalar override
    (ms.prefill, "batch", 4, "time_s", LLM),
    (ms.prefill, "context_tokens", 512, "time_s", LLM),
    (ms.prefill, "tp", 1, "time_s", LLM),
    (ms.generate, "prompt_tokens", 512, "e2e_s", LLM),
    (ms.decode, "tp", 1, "time_s", LLM),
    (ms.generate, "output_tokens", 64, "e2e_s", LLM),
    (ms.generate, "batch", 4, "e2e_s", LLM),
    (ms.serving_memory, "batch", 4, "total_B", LLM),
    (ms.speculative_decode, "k", 4, "time_per_token_s",
     dict(model="llama-2-70b", hardware="h100", draft="llama-2-7b", tp=4)),
    (ms.weight_streaming, "batch", 1, "time_s", dict(workload="llama-3-8b", hardware="cs-3")),
    (ms.datapipe, "workers", 4, "delivered_sps", dict(workload="resnet-50", hardware="a100-80gb")),
    (ms.datapipe, "readers", 4, "delivered_sps", dict(workload="resnet-50", hardware="a100-80gb", storage="s3")),
    # training: the last entry, when given, is the second whole value (a valid layout, not good + 1)
    (ms.train_step, "global_batch", 256, "step_s", STEP, 512),
    (ms.train_step, "seq_len", 4096, "step_s", STEP, 2048),
    (ms.train_step, "tp", 4, "step_s", _but(STEP, "tp", "dp"), 8),
    (ms.train_step, "pp", 1, "step_s", _but(STEP, "pp", "dp"), 2),
    (ms.train_step, "dp", 16, "step_s", STEP, 16),
    (ms.train_step, "cp", 1, "step_s", _but(STEP, "dp"), 2),
    (ms.train_step, "ep", 1, "step_s", STEP, 1),
    (ms.train_step, "micro_batch", 1, "step_s", STEP, 2),
    (ms.train_step, "microbatches", 16, "step_s", STEP, 8),
    (ms.train_step, "interleave", 1, "step_s", dict(STEP, pp=2, dp=8), 2),
    (ms.train_step, "zero_stage", 1, "step_s", STEP, 3),
    (ms.training_memory, "zero_stage", 1, "total_B", dict(m="llama-3-8b", dp=8), 2),
    (ms.training_memory, "tp", 1, "total_B", dict(m="llama-3-8b"), 2),
    (ms.training_memory, "pp", 1, "total_B", dict(m="llama-3-8b")),
    (ms.training_memory, "dp", 1, "total_B", dict(m="llama-3-8b", zero_stage=3)),
    (ms.training_memory, "micro_batch", 1, "total_B", dict(m="llama-3-8b")),
    (ms.training_memory, "seq_len", 4096, "total_B", dict(m="llama-3-8b")),
    (ms.training_memory, "ep", 1, "total_B", dict(m="llama-3-8b"), 1),
    (ms.training_memory, "cp", 1, "total_B", dict(m="llama-3-8b"), 2),
    (ms.training_memory, "interleave", 1, "total_B", dict(m="llama-3-8b", pp=2)),
    (ms.training_memory, "microbatches", 1, "total_B", dict(m="llama-3-8b", pp=4)),
    (ms.checkpoint, "tp", 4, "write_s", dict(model="llama-3-8b", cluster=C), 8),
    (ms.checkpoint, "pp", 1, "goodput", dict(model="llama-3-8b", cluster=C, tp=8), 2),
    (ms.checkpoint, "dp", 16, "write_s", dict(model="llama-3-8b", cluster=C, tp=8), 16),
    (ms.checkpoint, "nodes", 16, "write_s", dict(model="llama-3-8b", cluster=C, tp=8)),
    (ms.reasoning_service, "steps", 2, "e2e_s", REASONING),
    (ms.reasoning_service, "tokens_per_step", 256, "e2e_s", REASONING),
    (ms.reasoning_service, "prompt_tokens", 1024, "e2e_s", REASONING),
    (ms.reasoning_service, "answer_tokens", 256, "e2e_s", REASONING),
    (ms.reasoning_service, "batch", 4, "e2e_s", REASONING),
    (ms.routing, "steps_small", 2, "usd_per_year", SOLVERS["routing"][0]),
    (ms.routing, "steps_large", 2, "usd_per_year", SOLVERS["routing"][0]),
]
SWEEPS = [v if len(v) == 6 else (*v, v[2] + 1) for v in VECTOR]
PLAIN = [  # functions returning plain numbers: NaN at the fractional entry
    (ms.kv_cache_bytes, "batch", 4, dict(model="llama-3-8b")),
    (ms.max_batch, "context_tokens", 512, LLM),
    (ms.max_context, "batch", 4, LLM),
    (ms.expected_accepted_tokens, "k", 4, dict(acceptance_rate=0.8)),
    (ms.cluster_mtbf_h, "nodes", 4, dict(cluster=C)),
    (ms.wafers_needed, "batch", 4, dict(workload="llama-3-8b", hardware="cs-3")),
    (ms.allreduce_time, "n", 8, dict(bytes_=1e9, bandwidth_Bps=1e11)),
    (ms.broadcast_time, "n", 8, dict(bytes_=1e9, bandwidth_Bps=1e11)),
    (ms.all_to_all_time, "n", 8, dict(bytes_=1e9, bandwidth_Bps=1e11)),
    (ms.gemm_time, "m", 512, dict(n=4096, k=4096, hw="h100")),
    (ms.gemm_efficiency, "batch", 2, dict(m=512, n=4096, k=4096, hw="h100")),
    (ms.model_states_B, "dp", 4, dict(params=8e9, zero_stage=3)),
    (ms.hierarchical_allreduce_time, "nodes", 4, dict(bytes_=1e9, ranks_per_node=8, intra_Bps=4e11,
                                                      inter_Bps=5e10)),
]


@pytest.mark.parametrize("fn, arg, good, out, kw, other", SWEEPS, ids=[f"{v[0].__name__}-{v[1]}" for v in SWEEPS])
def test_a_fractional_entry_of_a_sweep_is_nan_and_infeasible(fn, arg, good, out, kw, other):
    r = fn(**{**kw, arg: np.array([good, good + 0.5, other])})
    y = np.asarray(getattr(r, out))
    assert np.isfinite(y[[0, 2]]).all() and np.isnan(y[1])
    if hasattr(r, "feasible"):
        assert np.asarray(r.feasible).tolist() == [True, False, True]
    if hasattr(r, "reason"):
        assert "whole" in r.reason
    assert y[0] == pytest.approx(getattr(fn(**{**kw, arg: good}), out), rel=1e-12)
    assert y[2] == pytest.approx(getattr(fn(**{**kw, arg: other}), out), rel=1e-12)


NAMING = [v for v in SWEEPS if v[0] in (ms.train_step, ms.training_memory, ms.checkpoint, ms.reasoning_service)]


@pytest.mark.parametrize("fn, arg, good, out, kw, other", NAMING, ids=[f"{v[0].__name__}-{v[1]}" for v in NAMING])
def test_a_training_sweep_names_its_fractional_input(fn, arg, good, out, kw, other):
    assert f"{arg} must be a whole number" in fn(**{**kw, arg: np.array([good, good + 0.5, other])}).reason


def test_a_fractional_count_is_masked_across_a_broadcast_grid():
    r = ms.train_step(**{**STEP, "micro_batch": np.array([[1], [1.5], [2]]), "seq_len": np.array([2048, 4096])})
    assert np.asarray(r.feasible).tolist() == [[True, True], [False, False], [True, True]]
    assert np.isnan(r.step_s[1]).all() and np.isfinite(r.step_s[[0, 2]]).all()
    assert r.step_s[2, 1] == pytest.approx(ms.train_step(**{**STEP, "micro_batch": 2}).step_s, rel=1e-12)


@pytest.mark.parametrize("name, arg", [("best_parallelism", "global_batch"), ("best_parallelism", "seq_len"),
                                       ("best_parallelism", "top"), ("reasoning_service", "tp"),
                                       ("reasoning_service", "max_tp")])
def test_a_search_refuses_an_array_where_it_takes_one_number(name, arg):
    with pytest.raises(ValueError, match=f"{arg} must be a single whole number"):
        _call(name, arg, np.array([4, 8]))


def test_a_fractional_candidate_of_the_layout_search_is_excluded_under_its_own_rule():
    base = SOLVERS["best_parallelism"][0]
    whole = ms.best_parallelism(**base, micro_batch=(1, 2, 4))
    mixed = ms.best_parallelism(**base, micro_batch=(1, 1.5, 2, 4))
    assert mixed.excluded.pop("micro_batch must be a whole number") == mixed.evaluated // 4
    assert mixed.excluded == whole.excluded and str(mixed.ranking) == str(whole.ranking)
    assert mixed.best.step_s == whole.best.step_s


@pytest.mark.parametrize("fn, arg, good, kw", PLAIN, ids=[f"{v[0].__name__}-{v[1]}" for v in PLAIN])
def test_a_fractional_entry_of_a_plain_sweep_is_nan(fn, arg, good, kw):
    y = np.asarray(fn(**{**kw, arg: np.array([good, good + 0.5])}), dtype=float)
    assert np.isfinite(y[0]) and np.isnan(y[1])
    assert y[0] == pytest.approx(float(fn(**{**kw, arg: good})), rel=1e-12)


def test_sensitivity_and_solve_for_work_on_the_relaxation_only_inside():
    rate = lambda batch: ms.decode("llama-3-8b", "h100", batch=batch, context_tokens=4096)  # noqa: E731
    b = ms.solve_for(rate, "batch", 3000, output="tokens_per_s", bracket=(1, 1024))
    assert b != int(b)
    with pytest.raises(ValueError, match="batch"):
        rate(b)
    with ms.errors.continuous_counts():
        assert rate(b).tokens_per_s == pytest.approx(3000, rel=1e-6)
        with pytest.raises(ValueError, match="batch"):
            rate(True)                      # booleans, text, NaN and negatives stay errors inside
    s = ms.hardware_sensitivity(ms.decode, "llama-3-8b", "h100", inputs={"batch": 1})
    assert math.isfinite(s["batch"].elasticity)


# --- every other numeric input: a boolean, text or NaN is refused too ---------------------------
MORE = {  # public functions without count inputs, with valid keyword arguments
    "energy_kwh": dict(cluster=C, hours=24), "carbon_kg": dict(cluster=C, hours=24, grid="quebec"),
    "it_power_W": dict(cluster=C), "capex_usd": dict(cluster=C), "tco": dict(cluster=C, days=30, grid="quebec"),
    "young_interval_s": dict(checkpoint_s=30.0, mtbf_s=3600.0),
    "daly_interval_s": dict(checkpoint_s=30.0, mtbf_s=3600.0),
    "ettr": dict(interval_s=600.0, checkpoint_s=30.0, mtbf_s=3600.0),
    "lost_work_s": dict(interval_s=600.0, restart_s=60.0),
    "p2p_time": dict(bytes_=1e9, bandwidth_Bps=1e11, latency_s=1e-6),
    "usd_per_million_tokens": dict(usd_per_hour=98.0, tokens_per_s=1e4),
    "rental_usd": dict(accelerator_hours=1000.0, offer=2.0),
    "chinchilla_tokens": dict(model="llama-3-8b"),
}
NAMES_TOO = {("reasoning_service", "price"), ("routing", "price"), ("rental_usd", "offer"),
             ("model_states_B", "params")}          # a number, or the name of a record


def _numeric_inputs():
    out = []
    for name, base in {**{k: v[0] for k, v in SOLVERS.items()}, **MORE}.items():
        counts = SOLVERS.get(name, ({}, {}))[1]
        for p, par in inspect.signature(getattr(ms, name)).parameters.items():
            value = base.get(p, par.default)
            if p not in counts and isinstance(value, (int, float)) and not isinstance(value, bool):
                out.append((name, p))
    return out


NUMERIC = _numeric_inputs()


def _call_more(name, arg, value):
    base = SOLVERS[name][0] if name in SOLVERS else MORE[name]
    return getattr(ms, name)(**{**base, arg: value})


@settings(max_examples=300, deadline=None)
@given(case=st.sampled_from(NUMERIC),
       value=st.sampled_from([True, False, "4", "0.5", float("nan"), np.array([1.0, float("nan")])]))
def test_no_numeric_input_takes_a_boolean_text_or_nan(case, value):
    name, arg = case
    if isinstance(value, str) and case in NAMES_TOO:
        return                                  # text is a name here, refused as an unknown one
    with pytest.raises(ValueError) as info:
        _call_more(name, arg, value)
    assert arg in str(info.value), f"{name}({arg}={value!r}): {info.value}"


def test_the_numeric_sweep_covers_the_solvers():
    assert len(NUMERIC) > 80 and {n for n, _ in NUMERIC} >= set(MORE) - {"chinchilla_tokens", "capex_usd"}


def test_a_zero_stage_above_3_is_masked_in_a_sweep_and_refused_alone():
    r = ms.train_step(**{**STEP, "zero_stage": np.array([1, 4])})
    assert np.isfinite(r.step_s[0]) and np.isnan(r.step_s[1]) and "0, 1, 2 or 3 (1)" in r.reason
    with pytest.raises(ms.MlsysimError, match="zero_stage must be 0, 1, 2 or 3, got 4"):
        ms.train_step(**{**STEP, "zero_stage": 4})
    with pytest.raises(ms.MlsysimError, match="zero_stage must be 0, 1, 2 or 3, got 5"):
        ms.training_memory("llama-3-8b", zero_stage=5)
