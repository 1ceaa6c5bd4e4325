"""The workload spec's input forms (YAML, dict, CLI flags) and its refusals: every bad spec is
one ConfigError naming its field, raised before any file, module or network is touched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edgewise.errors import ConfigError
from edgewise.nn.workload import (
    DIGITS,
    Workload,
    builtin_workload,
    load_workload,
    parse_model,
    workload_from_dict,
    workload_from_flags,
    workload_to_dict,
)

BAD_SPECS: list[tuple[dict[str, Any], str, str]] = [
    ({"model": "hf:no/such-model"}, "model", "Hub"),
    ({"model": "google/mobilenet_v2_1.0_224"}, "model", "Hub"),
    ({"model": "https://huggingface.co/x/y"}, "model", "Hub"),
    ({"model": "resnet50.pth"}, "model", "pickled"),
    ({"model": "resnet-9000"}, "model", "unknown model"),
    ({"model": "py:no_factory_given"}, "model", "py:package.module:factory"),
    ({"model": "py:not a module:make"}, "model", "dotted module"),
    ({"model": "export:model.onnx"}, "model", ".pt2"),
    ({"model": "tf:thing"}, "model", "unknown model kind"),
    ({"data": "csv:/tmp/x.csv"}, "data", "unknown data"),
    ({"data": "images:"}, "data", "unknown data"),
    ({"task": {"classes": 0}}, "task.classes", "at least 1"),
    ({"task": {"classes": ["cat", "cat"]}}, "task.classes", "distinct"),
    ({"task": {"input_shape": [3, 0, 32]}}, "task.input_shape[1]", "greater than 0"),
    ({"task": {"loss": "mse"}}, "task.loss", "cross-entropy"),
    ({"task": {"metric": "f1"}}, "task.metric", "top1"),
    ({"data_args": {"val_fraction": 1.5}}, "data_args.val_fraction", "less than 1"),
    ({"data_args": {"std": [0.0]}}, "data_args.std[0]", "greater than 0"),
    ({"modle": "digits-cnn"}, "modle", "not permitted"),
    ({"batchnorm_momentum": 0}, "batchnorm_momentum", "greater than 0"),
    ({"model": ""}, "model", "at least 1"),
]


@pytest.mark.parametrize(("patch", "field", "says"), BAD_SPECS,
                         ids=[f"{f}:{next(iter(p.values()))}" for p, f, _ in BAD_SPECS])
def test_bad_spec_is_one_config_error_naming_its_field(
        patch: dict[str, Any], field: str, says: str) -> None:
    doc = {"model": "digits-cnn", **patch}
    with pytest.raises(ConfigError) as info:
        workload_from_dict(doc, "bad.yaml")
    assert info.value.field == field, str(info.value)
    assert says.lower() in str(info.value).lower()
    assert "\n" not in str(info.value)
    assert str(info.value).startswith(f"bad.yaml: {field}: ")


def test_missing_model_is_named() -> None:
    with pytest.raises(ConfigError) as info:
        workload_from_dict({"data": "digits"}, "w.yaml")
    assert info.value.field == "model"


def test_not_a_mapping() -> None:
    with pytest.raises(ConfigError, match="mapping"):
        workload_from_dict(["model", "digits-cnn"], "w.yaml")


def test_default_is_digits_cnn_on_digits() -> None:
    assert workload_from_dict({"model": "digits-cnn"}) == DIGITS
    assert builtin_workload("digits-cnn") == DIGITS
    assert DIGITS.is_default_digits and DIGITS.label == "digits-cnn on digits"


def test_model_kinds_parse() -> None:
    hf = parse_model("hf:MobileNetV2Config", {"depth_multiplier": 0.35})
    assert (hf.kind, hf.ref, dict(hf.args)) == ("hf", "MobileNetV2Config",
                                                {"depth_multiplier": 0.35})
    assert parse_model("py:my.models:make").ref == "my.models:make"
    assert parse_model("mobilenet-v2").kind == "builtin"
    exported = parse_model("export:m.pt2", base_dir=Path("/data"))
    assert exported.kind == "export" and exported.ref == "/data/m.pt2"
    assert parse_model("py:lib/m.py:make", base_dir=Path("/w")).ref == "/w/lib/m.py:make"


def test_yaml_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text(
        "name: mine\nmodel: hf:MobileNetV2Config\nmodel_args: {depth_multiplier: 0.35}\n"
        "weights: w/model.safetensors\ndata: images:pics\n"
        "task: {input_shape: [3, 32, 32], classes: [a, b]}\n")
    workload = load_workload(tmp_path / "w.yaml")
    assert workload.weights == tmp_path / "w" / "model.safetensors"
    assert workload.data is not None and workload.data.path == tmp_path / "pics"
    assert workload.task.classes == ("a", "b") and workload.task.input_shape == (3, 32, 32)
    assert workload.label == "mine"


def test_yaml_errors_name_the_file(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text("model: hf:no/such-model\n")
    with pytest.raises(ConfigError) as info:
        load_workload(tmp_path / "w.yaml")
    assert info.value.source == str(tmp_path / "w.yaml") and info.value.field == "model"
    with pytest.raises(ConfigError, match="cannot read"):
        load_workload(tmp_path / "missing.yaml")


def test_round_trip_through_the_dict_form(tmp_path: Path) -> None:
    workload = workload_from_dict({
        "model": "py:pkg.mod:make", "model_args": {"width": 4}, "weights": str(tmp_path / "w.st"),
        "batchnorm_momentum": 0.1,
        "data": f"npz:{tmp_path / 'd.npz'}", "data_args": {"val_fraction": 0.25},
        "task": {"classes": 3, "label_smoothing": 0.1, "metric": "top5"}, "name": "x"})
    again = workload_from_dict(workload_to_dict(workload))
    assert again == workload
    assert workload_from_dict(workload_to_dict(DIGITS)) == DIGITS


def test_inline_flags() -> None:
    workload = workload_from_flags("hf:MobileNetV2Config", "w.safetensors", "images:pics",
                                   model_args={"depth_multiplier": 0.35},
                                   input_shape=(3, 32, 32), classes=4)
    assert isinstance(workload, Workload)
    assert workload.weights == Path("w.safetensors").absolute()
    assert workload.task.num_classes == 4
    with pytest.raises(ConfigError) as info:
        workload_from_flags("hf:no/such-model")
    assert info.value.source == "command line" and info.value.field == "model"
    assert workload_from_flags("digits-cnn", data=None).data is None
