"""mlsysim: first-principles models of what bounds an ML system.

``import mlsysim as ms`` gives the solvers and registries; the presentation
layers (``ms.plots``, ``ms.widgets``, ``ms.exercises``) and the validation
cases (``ms.validation``) load on first use so that the import stays fast.
"""
from importlib import import_module

from . import units
from .errors import InfeasibleError, MlsysimError, UnknownNameError
from .optimizers import Optimizer, TrainingState, training_state
from .registry import cluster, fabric, grid, hardware, model, node, optimizer, zoo
from .roofline import Roofline, crossover_batch, pass_cost, roofline
from .systems import Cluster, Fabric, Grid, Hardware, Node
from .tables import Table, table
from .units import fmt
from .workloads import CNN, Transformer

# --- one import line per solver module; keep the blank lines between them ---
from .serving import (Generation, InferenceStep, PagedKV, ServingMemory, ServingPlan, Speculative, decode,
                      expected_accepted_tokens, generate, kv_cache_bytes, length_mix, max_batch, max_context,
                      min_tp, paged_kv, prefill, serving_memory, serving_plan, speculative_decode)

from .datapipe import (DataPipe, datapipe, host, input_tier, pipeline, pipelines_table, storage_table,
                       stored_bytes_per_token)

from .quantization import (Quantized, accuracy_table, precision_table, quant_scheme, quantized,
                           quantized_footprint, weight_bytes_per_param)

from .memory import TrainingMemory, model_states_B, training_memory

from .collectives import (all_gather_time, all_to_all_time, allreduce_time, broadcast_time,
                          hierarchical_allreduce_time, p2p_time, reduce_scatter_time)

from .parallel import (DEFAULT_EFFICIENCY, ParallelSearch, TrainStep, best_parallelism, mfu, time_to_train_s,
                       train_step, training_flops)

from .reliability import (cluster_mtbf_h, daly_interval_s, ettr, expected_failures, goodput, lost_work_s,
                          node_failure_rate_per_h, p_any_failure, young_interval_s)

from .checkpoint import Checkpoint, checkpoint, checkpoint_bytes, storage_tier, storage_tiers

from .sustainability import Footprint, carbon_kg, embodied_kg, energy_kwh, footprint, it_power_W

from .economics import TCO, TrainingRun, capex_usd, rental_usd, tco, training_run, usd_per_million_tokens

from .reasoning import ReasoningService, Routing, reasoning_service, routing

from .sensitivity import hardware_sensitivity, inverse_roofline, scale_hardware, sensitivity, solve_for

from .wafer import weight_streaming, weights_resident, wafers_needed

from .audit import Audit, AuditInfeasible, audit, audit_scenario, chinchilla_tokens

__version__ = "0.1.0"

_LAZY = {"plots", "widgets", "exercises", "validation", "measure", "lab"}


def __getattr__(name):
    if name in _LAZY:
        module = import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'mlsysim' has no attribute {name!r}")
