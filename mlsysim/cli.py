"""The ``mlsysim`` command line.

    mlsysim zoo hardware                               # what the registries hold, with key specs
    mlsysim roofline llama-3-8b h100 --batch 8         # one pass: compute- or memory-bound?
    mlsysim serve llama-3-70b h100 --tp 4 --batch 16   # TTFT, ITL and throughput of a batch
    mlsysim serve llama-3.1-8b h100 --precision fp8 --prompt 128 --output 128 --rate 20   # under load
    mlsysim train llama-3-70b dgx-h100 --nodes 64      # fastest layout and its step
    mlsysim checkpoint llama-3-70b dgx-h100 --nodes 64 --strategy async
    mlsysim audit examples/llama3_70b_audit.yaml       # every wall of a training run
    mlsysim audit scenario.yaml --json                 # the same as JSON, for scripts
    mlsysim assign notebooks/ --out student/           # student copies of the notebooks
    mlsysim assign notebooks/ --out source/ps1 --nbgrader
    mlsysim score --execute submitted/alice/           # exercises answered correctly
    mlsysim lab checkpoint --engine sync --size-mb 256 --steps 20 --every 5   # real checkpoints, timed
    mlsysim lab checkpoint --framework torch --compare --size-mb 64   # torch.save, DCP and ours, one state
    mlsysim lab distributed --nproc 2 --kill rank --json        # torchrun, a rank SIGKILLed, resumed exactly
    mlsysim lab distributed --nproc 2 --nodes 2 --kill node     # a node lost, recovered from peer memory
    mlsysim lab distributed --nproc 2 --steps 12 --every 2 --plain-steps 4 --json   # what a checkpoint costs

Output is a readable table; ``--json`` prints one JSON object whose numbers are plain SI
values with the unit in the key (``time_s``, ``memory_B``, ``bandwidth_Bps``, ``energy_J``,
``cost_usd``; fractions are unitless) and whose ``schema`` names its layout
(``mlsysim.audit/1`` is documented in :meth:`mlsysim.audit.Audit.to_dict`; the others list
their keys in their ``_json_<name>`` function below). A scenario file for ``audit`` is YAML
holding :func:`mlsysim.audit` arguments, ``model`` and ``cluster`` at least, and optional
assertions ``expect: {mfu: {min: 0.35}, days: {max: 90}}`` on the audit's metrics.

Exit status: 0 success; 1 a scenario assertion failed; 2 bad input (an unknown name, a
negative size, a missing file: one line on stderr); 3 an infeasible configuration (the
reason, and for ``audit`` a suggested fix, on stderr; with ``--json`` also
``{"feasible": false, "reason": ..., "fix": ...}`` on stdout).

Each subcommand is one ``_add_<name>(commands)`` function that declares its
arguments and sets ``run`` to a ``_run_<name>(args) -> int`` function; list the
``_add_`` function in :data:`COMMANDS`. Run functions import what they need
when they run, so that ``mlsysim --help`` stays instant. :func:`emit` prints a
result as text or, with ``--json``, as JSON.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """Give a subcommand the ``--json`` flag that :func:`emit` honours."""
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def jsonable(obj):
    """Plain JSON types for a result: dataclasses become dicts, NumPy values lists or floats."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "tolist"):  # NumPy arrays and scalars
        return obj.tolist()
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def emit(result, args: argparse.Namespace) -> None:
    """Print ``result`` as text, or as indented JSON when the command was given ``--json``."""
    if getattr(args, "json", False):
        print(json.dumps(jsonable(result), indent=2))
    else:
        print(result)


# --- assign --------------------------------------------------------------------------------

def _add_assign(commands) -> None:
    p = commands.add_parser(
        "assign", help="write student copies of notebooks (solutions replaced by stubs)",
        description="Write a student copy of each notebook: code between '### BEGIN SOLUTION' and "
                    "'### END SOLUTION' becomes '# YOUR CODE HERE' + 'raise NotImplementedError()', "
                    "marked markdown becomes 'YOUR ANSWER HERE', outputs and widget state are cleared, "
                    "checks are kept. With --nbgrader, write nbgrader source notebooks instead "
                    "(solutions kept, cell metadata added) for 'nbgrader generate_assignment'.")
    p.add_argument("paths", nargs="+", help="notebooks, or folders holding them")
    p.add_argument("--out", required=True, help="folder for the copies (never the input folder)")
    p.add_argument("--nbgrader", action="store_true",
                   help="write nbgrader source notebooks (answer and autograder test cells)")
    p.set_defaults(run=_run_assign)


def _run_assign(args) -> int:
    from .assign import assign
    for path, regions in assign(args.paths, args.out, nbgrader=args.nbgrader):
        print(f"{path}: {regions} solution region{'s' if regions != 1 else ''} "
              f"{'marked for nbgrader' if args.nbgrader else 'replaced by stubs'}")
    return 0


def _add_score(commands) -> None:
    p = commands.add_parser(
        "score", help="count the exercises a submitted notebook answers correctly",
        description="Read the output of every ms.exercises.check in each notebook and count the "
                    "exercises answered correctly. Use --execute to run each notebook first (in a "
                    "fresh kernel, continuing after errors): stored outputs can be edited by hand.")
    p.add_argument("paths", nargs="+", help="submitted notebooks, or folders holding them")
    p.add_argument("--execute", action="store_true", help="run each notebook before scoring it")
    add_json_flag(p)
    p.set_defaults(run=_run_score)


