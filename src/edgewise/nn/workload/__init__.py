"""The workload spec: a model (built-in, ``hf:``, ``py:`` or ``export:``), optional local
safetensors weights, data (``digits``, ``images:DIR``, ``npz:FILE``) and a task.

One function per use:

- read a spec: :func:`load_workload` (YAML), :func:`workload_from_dict` (HTTP body),
  :func:`workload_from_flags` (CLI flags);
- check it before starting anything: :func:`validate` (a dry run on the driver);
- build the model with its weights: :func:`build_model` (or :func:`build_network` and
  :func:`load_weights` separately), and an input for it: :func:`example_input`;
- open its data and read a shard: :func:`open_data` then ``source.read("train", positions)``.
"""

from edgewise.nn.workload.modelbuild import Logits, build_network, unwrap
from edgewise.nn.workload.schema import (
    load_workload,
    workload_from_dict,
    workload_from_flags,
    workload_to_dict,
)
from edgewise.nn.workload.sources import DataSource, open_data, sample_shape, unpack
from edgewise.nn.workload.spec import (
    DIGITS,
    DataSpec,
    ModelSpec,
    TaskSpec,
    Workload,
    builtin_names,
    builtin_workload,
    parse_data,
    parse_model,
)
from edgewise.nn.workload.task import check_classes, loss, metric_hits
from edgewise.nn.workload.validate import (
    DryRun,
    build_model,
    example_input,
    resolved,
    validate,
)
from edgewise.nn.workload.weights import load_weights, save_weights

__all__ = [
    "DIGITS", "DataSource", "DataSpec", "DryRun", "Logits", "ModelSpec", "TaskSpec", "Workload",
    "build_model", "build_network", "builtin_names", "builtin_workload", "check_classes",
    "example_input", "load_weights", "load_workload", "loss", "metric_hits", "open_data",
    "parse_data", "parse_model", "resolved", "sample_shape", "save_weights", "unpack", "unwrap",
    "validate", "workload_from_dict", "workload_from_flags", "workload_to_dict",
]  # fmt: skip
