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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgewise.nn.workload.dryrun import (
        DryRun,
        build_model,
        example_input,
        resolved,
        validate,
    )
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
    from edgewise.nn.workload.weights import load_weights, save_weights

# Each name is imported from its module when first used (PEP 562): the data side (spec,
# sources) does not import torch, so an actor that only reads data (the data store) starts
# without it.
_WHERE = {
    "DIGITS": "edgewise.nn.workload.spec",
    "DataSource": "edgewise.nn.workload.sources",
    "DataSpec": "edgewise.nn.workload.spec",
    "DryRun": "edgewise.nn.workload.dryrun",
    "Logits": "edgewise.nn.workload.modelbuild",
    "ModelSpec": "edgewise.nn.workload.spec",
    "TaskSpec": "edgewise.nn.workload.spec",
    "Workload": "edgewise.nn.workload.spec",
    "build_model": "edgewise.nn.workload.dryrun",
    "build_network": "edgewise.nn.workload.modelbuild",
    "builtin_names": "edgewise.nn.workload.spec",
    "builtin_workload": "edgewise.nn.workload.spec",
    "check_classes": "edgewise.nn.workload.task",
    "example_input": "edgewise.nn.workload.dryrun",
    "load_weights": "edgewise.nn.workload.weights",
    "load_workload": "edgewise.nn.workload.schema",
    "loss": "edgewise.nn.workload.task",
    "metric_hits": "edgewise.nn.workload.task",
    "open_data": "edgewise.nn.workload.sources",
    "parse_data": "edgewise.nn.workload.spec",
    "parse_model": "edgewise.nn.workload.spec",
    "resolved": "edgewise.nn.workload.dryrun",
    "sample_shape": "edgewise.nn.workload.sources",
    "save_weights": "edgewise.nn.workload.weights",
    "unpack": "edgewise.nn.workload.sources",
    "unwrap": "edgewise.nn.workload.modelbuild",
    "validate": "edgewise.nn.workload.dryrun",
    "workload_from_dict": "edgewise.nn.workload.schema",
    "workload_from_flags": "edgewise.nn.workload.schema",
    "workload_to_dict": "edgewise.nn.workload.schema",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DIGITS", "DataSource", "DataSpec", "DryRun", "Logits", "ModelSpec", "TaskSpec", "Workload",
    "build_model", "build_network", "builtin_names", "builtin_workload", "check_classes",
    "example_input", "load_weights", "load_workload", "loss", "metric_hits", "open_data",
    "parse_data", "parse_model", "resolved", "sample_shape", "save_weights", "unpack", "unwrap",
    "validate", "workload_from_dict", "workload_from_flags", "workload_to_dict",
]  # fmt: skip