def _run_score(args) -> int:
    from . import exercises
    from .assign import execute, notebooks, read, score
    from .errors import UnknownNameError
    results = {}
    for path in notebooks(args.paths):
        nb = execute(read(path), path.parent) if args.execute else read(path)
        try:
            expected = exercises.ids(exercises.notebook_id(path.name))
        except UnknownNameError:
            expected = None
        results[str(path)] = score(nb, expected)
    if args.json:
        emit(results, args)
        return 0
    for path, marks in results.items():
        missing = [i for i, ok in marks.items() if not ok]
        print(f"{path}: {len(marks) - len(missing)} / {len(marks)} correct"
              + (f" (not yet: {', '.join(missing)})" if missing else ""))
    return 0


# --- shared arguments --------------------------------------------------------------------

def _cluster_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("cluster", help="a cluster preset or a node name (mlsysim zoo clusters)")
    p.add_argument("--nodes", type=int, help="number of nodes (default: the preset's, or 1)")
    p.add_argument("--fabric", help="scale-out fabric (default: the node's)")


def _cluster_of(args):
    from .registry import cluster
    return cluster(args.cluster, nodes=args.nodes, fabric=args.fabric)


def _cands(text: str | None, kind=int):
    """'8' or '4,8' -> [8] or [4, 8]; None stays None (the search's default)."""
    if text is None:
        return None
    try:
        return [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"expected a value or a comma-separated list, got {text!r}") from None


