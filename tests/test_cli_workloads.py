"""Every problem command that names a model refuses a Hugging Face Hub name (or any form it
cannot load) with one line and exit 2, before any network access."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from edgewise.cli import app

runner = CliRunner()

HUB = [
    ["pipeline", "analyze", "hf:no/such-model"],
    ["pipeline", "plan", "--model", "google/vit-base-patch16-224"],
    ["pipeline", "run", "--model", "hf:google/mobilenet_v2_1.0_224"],
    ["modelparallel", "place", "--model", "hf:no/such-model", "--rounds", "1"],
    ["modelparallel", "train", "--model", "microsoft/resnet-50", "--rounds", "1"],
    ["continual", "plan", "--student", "hf:no/such-model"],
    ["continual", "run", "--golden", "google/vit-base-patch16-224"],
]


@pytest.mark.parametrize("argv", HUB, ids=lambda a: " ".join(a[:2]))
def test_a_hub_name_is_refused_in_one_line_before_any_network_access(
        no_network: list[Any], argv: list[str]) -> None:
    attempts = no_network
    result = runner.invoke(app, argv)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "nothing is downloaded" in lines[0], result.stderr
    assert "Traceback" not in result.output and attempts == []


@pytest.mark.parametrize(("argv", "says"), [
    (["pipeline", "analyze", "model.pth"], "pickled checkpoint"),
    (["pipeline", "analyze", "py:no_such_module_here:make"], "cannot import"),
    (["pipeline", "analyze", "hf:MobileNetV2Config", "--model-arg", "depth"], "KEY=VALUE"),
    (["pipeline", "analyze", "hf:MobileNetV2Config", "--input-shape", "3,x"], "shape"),
    (["pipeline", "analyze", "resnet-50", "--model", "vgg-16"], "name the model once"),
    (["pipeline", "analyze", "hf:MobileNetV2Config", "--weights", "/no/such.safetensors"],
     "no such file"),
    (["modelparallel", "place", "--model", "no-such-model"], "unknown model"),
    (["continual", "plan", "--student", "hf:MobileNetV2Config", "--input-shape", "3,16,16"],
     "--golden"),
])
def test_bad_model_flags_are_one_line_errors(argv: list[str], says: str) -> None:
    result = runner.invoke(app, argv)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], result.stderr
