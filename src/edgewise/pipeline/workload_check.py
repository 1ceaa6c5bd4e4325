"""The pipeline figures of `edgewise bench workloads`: real architectures with fixed random
weights saved to and loaded from safetensors, pipelined over at least three stages on
emulated devices, against the unpartitioned model; and a ``torch.export`` program saved,
loaded, partitioned and served."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from edgewise.cluster.schema import cluster_from_dict
from edgewise.nn.workload import build_network, save_weights, workload_from_dict
from edgewise.nn.workload.spec import Workload
from edgewise.pipeline.sim import simulate
from edgewise.pipeline.workload import (
    partitioned,
    random_inputs,
    reference_outputs,
    serve_and_check,
    workload_problem,
)
from edgewise.runtime.ray_cluster import RayRuntime, start_local
from edgewise.wire.activation import ActivationCodec, zfp_available

__all__ = ["CHECK_CLUSTER", "CheckCase", "check_cases", "pipeline_workload_figures"]

#: Four Jetson Nanos and a Raspberry Pi 5 as the dispatcher on a 100 Mbit/s LAN.
CHECK_CLUSTER: dict[str, Any] = {
    "name": "workload-check",
    "default_link": {"bandwidth_mbps": 100, "latency_ms": 0.5},
    "devices": [{"name": f"nano-{i}", "type": "jetson-nano"} for i in range(4)]
    + [{"name": "dispatcher", "type": "raspberry-pi-5", "roles": ["manager"]}],
}
MIN_STAGES = 3
ZFP_TOLERANCE = 1e-3


@dataclass(frozen=True, slots=True)
class CheckCase:
    """One architecture of the check: a name, its workload document (no weights yet)."""

    name: str
    doc: dict[str, Any]


def check_cases(image_size: int = 64, classes: int = 10) -> tuple[CheckCase, ...]:
    """ResNet-50 and MobileNetV2 (transformers' defaults: the published architectures)
    and a small ViT, all on ``image_size``² RGB images and ``classes`` classes."""
    task = {"input_shape": [3, image_size, image_size], "classes": classes}
    vit = {"hidden_size": 96, "num_hidden_layers": 4, "num_attention_heads": 4,
           "intermediate_size": 192, "patch_size": 8}
    return (CheckCase("resnet-50", {"model": "hf:ResNetConfig", "task": task}),
            CheckCase("mobilenet-v2", {"model": "hf:MobileNetV2Config", "task": task}),
            CheckCase("vit", {"model": "hf:ViTConfig", "model_args": vit, "task": task}))


def _with_saved_weights(case: CheckCase, folder: Path, seed: int) -> Workload:
    """The case's workload with weights drawn from ``seed``, saved as safetensors, which
    every later build loads strictly (over an initialisation from another seed)."""
    plain = workload_from_dict({**case.doc, "data": None}, case.name)
    classes = plain.task.num_classes
    model = build_network(plain, seed=seed, num_classes=classes,
                          input_shape=plain.task.input_shape)
    _settle_batchnorm(model, plain.task.input_shape or (), seed)
    path = save_weights(model, folder / f"{case.name}.safetensors")
    return workload_from_dict({**case.doc, "data": None, "weights": str(path)}, case.name)


@torch.no_grad()
def _settle_batchnorm(model: torch.nn.Module, shape: tuple[int, ...], seed: int,
                      batches: int = 4, batch_size: int = 8) -> None:
    """Running statistics of every BatchNorm layer from a few random batches, so that
    activations keep unit scale through the randomly initialised network (transformers
    initialises MobileNetV2's convolutions with std 0.02, and with the initial statistics
    its logits would be about 1e-22, which no difference threshold could judge)."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average over the batches
    generator = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(batches):
        model(torch.randn(batch_size, *shape, generator=generator))
    model.eval()


def _export_program(folder: Path, seed: int, image_size: int) -> tuple[Workload, torch.nn.Module]:
    """A small CNN exported with ``torch.export``, saved as a .pt2 file, and the workload
    that names it (``export:FILE``); the eager module is the reference."""
    torch.manual_seed(seed)
    width = 16
    eager = torch.nn.Sequential(
        torch.nn.Conv2d(3, width, 3, padding=1), torch.nn.BatchNorm2d(width), torch.nn.ReLU(),
        torch.nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(2 * width, 10)).eval()
    program = torch.export.export(eager, (torch.randn(1, 3, image_size, image_size),))
    path = folder / "exported.pt2"
    torch.export.save(program, path)
    return workload_from_dict({"model": f"export:{path}", "data": None,
                               "task": {"input_shape": [3, image_size, image_size]}}), eager


def _pipeline(runtime: RayRuntime, workload: Workload, seed: int, requests: int,
              codecs: dict[str, ActivationCodec],
              reference: torch.nn.Module | None = None) -> dict[str, Any]:
    """Plan with bottleneck-search on the check cluster, serve ``requests`` random inputs
    once per codec, compare with the unpartitioned model (or ``reference``)."""
    model, pm, example = partitioned(workload, seed + 1)
    problem = workload_problem(runtime.cluster, pm, min_stages=MIN_STAGES)
    plan = simulate(problem, "bottleneck-search", seed=seed).plan
    inputs = random_inputs(example, requests, seed)
    scale = float(np.concatenate(reference_outputs(model, inputs)).std())
    row: dict[str, Any] = {"tracer": pm.traced.tracer, "segments": pm.chain.n_segments,
                           "output_std": scale,
                           "stages": plan.n_partitions,
                           "devices": [problem.nodes[i] for i in plan.nodes]}
    for label, codec in codecs.items():
        run, check = serve_and_check(runtime, problem, plan, reference or model, pm, inputs,
                                     codec)
        row[label] = {"max_abs_diff": check.max_abs_diff,
                      "top1_agreement": check.top1_agreement, "results": check.compared,
                      "in_order": run.request_ids == list(range(len(inputs)))}
    return row


@contextmanager
def _runtime() -> Iterator[RayRuntime]:
    runtime = start_local(cluster_from_dict(CHECK_CLUSTER, source="workload-check"))
    try:
        yield runtime
    finally:
        runtime.shutdown()


def pipeline_workload_figures(seed: int = 0, requests: int = 8,
                              image_size: int = 64) -> dict[str, Any]:
    """The pipeline keys of `edgewise bench workloads`, measured on a local Ray instance.

    Returns
    -------
    dict
        ``pipeline_outputs_max_abs_diff``: the largest absolute difference between the
        pipelined (lossless LZ4 frames) and the unpartitioned outputs over every request of
        ResNet-50, MobileNetV2 and a ViT (threshold 1e-4); ``pipeline_zfp_top1_agreement``:
        the share of those requests whose top-1 class is the same with ZFP-compressed
        activations (``ZFP_TOLERANCE``; None without the ``zfpy`` package);
        ``export_roundtrip_ok``: a ``torch.export`` program saved, loaded through
        ``export:FILE``, cut into at least three stages and served gives the eager
        module's outputs; ``pipeline_workloads``: per model its tracer, segments, stages,
        devices and per codec the difference, agreement and result count.
    """
    codecs = {"lz4": ActivationCodec("lz4")}
    if zfp_available():
        codecs["zfp"] = ActivationCodec("zfp", ZFP_TOLERANCE)
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="edgewise-check-") as tmp, _runtime() as runtime:
        folder = Path(tmp)
        for case in check_cases(image_size):
            workload = _with_saved_weights(case, folder, seed)
            rows[case.name] = _pipeline(runtime, workload, seed, requests, codecs)
        exported, eager = _export_program(folder, seed, image_size)
        rows["export"] = _pipeline(runtime, exported, seed, requests,
                                   {"lz4": codecs["lz4"]}, reference=eager)
    models = [rows[c.name] for c in check_cases(image_size)]
    export = rows["export"]
    zfp = [m["zfp"] for m in models] if "zfp" in codecs else []
    return {
        "pipeline_outputs_max_abs_diff": max(m["lz4"]["max_abs_diff"] for m in models),
        "pipeline_min_stages": min(m["stages"] for m in models),
        "pipeline_zfp_top1_agreement": float(np.average(
            [z["top1_agreement"] for z in zfp], weights=[z["results"] for z in zfp]))
        if zfp and sum(z["results"] for z in zfp) else None,
        "pipeline_zfp_tolerance": ZFP_TOLERANCE if zfp else None,
        "export_roundtrip_ok": bool(export["stages"] >= MIN_STAGES and export["lz4"]["in_order"]
                                    and export["lz4"]["results"] == requests
                                    and export["lz4"]["max_abs_diff"] <= 1e-4),
        "pipeline_workloads": rows,
    }