def _number(text: str):
    """A number written as 1.4e12 or 1.4T (k, M, G, T, P suffixes), or a word for the solver."""
    scale = {"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
    t = text.strip()
    try:
        return float(t[:-1]) * scale[t[-1].lower()] if t[-1].lower() in scale else float(t)
    except (ValueError, IndexError):
        return t


# --- zoo --------------------------------------------------------------------------------------

ZOO_KINDS = ("hardware", "models", "clusters", "nodes", "fabrics", "grids", "optimizers")


def _add_zoo(commands) -> None:
    p = commands.add_parser("zoo", help="list the registries (hardware, models, clusters, grids) with key specs",
                            description="List one registry with its key specifications, each entry "
                                        "with its source.")
    p.add_argument("kind", nargs="?", default="hardware", choices=ZOO_KINDS, help="registry (default hardware)")
    add_json_flag(p)
    p.set_defaults(run=_run_zoo)


def _zoo_row(kind: str, r) -> dict:
    """One registry record as SI numbers with units in the keys (the JSON of ``mlsysim zoo``)."""
    if kind == "hardware":
        return {"name": r.name, "kind": r.kind, "year": r.year, "peak_flops": dict(r.peak_flops),
                "memory_B": r.memory_B, "memory_bw_Bps": r.memory_bw_Bps, "tdp_W": r.tdp_W,
                "scaleup_Bps": r.scaleup_Bps, "host_link_Bps": r.host_link_Bps, "source": r.source}
    if kind == "models":
        out = {"name": r.name, "type": type(r).__name__.lower(), "params": float(r.params),
               "active_params": float(r.active_params)}
        if hasattr(r, "layers"):
            out.update(layers=r.layers, d_model=r.d_model, heads=r.heads, kv_heads=r.kv_heads, vocab=r.vocab,
                       max_context=r.max_context, experts=r.experts)
        else:
            out.update(flops_per_sample=float(r.flops_per_sample), resolution=r.resolution)
        return {**out, "source": r.source}
    if kind in ("clusters", "nodes"):
        node = getattr(r, "node", r)
        count = getattr(r, "nodes", 1)
        fab = r.fabric.name if hasattr(r, "fabric") else node.default_fabric
        out = {"name": r.name, "node": node.name, "nodes": count, "accelerator": node.accelerator.name,
               "accelerators": count * node.accelerators, "fabric": fab,
               "nic_Bps_per_accelerator": node.nics * node.nic_Bps / node.accelerators,
               "host_memory_B": node.host_memory_B, "system_power_W": node.system_power_W}
        return {**out, "source": r.source}
    if kind == "fabrics":
        return {"name": r.name, "kind": r.kind, "port_Bps": r.port_Bps, "latency_s": r.latency_s,
                "source": r.source}
    if kind == "grids":
        return {"name": r.name, "region": r.region, "carbon_g_per_kWh": r.carbon_g_per_kWh, "pue": r.pue,
                "price_usd_per_kWh": r.price_usd_per_kWh, "wue_L_per_kWh": r.wue_L_per_kWh, "source": r.source}
    return {"name": r.name, "full_states": r.full_states, "state_bytes": r.state_bytes,
            "master_bytes": r.master_bytes, "source": r.source}


def _half_precision_peak(row: dict) -> str:
    """A device's dense bf16 peak, else its fp16 peak named as such; never an integer (TOPS) peak.

    >>> _half_precision_peak({"peak_flops": {"fp32": 8.1e12, "fp16": 65e12, "int8": 130e12, "int4": 260e12}})
    '65 TFLOP/s (fp16)'
    """
    from .units import fmt
    peaks = row["peak_flops"]
    if "bf16" in peaks:
        return fmt(peaks["bf16"], "FLOP/s")
    if "fp16" in peaks:
        return f"{fmt(peaks['fp16'], 'FLOP/s')} (fp16)"
    return "-"


def _zoo_text(kind: str, row: dict) -> dict:
    from .units import fmt
    opt = lambda v, unit: "-" if v is None else fmt(v, unit)  # noqa: E731
    if kind == "hardware":
        return {"name": row["name"], "kind": row["kind"], "16-bit peak (dense)": _half_precision_peak(row),
                "memory": fmt(row["memory_B"], "B"), "bandwidth": fmt(row["memory_bw_Bps"], "B/s"),
                "TDP": opt(row["tdp_W"], "W"), "scale-up/dir": opt(row["scaleup_Bps"], "B/s")}
    if kind == "models":
        shape = (f"{row['layers']} × {row['d_model']}, {row['heads']}/{row['kv_heads'] or row['heads']} heads"
                 if "layers" in row else f"{row['resolution']} px")
        return {"name": row["name"], "type": row["type"], "params": fmt(row["params"]),
                "active": fmt(row["active_params"]), "shape": shape,
                "context": f"{row['max_context']:,}" if "max_context" in row else "-"}
    if kind in ("clusters", "nodes"):
        return {"name": row["name"], "GPUs": f"{row['accelerators']:,}", "accelerator": row["accelerator"],
                "node": row["node"], "fabric": row["fabric"],
                "NIC/GPU/dir": fmt(row["nic_Bps_per_accelerator"], "B/s"), "node power": fmt(row["system_power_W"], "W")}
    if kind == "fabrics":
        return {"name": row["name"], "kind": row["kind"], "port/dir": fmt(row["port_Bps"], "B/s"),
                "latency": fmt(row["latency_s"], "s")}
    if kind == "grids":
        price = row["price_usd_per_kWh"]
        return {"name": row["name"], "region": row["region"], "gCO2e/kWh": f"{row['carbon_g_per_kWh']:g}",
                "PUE": f"{row['pue']:.2f}", "$/kWh": "-" if price is None else f"{price:.3g}"}
    return {k: str(v) for k, v in row.items() if k != "source"}


def _run_zoo(args) -> int:
    from .registry import zoo
    from .tables import table
    rows = [_zoo_row(args.kind, r) for r in zoo(args.kind, records=True)]
    if args.json:
        emit({"schema": "mlsysim.zoo/1", "kind": args.kind, "entries": rows}, args)
    else:
        print(table([_zoo_text(args.kind, r) for r in rows], title=f"{args.kind} ({len(rows)})"))
    return 0


# --- roofline, serve -----------------------------------------------------------------------

def _add_roofline(commands) -> None:
    p = commands.add_parser("roofline", help="one pass of a model on a device: time and its bound",
                            description="Roofline time of one pass (decode step, prefill, training step, "
                                        "or CNN inference) and whether compute or memory bounds it.")
    p.add_argument("model")
    p.add_argument("hardware")
    p.add_argument("--phase", help="decode, prefill or training (inference or training for a CNN)")
    p.add_argument("--batch", type=float, default=1, help="sequences or images (default 1)")
    p.add_argument("--precision", default="bf16")
    p.add_argument("--seq-len", type=int, help="new tokens per sequence (prefill, training)")
    p.add_argument("--context", type=int, default=0, help="cached tokens before the pass (default 0)")
    add_json_flag(p)
    p.set_defaults(run=_run_roofline)


def _json_roofline(r) -> dict:
    """Keys: schema, model, hardware, phase, precision, batch, flops, bytes_B, compute_s, memory_s,
    time_s, intensity_flop_per_B, ridge_flop_per_B, bound, tokens_per_s, footprint_B, capacity_B."""
    return {"schema": "mlsysim.roofline/1", "model": r.workload, "hardware": r.hardware, "phase": r.phase,
            "precision": r.precision, "batch": r.batch, "flops": r.flops, "bytes_B": r.bytes,
            "compute_s": r.compute_s, "memory_s": r.memory_s, "time_s": r.time_s,
            "intensity_flop_per_B": r.intensity, "ridge_flop_per_B": r.ridge, "bound": r.bound,
            "tokens_per_s": r.tokens_per_s, "footprint_B": r.footprint_B, "capacity_B": r.capacity_B}


def _run_roofline(args) -> int:
    from .roofline import roofline
    r = roofline(args.model, args.hardware, batch=args.batch, precision=args.precision, phase=args.phase,
                 seq_len=args.seq_len, context_tokens=args.context)
    emit(_json_roofline(r) if args.json else r, args)
    return 0


def _add_serve(commands) -> None:
    p = commands.add_parser(
        "serve", help="serve requests: a batch (TTFT, ITL, memory) or a stream under load (percentiles, tokens/s)",
        description="Two forms. With --batch (or neither --concurrency nor --rate): a batch of requests from "
                    "prompt to last token on a tensor-parallel group: time to first token, mean inter-token "
                    "latency, end-to-end time, throughput and memory per GPU. With --concurrency C (a closed "
                    "loop of C requests in flight) or --rate R (Poisson arrivals, R requests/s; --rate inf "
                    "queues every request at once, as trtllm-bench does): --requests requests through a "
                    "continuous-batching engine (mlsysim.serving.serve): TTFT, ITL and end-to-end "
                    "percentiles, tokens/s, preemptions, batch and KV-cache occupancy over time.")
    p.add_argument("model")
    p.add_argument("hardware")
    p.add_argument("--tp", type=int, default=1, help="GPUs in the tensor-parallel group (default 1)")
    p.add_argument("--batch", type=float, help="requests decoding together, the batch form (default 1)")
    p.add_argument("--prompt", type=float, default=2048, help="prompt tokens (default 2048; mean under load)")
    p.add_argument("--output", type=float, default=256, help="generated tokens (default 256; mean under load)")
    p.add_argument("--precision", default="bf16", help="weights and activations (default bf16)")
    p.add_argument("--kv-precision", help="KV cache (default: --precision)")
    p.add_argument("--efficiency", type=float, default=None,
                   help="batch form: fraction of peak FLOP/s for every pass (default: the prefill's GEMMs timed by "
                        "shape)")
    load = p.add_argument_group("under load (give --concurrency or --rate)")
    load.add_argument("--concurrency", type=int, help="requests in flight, a new one sent as one ends")
    load.add_argument("--rate", type=float, help="Poisson arrivals per second, or inf: every request queued at 0")
    load.add_argument("--requests", type=int, help="requests to simulate (default 1000)")
    load.add_argument("--engine", help="scheduler settings: trtllm (default), vllm or static")
    load.add_argument("--max-batch", type=int, help="most sequences per iteration (default: the engine's)")
    load.add_argument("--max-tokens", type=int, help="most tokens per iteration (default: the engine's)")
    load.add_argument("--chunked-prefill", action=argparse.BooleanOptionalAction,
                      help="split prompts over iterations (default: the engine's)")
    load.add_argument("--seed", type=int, help="seed of the arrivals and the drawn lengths (default 0)")
    load.add_argument("--prompt-std", type=float, help="standard deviation of the prompt lengths (default 0)")
    load.add_argument("--output-std", type=float, help="standard deviation of the output lengths (default 0)")
    add_json_flag(p)
    p.set_defaults(run=_run_serve)


def _json_serve(g) -> dict:
    """Keys: schema, model, hardware, tp, batch, prompt_tokens, output_tokens, ttft_s, itl_s, e2e_s,
    tokens_per_s, footprint_B, capacity_B, prefill_efficiency (fraction of dense peak; achieved by the
    GEMM shapes unless --efficiency sets it)."""
    return {"schema": "mlsysim.serve/1", "model": g.workload, "hardware": g.hardware, "tp": g.tp,
            "batch": g.batch, "prompt_tokens": g.prompt_tokens, "output_tokens": g.output_tokens,
            "ttft_s": g.ttft_s, "itl_s": g.itl_s, "e2e_s": g.e2e_s, "tokens_per_s": g.tokens_per_s,
            "footprint_B": g.footprint_B, "capacity_B": g.capacity_B, "prefill_efficiency": g.prefill_efficiency}


def _json_serve_load(r, *, kv_precision: str, chunked_prefill: bool, seed: int) -> dict:
    """Keys: schema ("mlsysim.serve-load/1"), model, hardware, tp, precision, kv_precision, engine,
    chunked_prefill, seed, load ("concurrency 8", "rate 2 req/s" or "all queued"), requests, prompt_tokens and
    output_tokens (means), max_batch and max_tokens (the engine's limits per iteration), kv_capacity_tokens,
    duration_s (first arrival to last token), ttft_s, itl_s and e2e_s (each {mean, p50, p90, p99}; ITL is
    (e2e − TTFT)/(output − 1), null where no request has two output tokens), output_tokens_per_s,
    total_tokens_per_s, requests_per_s, preemptions, iterations, timeline ({t_s, batch, kv_used}: at most
    400 iterations' end times, the requests running and the fraction of the KV cache in use)."""
    d = r.to_json()
    for stats in ("ttft_s", "itl_s", "e2e_s"):
        d[stats] = {k: (None if v != v else v) for k, v in d[stats].items()}   # NaN is no JSON number
    return {"schema": "mlsysim.serve-load/1", "model": d.pop("workload"), "hardware": d.pop("hardware"),
            "tp": d.pop("tp"), "precision": d.pop("precision"), "kv_precision": kv_precision,
            "engine": d.pop("engine"), "chunked_prefill": chunked_prefill, "seed": seed, **d}


# flags of the form under load, with serve()'s defaults: refused in the batch form, which would ignore them
SERVE_LOAD_ONLY = {"requests": 1000, "engine": "trtllm", "max_batch": None, "max_tokens": None,
                   "chunked_prefill": None, "seed": 0, "prompt_std": 0.0, "output_std": 0.0}


def _serve_refuse(args, names, why: str) -> None:
    """One line naming every given flag in ``names`` that this form of ``serve`` would ignore."""
    from .errors import MlsysimError
    given = [f"--{n.replace('_', '-')}" for n in names if getattr(args, n) is not None]
    if given:
        raise MlsysimError(f"{', '.join(given)} {'does' if len(given) == 1 else 'do'} not apply {why}")


def _run_serve(args) -> int:
    if args.concurrency is not None or args.rate is not None:
        return _run_serve_load(args)
    _serve_refuse(args, SERVE_LOAD_ONLY, "to a batch (no --concurrency or --rate): they set the stream under load")
    from .serving import generate
    g = generate(args.model, args.hardware, prompt_tokens=args.prompt, output_tokens=args.output,
                 batch=1 if args.batch is None else args.batch, precision=args.precision, tp=args.tp,
                 kv_precision=args.kv_precision, efficiency=args.efficiency)
    emit(_json_serve(g) if args.json else g, args)
    return 0


def _run_serve_load(args) -> int:
    from .errors import MlsysimError
    if args.concurrency is not None and args.rate is not None:
        raise MlsysimError("give one of --concurrency (a closed loop) and --rate (arrivals per second, or inf), "
                           "not both")
    _serve_refuse(args, ("batch", "efficiency"), "under load: the engine forms the batches (--max-batch caps "
                                                 "them) and times each iteration's GEMMs by shape")
    for name, default in SERVE_LOAD_ONLY.items():
        setattr(args, name, default if getattr(args, name) is None else getattr(args, name))
    if args.seed < 0:
        raise MlsysimError(f"--seed must be a whole number >= 0, got {args.seed}")
    from .serving import engine, serve
    changes = {k: getattr(args, k) for k in ("max_batch", "max_tokens", "chunked_prefill")
               if getattr(args, k) is not None}
    eng = engine(args.engine, **changes)
    r = serve(args.model, args.hardware, prompt=args.prompt, output=args.output, tp=args.tp,
              precision=args.precision, kv_precision=args.kv_precision, concurrency=args.concurrency,
              rate=args.rate, requests=args.requests, engine=eng, seed=args.seed, prompt_std=args.prompt_std,
              output_std=args.output_std)
    if args.json:
        emit(_json_serve_load(r, kv_precision=args.kv_precision or args.precision,
                              chunked_prefill=eng.chunked_prefill, seed=args.seed), args)
    else:
        emit(r, args)
    return 0


# --- train, checkpoint ------------------------------------------------------------------------

def _add_train(commands) -> None:
    p = commands.add_parser("train", help="fastest parallel layout of a training step on a cluster",
                            description="Search every tensor/pipeline/data-parallel layout, micro-batch, "
                                        "interleave, ZeRO stage and recomputation that fits in memory "
                                        "and report the fastest training step.")
    p.add_argument("model")
    _cluster_args(p)
    p.add_argument("--global-batch", type=int, default=512, help="sequences per step (default 512)")
    p.add_argument("--seq-len", type=int, default=8192, help="tokens per sequence (default 8192)")
    p.add_argument("--tp", help="tensor-parallel degree(s), e.g. 8 or 4,8 (default: search)")
    p.add_argument("--pp", help="pipeline-parallel degree(s) (default: search)")
    p.add_argument("--zero", help="ZeRO stage(s) (default: search 0-3)")
    p.add_argument("--recompute", help="none, selective or full, or a list (default: search)")
    p.add_argument("--recompute-fraction", type=float, default=0.0,
                   help="share of the other layers recomputed in full, 0 to 1 (default 0)")
    p.add_argument("--elementwise", default="fused",
                   help="fused (default) or eager: element-wise kernels fused, or one per PyTorch operator")
    p.add_argument("--efficiency", type=float, default=None, help="achieved fraction of peak in the kernels (default: from each GEMM's shape)")
    p.add_argument("--precision", default="bf16")
    p.add_argument("--grad-precision", default=None,
                   help="format of the gradients, e.g. fp32 as Megatron-LM keeps them with bf16 (default: --precision)")
    p.add_argument("--top", type=int, default=5, help="layouts to rank (default 5)")
    add_json_flag(p)
    p.set_defaults(run=_run_train)


def _json_train(s) -> dict:
    """Keys: schema, model, cluster, accelerators, layout {tp, pp, dp, cp, ep, micro_batch,
    microbatches, interleave, zero_stage, recompute, recompute_fraction, elementwise}, grad_precision, step_s,
    compute_s, comm_s, bubble_s,
    optimizer_s, mfu, hfu, tokens_per_s, memory_per_gpu_B, capacity_B, evaluated, feasible."""
    b = s.best
    return {"schema": "mlsysim.train/1", "model": b.model, "cluster": b.cluster, "accelerators": b.accelerators,
            "layout": {"tp": b.tp, "pp": b.pp, "dp": b.dp, "cp": b.cp, "ep": b.ep, "micro_batch": b.micro_batch,
                       "microbatches": b.microbatches, "interleave": b.interleave, "zero_stage": b.zero_stage,
                       "recompute": b.recompute, "recompute_fraction": b.recompute_fraction,
                       "elementwise": b.elementwise},
            "grad_precision": b.grad_precision or None,
            "step_s": b.step_s, "compute_s": b.compute_s, "comm_s": b.comm_s, "bubble_s": b.bubble_s,
            "optimizer_s": b.optimizer_s, "mfu": b.mfu, "hfu": b.hfu, "tokens_per_s": b.tokens_per_s,
            "memory_per_gpu_B": b.memory_per_gpu_B, "capacity_B": b.memory.capacity_B,
            "evaluated": s.evaluated, "feasible": s.feasible}


def _run_train(args) -> int:
    from .parallel import best_parallelism
    kw = {k: v for k, v in dict(tp=_cands(args.tp), pp=_cands(args.pp), zero_stage=_cands(args.zero),
                                recompute=_cands(args.recompute, str)).items() if v is not None}
    s = best_parallelism(args.model, _cluster_of(args), args.global_batch, args.seq_len, precision=args.precision,
                         efficiency=args.efficiency, top=args.top, recompute_fraction=args.recompute_fraction,
                         elementwise=args.elementwise, grad_precision=args.grad_precision, **kw)
    emit(_json_train(s) if args.json else s, args)
    return 0


def _add_checkpoint(commands) -> None:
    p = commands.add_parser("checkpoint", help="checkpoint size, stall, restore and goodput on a cluster",
                            description="Size of a training checkpoint, its write and restore times on a "
                                        "storage tier, the stall per checkpoint, Daly's interval for the "
                                        "cluster's MTBF, and the goodput that follows.")
    p.add_argument("model")
    _cluster_args(p)
    p.add_argument("--strategy", default="sync", help="sync, async, pipelined or in-memory (default sync)")
    p.add_argument("--step-s", type=float, help="forward and backward seconds per step (pipelined: the copy's window)")
    p.add_argument("--storage", default="lustre", help="lustre, tectonic or s3 (default lustre)")
    p.add_argument("--tp", type=int, default=8, help="tensor-parallel degree (default 8)")
    p.add_argument("--pp", type=int, default=1, help="pipeline-parallel degree (default 1)")
    p.add_argument("--zero", type=int, default=1, help="ZeRO stage (default 1)")
    p.add_argument("--optimizer", default="adamw")
    p.add_argument("--interval", type=float, help="seconds of training between checkpoints (default: Daly's)")
    add_json_flag(p)
    p.set_defaults(run=_run_checkpoint)


def _json_checkpoint(c) -> dict:
    """Keys: schema, model, cluster, strategy, storage, size_B, rank_B, stall_s, write_s, restore_s,
    interval_s, young_s, daly_s, mtbf_s, overhead_fraction, goodput."""
    return {"schema": "mlsysim.checkpoint/1", "model": c.model, "cluster": c.cluster, "strategy": c.strategy,
            "storage": c.storage, "size_B": c.size_B, "rank_B": c.rank_B, "stall_s": c.stall_s,
            "write_s": c.write_s, "restore_s": c.restore_s, "interval_s": c.interval_s, "young_s": c.young_s,
            "daly_s": c.daly_s, "mtbf_s": c.mtbf_s, "overhead_fraction": c.overhead_fraction,
            "goodput": c.goodput}


def _run_checkpoint(args) -> int:
    from .checkpoint import checkpoint
    c = checkpoint(args.model, _cluster_of(args), optimizer=args.optimizer, interval_s=args.interval,
                   strategy=args.strategy, tp=args.tp, pp=args.pp, zero_stage=args.zero, storage=args.storage,
                   step_s=args.step_s)
    emit(_json_checkpoint(c) if args.json else c, args)
    return 0


# --- audit ------------------------------------------------------------------------------------

def _add_audit(commands) -> None:
    p = commands.add_parser(
        "audit", help="audit a training run end to end: every wall, days, energy, carbon, cost",
        description="Audit a training run: layout and step, input pipeline, checkpoints and failures, "
                    "wall clock, energy, carbon and cost, and the binding wall in each domain. Give a "
                    "scenario file (YAML with the arguments of mlsysim.audit and optional 'expect' "
                    "assertions), options, or both (options override the file). Exit status 1 when an "
                    "assertion fails, 2 for bad input, 3 when the configuration cannot run.")
    p.add_argument("scenario", nargs="?", help="YAML scenario file (e.g. examples/llama3_70b_audit.yaml)")
    p.add_argument("--model", help="model name")
    p.add_argument("--cluster", help="cluster preset or node name")
    p.add_argument("--nodes", type=int, help="number of nodes")
    p.add_argument("--fabric", help="scale-out fabric")
    p.add_argument("--tokens", help="training tokens (e.g. 1.4e12 or 1.4T) or 'chinchilla'")
    p.add_argument("--grid", help="electricity grid / region (mlsysim zoo grids)")
    p.add_argument("--global-batch", type=int, help="sequences per step")
    p.add_argument("--seq-len", type=int, help="tokens per sequence")
    p.add_argument("--strategy", help="checkpoint strategy: sync, async, pipelined or in-memory (default: the best)")
    p.add_argument("--storage", help="checkpoint storage tier")
    p.add_argument("--efficiency", type=float, help="achieved fraction of peak in the kernels")
    p.add_argument("--rental", help="rent instead of owning: a cloud offer name or USD per GPU-hour")
    add_json_flag(p)
    p.set_defaults(run=_run_audit)


def _run_audit(args) -> int:
    from .audit import _read_scenario, audit_scenario
    spec = _read_scenario(args.scenario) if args.scenario else {}
    cluster = spec.get("cluster")
    if args.cluster or args.nodes or args.fabric:
        base = cluster if isinstance(cluster, dict) else {"node": cluster} if cluster else {}
        base = {("node" if k == "name" else k): v for k, v in base.items()}
        for k, v in (("node", args.cluster), ("nodes", args.nodes), ("fabric", args.fabric)):
            if v is not None:
                base[k] = v
        spec["cluster"] = base
    for key, value in (("model", args.model), ("tokens", args.tokens and _number(args.tokens)),
                       ("grid", args.grid), ("global_batch", args.global_batch), ("seq_len", args.seq_len),
                       ("strategy", args.strategy), ("storage", args.storage), ("efficiency", args.efficiency),
                       ("rental", args.rental and _number(args.rental))):
        if value is not None:
            spec[key] = value
    if not spec.get("model") or not spec.get("cluster"):
        raise ValueError("give a scenario file or --model and --cluster")
    a = audit_scenario(spec)
    emit(a.to_dict() if args.json else a, args)
    for message in a.failed:
        print(f"mlsysim audit: expectation failed: {message}", file=sys.stderr)
    return 1 if a.failed else 0


# --- lab ---------------------------------------------------------------------------------------

def _add_lab(commands) -> None:
    p = commands.add_parser("lab", help="experiments that run for real on this machine (checkpoint, distributed)",
                            description="Lab experiments: real runs on this machine, measured and set "
                                        "beside the model's prediction.")
    labs = p.add_subparsers(dest="lab", metavar="EXPERIMENT", required=True)
    c = labs.add_parser("checkpoint", help="train a small model, checkpoint it, time the stalls, load it back",
                        description="Train the lab's NumPy language model, checkpoint it every --every "
                                    "steps with the sync or the concurrent engine, load the newest "
                                    "checkpoint back and check that it resumes bit for bit; print the "
                                    "measured stall, save and load times and bandwidths beside what "
                                    "mlsysim.checkpoint predicts for this machine's measured memory and disk.")
    c.add_argument("--framework", default="numpy", choices=("numpy", "torch"),
                   help="numpy: the NumPy language model (default); torch: the PyTorch transformer, "
                        "with torch.save and torch.distributed.checkpoint as baselines (needs the torch extra)")
    c.add_argument("--engine", default="concurrent",
                   help="sync, concurrent (default) or pipelined; with --framework torch also torch.save, "
                        "torch.save+fsync, dcp, dcp-async")
    c.add_argument("--compare", action="store_true",
                   help="with --framework torch: every engine on one state, beside the machine's floors")
    c.add_argument("--repeats", type=int, help="with --framework torch: timed rounds (default 3)")
    c.add_argument("--size-mb", type=float, default=64.0, help="checkpoint size in MB (1e6 B; default 64)")
    c.add_argument("--steps", type=int, help="--framework numpy: training steps (default 20)")
    c.add_argument("--every", type=int, help="--framework numpy: checkpoint every this many steps (default 5)")
    c.add_argument("--dir", help="checkpoint directory (default: a temporary one, removed afterwards)")
    c.add_argument("--buffers", type=int, help="--framework numpy, concurrent engine: checkpoints in flight "
                                               "(default 2)")
    c.add_argument("--keep", type=int, help="--framework numpy: committed checkpoints kept (default 2)")
    add_json_flag(c)
    c.set_defaults(run=_run_lab_checkpoint)

    d = labs.add_parser("distributed", help="a torchrun job checkpointed per rank: kill a rank or a node, reshard",
                        description="Train the lab's PyTorch transformer with torchrun (gloo on this CPU), "
                                    "every rank checkpointing its own shard under a global commit; kill a "
                                    "rank or a whole node and resume, or continue at another world size; "
                                    "print what was measured beside what mlsysim.checkpoint predicts for "
                                    "this machine. Needs the torch extra.")
    d.add_argument("--nproc", type=int, default=2, help="ranks per node (default 2)")
    d.add_argument("--nodes", type=int, default=1, help="torchrun agents on this machine, each a node with "
                                                       "its own memory tier: 1 or 2 (default 1)")
    d.add_argument("--engine", default="concurrent", help="sync, concurrent (this package's, per rank; "
                                                         "default) or dcp, dcp-async (PyTorch's)")
    d.add_argument("--mode", default="fsdp", help="fsdp (sharded, FSDP2; default) or ddp (replicated)")
    d.add_argument("--kill", help="rank: SIGKILL a rank at each named point in turn; random: at a random "
                                  "time; node: a whole node, its memory tier erased (needs --nodes 2)")
    d.add_argument("--reshard-to", type=int, help="stop halfway and continue at this many ranks in all")
    d.add_argument("--steps", type=int, default=8, help="training steps (default 8)")
    d.add_argument("--every", type=int, default=2, help="checkpoint every this many steps (default 2)")
    d.add_argument("--plain-steps", type=int, default=0,
                   help="train the first this many steps without checkpoints, then measure the overhead per "
                        "checkpoint (overhead_s: with --every 4 or more, the first half of each checkpoint's "
                        "interval against its second; else against the plain steps; 2 to steps - 1; default 0: "
                        "not measured)")
    d.add_argument("--seed", type=int, default=0, help="seed of the model, the data order and a random kill")
    d.add_argument("--dir", help="where the runs write (default: a temporary directory, removed afterwards)")
    d.add_argument("--refined", action="store_true",
                   help="also measure this machine's terms for the job (a restore job that times gloo and the "
                        "engines' fixed costs, the disk shared by the ranks, the writers beside busy processes: "
                        "about a minute) and predict the stall, time to durable and overhead with the refined "
                        "model (mlsysim.lab.distributed.terms); needs --plain-steps, --engine concurrent or "
                        "dcp-async and one node, and checkpoints to durable storage only, as the model does")
    add_json_flag(d)
    d.set_defaults(run=_run_lab_distributed)


def _progress_bar(done: int, total: int) -> None:
    """A one-line progress bar on stderr (only on a terminal and for runs of more than a few steps)."""
    if total < 10 or not sys.stderr.isatty():
        return
    width = 30
    filled = width * done // total
    sys.stderr.write(f"\r  training [{'#' * filled}{'.' * (width - filled)}] {done}/{total} steps")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


# flags that only one framework's run reads, with their defaults: a flag the run would not use is refused
NUMPY_ONLY = {"steps": 20, "every": 5, "buffers": 2, "keep": 2}
TORCH_ONLY = {"repeats": 3}


def _refuse_flags(args, names, why: str) -> None:
    """One line naming every given flag in ``names`` that this run would ignore."""
    from .errors import MlsysimError
    given = [f"--{n}" for n in names if getattr(args, n) is not None]
    if given:
        raise MlsysimError(f"{', '.join(given)} {'does' if len(given) == 1 else 'do'} not apply {why}")


def _run_lab_checkpoint(args) -> int:
    if args.framework == "torch":
        _refuse_flags(args, NUMPY_ONLY, "with --framework torch: it saves one training state with each engine "
                                        "in --repeats timed rounds")
        args.repeats = TORCH_ONLY["repeats"] if args.repeats is None else args.repeats
        return _run_lab_checkpoint_torch(args)
    if args.compare:
        from .errors import MlsysimError
        raise MlsysimError("--compare needs --framework torch (it sets PyTorch's own engines beside this package's)")
    _refuse_flags(args, TORCH_ONLY, "to --framework numpy: it trains --steps steps, checkpointing every --every")
    for name, default in NUMPY_ONLY.items():
        setattr(args, name, default if getattr(args, name) is None else getattr(args, name))
    from .lab.engines import ENGINES
    from .lab.experiment import run
    from .errors import MlsysimError, UnknownNameError
    if args.engine not in ENGINES:
        raise UnknownNameError("checkpoint engine", args.engine, ENGINES)
    if not args.size_mb > 0:
        raise MlsysimError(f"--size-mb must be positive, got {args.size_mb}")
    r = run(args.engine, size_B=args.size_mb * 1e6, steps=args.steps, every=args.every, directory=args.dir,
            buffers=args.buffers, keep=args.keep, progress=_progress_bar)
    emit(r.to_dict() if args.json else r, args)
    return 0


def _run_lab_checkpoint_torch(args) -> int:
    from .errors import MlsysimError, UnknownNameError
    _needs_torch("--framework torch")
    from .lab.pytorch.compare import compare
    from .lab.pytorch.engines import ALL_ENGINES
    if not args.compare and args.engine not in ALL_ENGINES:
        raise UnknownNameError("checkpoint engine", args.engine, ALL_ENGINES)
    if not args.size_mb > 0:
        raise MlsysimError(f"--size-mb must be positive, got {args.size_mb}")
    say = (lambda m: print(f"  {m}", file=sys.stderr, flush=True)) if sys.stderr.isatty() else None
    c = compare(args.size_mb * 1e6, engines=ALL_ENGINES if args.compare else (args.engine,),
                repeats=args.repeats, directory=args.dir, progress=say)
    emit(c.to_dict() if args.json else c, args)
    return 0


def _needs_torch(flag: str) -> None:
    """One line naming the extra when PyTorch is not installed (``import torch`` fails)."""
    from .errors import MlsysimError
    try:
        import torch  # noqa: F401  (the optional extra)
    except ImportError:
        raise MlsysimError(f"{flag} needs PyTorch, the optional extra: pip install -e '.[torch]' "
                           "(or pip install -r requirements-lab.txt)") from None


def _run_lab_distributed(args) -> int:
    from .errors import MlsysimError, UnknownNameError
    from .lab.distributed import launcher, refine
    if args.engine not in launcher.ENGINES:
        raise UnknownNameError("distributed checkpoint engine", args.engine, launcher.ENGINES)
    if args.mode not in launcher.MODES:
        raise UnknownNameError("data-parallel mode", args.mode, launcher.MODES)
    if args.kill is not None and args.kill not in launcher.KILLS:
        raise UnknownNameError("--kill", args.kill, launcher.KILLS)
    if args.nodes not in (1, 2):
        raise MlsysimError(f"--nodes must be 1 or 2 (torchrun agents on this machine), got {args.nodes}")
    if args.kill == "node" and args.nodes != 2:
        raise MlsysimError("--kill node needs --nodes 2: the lost node's shards come back from its peer's memory")
    launcher.check_world(args.nproc * args.nodes)
    if args.reshard_to is not None:
        launcher.check_world(args.reshard_to)
    for k in ("steps", "every"):
        if getattr(args, k) < 1:
            raise MlsysimError(f"--{k} must be a positive integer, got {getattr(args, k)}")
    if args.plain_steps and not 2 <= args.plain_steps < args.steps:
        raise MlsysimError(f"--plain-steps must be 0 or from 2 to --steps - 1 ({args.steps - 1}), "
                           f"got {args.plain_steps}")
    if args.plain_steps and (args.kill or args.reshard_to is not None):
        raise MlsysimError("--plain-steps measures the overhead on an uninterrupted run: it cannot go with --kill "
                           "or --reshard-to")
    if args.refined:
        refine.check_refinable(args.engine, args.plain_steps, args.nodes)
    _needs_torch("mlsysim lab distributed")
    r = launcher.run_distributed(nproc=args.nproc, nodes=args.nodes, engine=args.engine, mode=args.mode,
                                 kill=args.kill, reshard_to=args.reshard_to, steps=args.steps, every=args.every,
                                 seed=args.seed, directory=args.dir, predict=True, plain_steps=args.plain_steps,
                                 memory=not args.refined)
    if args.refined:
        r = refine.with_refined(r, args.dir)
    emit(r.to_dict() if args.json else r, args)
    return 0


#: The subcommands' ``_add_<name>`` functions, in the order ``mlsysim --help`` lists them.
COMMANDS = [_add_zoo, _add_roofline, _add_serve, _add_train, _add_checkpoint, _add_audit, _add_assign, _add_score,
            _add_lab]


def parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand of :data:`COMMANDS`."""
    p = argparse.ArgumentParser(prog="mlsysim", description="First-principles models of what bounds "
                                "an ML system, and tools for the course that teaches them.")
    p.add_argument("--version", action="store_true", help="print the package version and exit")
    commands = p.add_subparsers(dest="command", metavar="COMMAND")
    for add in COMMANDS:
        add(commands)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    p = parser()
    args = p.parse_args(argv)
    if args.version:
        from . import __version__
        print(__version__)
        return 0
    if not args.command:
        p.print_help()
        return 2
    from .errors import InfeasibleError
    try:
        return args.run(args)
    except InfeasibleError as e:
        print(f"mlsysim {args.command}: infeasible: {e}", file=sys.stderr)
        if getattr(args, "json", False):
            print(json.dumps({"feasible": False, "reason": getattr(e, "reason", str(e)),
                              "fix": getattr(e, "fix", "")}, indent=2))
        return 3
    except (ValueError, TypeError, OSError) as e:  # MlsysimError is a ValueError
        print(f"mlsysim {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
