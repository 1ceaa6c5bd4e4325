"""SEIFER on the user's own model: a workload spec built (zoo name, ``hf:``, ``py:`` or
``export:``, optional safetensors weights), traced and cut at its candidate points, planned on
a cluster, served by the real pipeline and checked against the unpartitioned model."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from edgewise.cluster.model import Cluster
from edgewise.errors import ConfigError
from edgewise.nn.chain import ModelChain
from edgewise.nn.graph import Example
from edgewise.nn.partition import PartitionedModel, partition_model
from edgewise.nn.workload import DataSpec, Workload, build_model, example_input, load_weights
from edgewise.nn.workload.images import IMAGE_SUFFIXES, decode_images
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem
from edgewise.pipeline.run import PipelineRun, execute
from edgewise.runtime.ray_cluster import RayRuntime
from edgewise.wire.activation import ActivationCodec

__all__ = ["EXACT_ATOL", "VACUOUS_ABS", "OutputCheck", "chain_problem", "compare_outputs",
           "folder_inputs", "model_and_example", "partitioned", "random_inputs",
           "reference_outputs", "serve_and_check", "stage_nodes", "workload_problem"]

_DIGITS_SHAPE = (1, 8, 8)
EXACT_ATOL = 1e-4
"""Lossless pipelined outputs differ from the whole model's by float rounding only (one
thread in a stage, several in the reference): at most this much."""
VACUOUS_ABS = 10 * EXACT_ATOL
"""Reference outputs all this small leave the output check nothing to tell apart."""


def model_and_example(workload: Workload, seed: int = 0) -> tuple[nn.Module, Example]:
    """The workload's model in eval mode (weights loaded strictly when given, else a random
    initialisation from ``seed``) and a batch-1 example input for it.

    Raises
    ------
    ConfigError
        A hub name, an unknown model, weights that do not fit, an unknown input shape.
    """
    spec = workload.model
    if spec.kind == "builtin" and spec.ref != "digits-cnn":
        from edgewise.nn import zoo

        torch.manual_seed(seed)
        model, example = zoo.build(spec.ref)
        if workload.weights is not None:
            load_weights(model, workload.weights)
        return model.eval(), example
    if spec.kind == "builtin" and workload.task.input_shape is None:
        workload = replace(workload, task=replace(workload.task, input_shape=_DIGITS_SHAPE))
    model = build_model(workload, seed=seed).eval()
    return model, example_input(workload, batch=1, seed=seed)


def partitioned(workload: Workload, seed: int = 0,
                dtype_bytes: int = 4) -> tuple[nn.Module, PartitionedModel, torch.Tensor]:
    """The model, its partitioned trace (chain over the single-tensor candidate points) and
    the example tensor a request looks like."""
    model, example = model_and_example(workload, seed)
    pm = partition_model(workload.label, model, example, dtype_bytes)
    tensor = next(iter(example.values())) if isinstance(example, dict) else example
    if not isinstance(tensor, torch.Tensor):
        raise ConfigError("a pipeline request is one tensor", field="model")
    return model, pm, tensor


def random_inputs(example: torch.Tensor, n: int, seed: int = 0) -> list[np.ndarray[Any, Any]]:
    """``n`` requests shaped like ``example``: standard normal floats, or for integer inputs
    (token ids) integers below the example's largest value + 1 (at least 2)."""
    rng = np.random.default_rng(seed)
    shape = tuple(example.shape)
    if example.is_floating_point():
        return [rng.standard_normal(shape).astype(np.float32) for _ in range(n)]
    high = max(int(example.max()) + 1, 2)
    dtype = example.numpy().dtype
    return [rng.integers(0, high, size=shape).astype(dtype) for _ in range(n)]


def folder_inputs(folder: Path, shape: Sequence[int], data: DataSpec | None = None,
                  limit: int | None = None) -> list[np.ndarray[Any, Any]]:
    """The images under ``folder`` (sorted, sub-folders included) decoded with Pillow to
    ``shape`` (C, H, W: resized to cover, centre-cropped) and normalised by the data spec's
    mean and std, one batch-1 request each; at most ``limit`` of them.

    Raises
    ------
    ConfigError
        Field ``--inputs``: no such folder, no image in it, or a shape that is not (C, H, W);
        field ``data``: a corrupt image (named).
    """
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such folder", field="--inputs")
    files = sorted(p for p in folder.rglob("*") if p.is_file()
                   and p.suffix.lower() in IMAGE_SUFFIXES)[:limit]
    if not files:
        raise ConfigError(f"{folder}: no images ({', '.join(sorted(IMAGE_SUFFIXES))})",
                          field="--inputs")
    if len(shape) != 3:
        raise ConfigError(f"images decode to (C, H, W), the model takes {list(shape)}",
                          field="--inputs")
    spec = data or DataSpec("images", folder)
    blobs = [p.read_bytes() for p in files]
    offsets = np.cumsum([0, *map(len, blobs)]).astype(np.int64)
    x = decode_images(np.frombuffer(b"".join(blobs), np.uint8), offsets,
                      tuple(int(d) for d in shape), _channels(spec.mean, shape[0]),
                      _channels(spec.std, shape[0]), [str(p) for p in files])
    return [x[i : i + 1] for i in range(len(x))]


