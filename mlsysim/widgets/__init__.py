"""ipywidgets explorers, each wrapping one package function.

An :class:`Explorer` holds named controls, calls its solver whenever a control
changes, and shows a summary table (``summary``, an HTML widget) and a figure
(``output``). Everything the reader sees is kernel-side state, so tests drive
an explorer by setting ``explorer.controls[name].value`` and reading
``explorer.result`` or ``explorer.summary.value`` — no browser needed.
An infeasible configuration shows its error message instead of numbers.

The explorers live in one module per part of the course, and every public name is importable
from ``mlsysim.widgets`` (which lists them in ``__all__``, the order of this page):

* ``mlsysim.widgets.one_device`` — one device (notebooks 00–05): roofline, generations,
  prefill and decode, KV cache, input pipeline, quantization.
* ``mlsysim.widgets.serving`` — serving under load (03): a stream of requests through a
  continuous-batching engine.
* ``mlsysim.widgets.many_devices`` — many devices (06): parallel layouts, scaling, checkpointing.
* ``mlsysim.widgets.operations`` — operations (07, 08): regions, reasoning depth.
* ``mlsysim.widgets.analysis`` — analysis (09, 10) and the audit (11).
* ``mlsysim.widgets.labs`` — the labs' models (06a, 06b, 06c).
"""
from ._common import Explorer
from .one_device import (datapipe_explorer, generations_explorer, kv_explorer, quantization_explorer,
                         roofline_explorer, serving_explorer)
from .serving import serving_load_explorer
from .many_devices import CHECKPOINT_LAYOUTS, checkpoint_explorer, parallel_explorer, scaling_explorer
from .operations import GEOGRAPHY_REGIONS, REASONING_DEVICES, geography_explorer, reasoning_explorer
from .analysis import audit_explorer, sensitivity_explorer, wafer_explorer
from .labs import DIST_MODES, lab_checkpoint_explorer, lab_dist_explorer, lab_engines_explorer

__all__ = [
    "Explorer",
    "roofline_explorer", "generations_explorer", "serving_explorer", "kv_explorer", "datapipe_explorer",
    "quantization_explorer",
    "serving_load_explorer",
    "parallel_explorer", "scaling_explorer", "CHECKPOINT_LAYOUTS", "checkpoint_explorer",
    "GEOGRAPHY_REGIONS", "geography_explorer", "REASONING_DEVICES", "reasoning_explorer",
    "sensitivity_explorer", "wafer_explorer", "audit_explorer",
    "lab_checkpoint_explorer", "lab_engines_explorer", "DIST_MODES", "lab_dist_explorer",
]
