"""The example workloads under examples/workloads/ load and pass their dry run as they are,
once their documented data is generated."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from edgewise.nn.workload import load_workload, validate
from edgewise.nn.workload.synthetic import main as synthetic_main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "workloads"


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("examples") / "workloads"
    shutil.copytree(EXAMPLES, root, ignore=shutil.ignore_patterns("data"))
    synthetic_main([str(root / "data" / "shapes"), "--per-class", "10"])
    synthetic_main([str(root / "data" / "shapes.npz"), "--npz", "--per-class", "10"])
    return root


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_example_validates(examples: Path, name: str) -> None:
    workload = load_workload(examples / name)
    dry = validate(workload, batch_size=32)
    assert dry.num_classes in (4, 10) and dry.train_samples > 0
    assert workload.label == name.removesuffix(".yaml")
