"""mlsysim: first-principles models of what bounds an ML system.

``import mlsysim as ms`` gives the solvers and registries. The core (units, errors,
registries, records, the roofline) loads with the package; each solver module loads on the
first use of one of its names (``ms.decode`` loads :mod:`mlsysim.serving`), and the
presentation layers (``ms.plots``, ``ms.widgets``, ``ms.exercises``) and the validation
cases (``ms.validation``) and the checkpoint lab (``ms.lab``) on first use too, so that the
import stays fast.
"""
import sys
from importlib import import_module
from types import ModuleType

from . import units
from .errors import InfeasibleError, MlsysimError, UnknownNameError
from .optimizers import Optimizer, TrainingState, training_state
from .registry import cluster, fabric, grid, hardware, model, node, optimizer, zoo
from .roofline import Roofline, crossover_batch, pass_cost, roofline
from .systems import Cluster, Fabric, Grid, Hardware, Node
from .tables import Table, table
from .units import fmt
from .workloads import CNN, Transformer

# --- solver modules: one entry each, loaded on the first use of one of their names ---
_SOLVERS = {
    "serving": ("Generation", "InferenceStep", "PagedKV", "ServingMemory", "ServingPlan", "Speculative",
                "decode", "expected_accepted_tokens", "generate", "kv_cache_bytes", "length_mix",
                "max_batch", "max_context", "min_tp", "paged_kv", "prefill", "serving_memory",
                "serving_plan", "speculative_decode", "ServingRun", "serve", "IterationModel", "iteration_model"),
    "datapipe": ("DataPipe", "datapipe", "host", "input_tier", "pipeline", "pipelines_table",
                 "storage_table", "stored_bytes_per_token"),
    "quantization": ("Quantized", "accuracy_table", "precision_table", "quant_scheme", "quantized",
                     "quantized_footprint", "weight_bytes_per_param"),
    "memory": ("TrainingMemory", "model_states_B", "training_memory"),
    "collectives": ("all_gather_time", "all_to_all_time", "allreduce_time", "broadcast_time",
                    "hierarchical_allreduce_time", "p2p_time", "reduce_scatter_time"),
    "kernels": ("gemm_efficiency", "gemm_time"),
    "elementwise": (),   # ms.elementwise.layer_bytes, loss_bytes: used through train_step(elementwise=...)
    "parallel": ("ParallelSearch", "TrainStep", "best_parallelism", "mfu",
                 "time_to_train_s", "train_step", "training_flops"),
    "reliability": ("cluster_mtbf_h", "daly_interval_s", "ettr", "expected_failures", "lost_work_s",
                    "node_failure_rate_per_h", "p_any_failure", "young_interval_s", "Downtime", "downtime"),
    "checkpoint": ("Checkpoint", "checkpoint", "checkpoint_bytes", "storage_tier", "storage_tiers"),
    "goodput": ("goodput",),
    "sustainability": ("Footprint", "carbon_kg", "embodied_kg", "energy_kwh", "footprint", "it_power_W"),
    "economics": ("TCO", "TrainingRun", "capex_usd", "rental_usd", "tco", "training_run",
                  "usd_per_million_tokens"),
    "reasoning": ("ReasoningService", "Routing", "reasoning_service", "routing"),
    "sensitivity": ("hardware_sensitivity", "inverse_roofline", "scale_hardware", "sensitivity", "solve_for"),
    "wafer": ("weight_streaming", "weights_resident", "wafers_needed"),
    "audit": ("Audit", "AuditInfeasible", "audit", "audit_scenario", "chinchilla_tokens"),
}
_PRESENTATION = ("plots", "widgets", "exercises", "validation", "measure", "lab")
_HOME = {name: module for module, names in _SOLVERS.items() for name in names}

__version__ = "0.1.0"


class _Package(ModuleType):
    def __setattr__(self, name, value):
        # importing mlsysim.checkpoint binds the package's "checkpoint" to that module; the public
        # name is the function the module defines (loaded by __getattr__), so the binding is dropped
        if name in _HOME and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


def __getattr__(name):
    if name in _HOME:
        value = getattr(import_module(f".{_HOME[name]}", __name__), name)
    elif name in _SOLVERS or name in _PRESENTATION:
        value = import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module 'mlsysim' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *_HOME, *_SOLVERS, *_PRESENTATION})


sys.modules[__name__].__class__ = _Package