def _channels(values: Sequence[float], channels: int) -> tuple[float, ...]:
    """A per-channel statistic; a single value applies to every channel."""
    return tuple(values) * channels if len(values) == 1 else tuple(values)


def workload_problem(cluster: Cluster, pm: PartitionedModel, *, min_stages: int = 3,
                     node_memory_bytes: int | None = None,
                     dispatcher: str = "dispatcher") -> PipelineProblem:
    """The placement problem of ``pm`` on every device of ``cluster`` but the dispatcher
    (:func:`chain_problem` of its chain)."""
    return chain_problem(cluster, pm.chain, min_stages=min_stages,
                         node_memory_bytes=node_memory_bytes, dispatcher=dispatcher)


def chain_problem(cluster: Cluster, chain: ModelChain, *, min_stages: int = 3,
                  node_memory_bytes: int | None = None, dispatcher: str = "dispatcher",
                  nodes: Sequence[str] | None = None) -> PipelineProblem:
    """The placement problem of ``chain`` on ``nodes`` of ``cluster`` (default: every device
    but the dispatcher), with raw float32 activations (compression 1). Each node offers
    ``node_memory_bytes``; by default just under 1 / (``min_stages`` - 1) of the model's
    memory (no less than its largest segment), so that no plan has fewer than
    ``min_stages`` partitions when the segments allow it.

    Raises
    ------
    ConfigError
        Field ``devices``: a node the cluster lacks, the dispatcher among the nodes, or no
        node at all.
    """
    if node_memory_bytes is None:
        total = sum(chain.memory_bytes)
        share = total if min_stages <= 1 else math.ceil(total / (min_stages - 1)) - 1
        node_memory_bytes = max(share, max(chain.memory_bytes))
    names, bw = stage_nodes(cluster, dispatcher, nodes)
    return PipelineProblem(chain, names, (node_memory_bytes,) * len(names), bw,
                           compression=1.0, dispatcher=dispatcher)


def stage_nodes(cluster: Cluster, dispatcher: str, nodes: Sequence[str] | None = None
                ) -> tuple[tuple[str, ...], np.ndarray[Any, Any]]:
    """The devices that may run stages (``nodes``, default every device but the
    dispatcher) and the bandwidths (Mbps) between the dispatcher and them, dispatcher
    first; ConfigError (``devices``) for a device the cluster lacks, the dispatcher among
    them, or none."""
    names = tuple(d.name for d in cluster.devices if d.name != dispatcher) if nodes is None \
        else tuple(nodes)
    unknown = sorted(set(names) - set(cluster.device_names))
    if unknown:
        raise ConfigError(f"no such device in the cluster: {', '.join(unknown)}",
                          field="devices")
    if not names or dispatcher in names:
        raise ConfigError("the stages need devices other than the dispatcher's",
                          field="devices")
    ends = (dispatcher, *names)
    bw = np.array([[0.0 if a == b else cluster.link(a, b).bandwidth_mbps for b in ends]
                   for a in ends])
    return names, bw


@torch.no_grad()
def reference_outputs(model: nn.Module, inputs: Sequence[np.ndarray[Any, Any]]
                      ) -> list[np.ndarray[Any, Any]]:
    """The unpartitioned model's output for each request, one at a time as the pipeline."""
    return [model(torch.from_numpy(np.ascontiguousarray(x))).numpy() for x in inputs]


@dataclass(frozen=True, slots=True)
class OutputCheck:
    """Pipelined outputs against the unpartitioned model's: the largest absolute
    difference, the share of requests whose top-1 class agrees, how many were compared and
    the largest absolute reference output (the scale the difference is to be read at)."""

    max_abs_diff: float
    top1_agreement: float
    compared: int
    reference_max_abs: float = 0.0


def compare_outputs(outputs: Sequence[np.ndarray[Any, Any]],
                    reference: Sequence[np.ndarray[Any, Any]]) -> OutputCheck:
    """Compare request by request (``inf`` if a result is missing or of another shape)."""
    if len(outputs) != len(reference) or any(
            a.shape != b.shape for a, b in zip(outputs, reference, strict=False)):
        return OutputCheck(float("inf"), 0.0, 0)
    if not outputs:
        return OutputCheck(0.0, 1.0, 0)
    scale = max(float(np.max(np.abs(b))) if b.size else 0.0 for b in reference)
    diff = max(float(np.max(np.abs(a.astype(np.float64) - b))) for a, b in
               zip(outputs, reference, strict=True))
    agree = [np.array_equal(a.reshape(a.shape[0], -1).argmax(-1),
                            b.reshape(b.shape[0], -1).argmax(-1))
             for a, b in zip(outputs, reference, strict=True)]
    return OutputCheck(diff, float(np.mean(agree)), len(outputs), scale)


def serve_and_check(runtime: RayRuntime, problem: PipelineProblem, plan: PipelinePlan,
                    model: nn.Module, pm: PartitionedModel,
                    inputs: Sequence[np.ndarray[Any, Any]], codec: ActivationCodec,
                    ) -> tuple[PipelineRun, OutputCheck]:
    """Deploy ``pm`` cut as ``plan`` says, stream ``inputs`` through it with ``codec`` and
    compare what comes back with the unpartitioned ``model``'s outputs."""
    done = execute(runtime, problem, plan, model=model, inputs=inputs, splitter=pm.splitter,
                   codec=codec)
    return done, compare_outputs(done.outputs, reference_outputs(model, inputs))
