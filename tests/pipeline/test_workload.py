"""SEIFER on a user's own model: `pipeline analyze|plan|run` on a ``py:`` model file with its
safetensors weights and a generated image folder, checked against the unpartitioned model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from edgewise.cli import app
from edgewise.nn.workload import build_network, save_weights, workload_from_dict
from edgewise.nn.workload.synthetic import make_shapes_folder
from edgewise.pipeline.workload import (
    compare_outputs,
    folder_inputs,
    partitioned,
    random_inputs,
    workload_problem,
)

runner = CliRunner()

MODEL = '''
from torch import nn


def make(classes: int = 4, width: int = 6) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
        nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(2 * width, 2 * width, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * width, classes))
'''
SHAPE = [3, 24, 24]


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The user's model file, its weights (seed 7) and a folder of 12 images."""
    root = tmp_path_factory.mktemp("user")
    (root / "mine.py").write_text(MODEL)
    doc = {"model": f"py:{root / 'mine.py'}:make", "data": None,
           "task": {"input_shape": SHAPE, "classes": 4}}
    net = build_network(workload_from_dict(doc), seed=7)
    weights = save_weights(net, root / "mine.safetensors")
    images = make_shapes_folder(root / "images", per_class=3, size=32, seed=2)
    return {"model": root / "mine.py", "weights": weights, "images": images}


def _spec(user: dict[str, Path]) -> list[str]:
    return [f"py:{user['model']}:make", "--weights", str(user["weights"]),
            "--input-shape", ",".join(map(str, SHAPE)), "--classes", "4"]


def test_analyze_lists_the_users_model_points(user: dict[str, Path]) -> None:
    result = runner.invoke(app, ["pipeline", "analyze", *_spec(user), "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    points = found["points"]
    assert points[0]["transfer_bytes"] == 4 * np.prod(SHAPE)  # the input, float32
    assert points[-1]["transfer_bytes"] == 4 * 4  # the 4 logits
    memory = [p["cumulative_memory_bytes"] for p in points]
    assert memory == sorted(memory) and len(points) >= 8


def test_plan_places_the_users_model(user: dict[str, Path]) -> None:
    result = runner.invoke(app, ["pipeline", "plan", *_spec(user), "--nodes", "4",
                                 "--memory-mb", "1", "--json"])
    assert result.exit_code == 0, result.output
    plans = {p["policy"]: p for p in json.loads(result.output)["plans"]}
    assert plans["exact"]["bottleneck_s"] <= plans["seifer"]["bottleneck_s"] * (1 + 1e-12)


def test_weights_are_the_files(user: dict[str, Path]) -> None:
    """The pipeline serves the weights in the file, not a fresh initialisation."""
    doc = {"model": f"py:{user['model']}:make", "data": None,
           "task": {"input_shape": SHAPE, "classes": 4}}
    with_file = partitioned(workload_from_dict({**doc, "weights": str(user["weights"])}), 0)[0]
    seven = build_network(workload_from_dict(doc), seed=7).eval()
    other = partitioned(workload_from_dict(doc), 0)[0]
    x = torch.randn(2, *SHAPE)
    with torch.no_grad():
        assert torch.equal(with_file(x), seven(x)) and not torch.equal(other(x), seven(x))


def test_folder_inputs_decode_to_the_models_shape(user: dict[str, Path]) -> None:
    batch = folder_inputs(user["images"], SHAPE)
    assert len(batch) == 12 and all(b.shape == (1, *SHAPE) for b in batch)
    assert all(b.min() >= -1.0 and b.max() <= 1.0 for b in batch)  # (x - 0.5) / 0.5


def test_problem_memory_forces_at_least_three_stages(user: dict[str, Path],
                                                     small_cluster: object) -> None:
    from edgewise.cluster.model import Cluster
    from edgewise.pipeline.sim import simulate

    assert isinstance(small_cluster, Cluster)
    doc = {"model": f"py:{user['model']}:make", "data": None, "task": {"input_shape": SHAPE}}
    _, pm, _ = partitioned(workload_from_dict(doc))
    problem = workload_problem(small_cluster, pm, min_stages=3, dispatcher="pi5")
    assert sum(pm.chain.memory_bytes) > 2 * problem.memory_bytes[0]
    assert simulate(problem, "exact").plan.n_partitions >= 3


def test_compare_outputs_measures_what_differs() -> None:
    a = [np.array([[1.0, 2.0, 0.0]]), np.array([[3.0, 1.0, 0.0]])]
    b = [np.array([[1.0, 2.5, 0.0]]), np.array([[0.0, 1.0, 2.0]])]
    check = compare_outputs(a, b)
    assert check.max_abs_diff == 3.0 and check.top1_agreement == 0.5 and check.compared == 2
    assert compare_outputs(a, b[:1]).max_abs_diff == float("inf")
    ints = random_inputs(torch.tensor([[5, 9, 2]]), 3, seed=1)
    assert all(i.dtype == np.int64 and i.max() <= 9 for i in ints)


@pytest.mark.ray
def test_run_serves_the_users_model_on_its_images(user: dict[str, Path]) -> None:
    result = runner.invoke(app, ["pipeline", "run", "--model", *_spec(user), "--inputs",
                                 str(user["images"]), "--compression", "lz4", "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["results"] == found["requests"] == 12 and found["in_order"]
    assert found["plan"]["partitions"] >= 3
    assert found["max_abs_diff"] <= 1e-4 < found["reference_max_abs"]
    assert found["outputs_equal_to_the_model"] and found["top1_agreement"] == 1.0
