"""What a newcomer meets first: output checks that can fail, figures at 80 columns."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from rich.table import Table

from edgewise.cli.pipeline_run import verdict
from edgewise.cli.render import metrics_table
from edgewise.cli.stages import plain_progress, stage
from edgewise.cli.tables import compact, fitted
from edgewise.cli.workload_models import models_name, planning_models
from edgewise.cli.workload_opts import workload_from_cli
from edgewise.cluster.model import Role
from edgewise.cluster.schema import load_cluster
from edgewise.nn.workload import load_workload
from edgewise.pipeline.workload import (
    compare_outputs,
    model_and_example,
    random_inputs,
    reference_outputs,
)
from edgewise.update import CALIBRATED
from edgewise.wire.activation import ActivationCodec

EXAMPLES = Path(__file__).parents[1] / "examples"

LOSSLESS = ActivationCodec("none")


def _check_of_itself(args: list[str]) -> str:
    """The verdict on MobileNetV2's outputs (3,64,64 inputs, 4 classes) compared with
    themselves, as the README's `pipeline run` example builds it."""
    spec = workload_from_cli("hf:MobileNetV2Config", args=args, weights=None,
                             input_shape="3,64,64", classes=4, workload=None)
    model, example = model_and_example(spec, 0)
    outputs = reference_outputs(model, random_inputs(example, 2, 0))
    return verdict(compare_outputs(outputs, outputs), LOSSLESS)


def test_the_readme_example_checks_outputs_of_ordinary_size() -> None:
    """Transformers' default initialisation (initializer_range 0.02) collapses MobileNetV2's
    outputs to ~4e-22 (a vacuous check: the last case below); the README's example sets 0.3."""
    assert _check_of_itself(["initializer_range=0.3"]) == "equal to the unpartitioned model"


@pytest.mark.parametrize(("diff", "scale", "says"), [
    (0.0, 5.0, "equal to"), (0.5, 5.0, "DIFFERENT from"), (0.0, 1e-22, "vacuous"),
    (1e-23, 3.3e-22, "vacuous")])
def test_the_verdict_reads_the_difference_at_the_outputs_scale(
        diff: float, scale: float, says: str) -> None:
    from edgewise.pipeline.workload import OutputCheck

    assert says in verdict(OutputCheck(diff, 1.0, 8, scale), LOSSLESS)


def test_a_zfp_check_reports_the_top1_agreement() -> None:
    from edgewise.pipeline.workload import OutputCheck

    check = OutputCheck(0.01, 0.875, 8, 3.0)
    assert "top-1 agreement 0.875" in verdict(check, ActivationCodec("zfp", 1e-3))
    assert np.isfinite(check.max_abs_diff)


def _rendered(renderable: object, width: int = 80) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_cluster_up_on_emulation_says_it_shows_the_host() -> None:
    cluster = load_cluster(EXAMPLES / "deep-edge-testbed.yaml")
    host = {"cpu_percent": 100.0, "memory_percent": 27.0, "memory_used_mb": 6518.0,
            "age_seconds": 0.4}
    metrics = {d.name: host for d in cluster.devices}

    text = " ".join(_rendered(metrics_table(cluster, metrics, emulated=True)).split())

    assert "emulated on this host" in text
    assert text.count("6518 MB") == 1 and "this host: cpu 100 %" in text
    assert all(d.name in text for d in cluster.devices)


@pytest.mark.parametrize(("value", "text"), [
    (385_693_001_623.0, "3.86e11"), (1234.56, "1,234.6"), (-2.5e7, "-2.50e7"),
    (float("nan"), "nan")])
def test_compact_numbers_stay_short(value: float, text: str) -> None:
    assert compact(value) == text


def _wide_table(first_column: list[str], columns: int) -> Table:
    table = Table(title="policies")
    table.add_column("method")
    for i in range(columns):
        table.add_column(f"figure number {i}", justify="right")
    for n, name in enumerate(first_column):
        table.add_row(name, *(compact(123_456.7 * (n + 1) * 10 ** (i % 7))
                              for i in range(columns)))
    return table


@pytest.mark.parametrize("columns", [2, 7, 30])
def test_a_table_reads_at_80_columns_without_a_cut_cell(columns: int) -> None:
    names = ["okita", "fifo", "srole-c", "srole-d"]
    table = _wide_table(names, columns)
    console = Console(width=80, record=True, color_system=None)

    text = _rendered(fitted(table, console))

    assert "…" not in text and max(map(len, text.splitlines())) <= 80
    assert all(name in text for name in names)
    for cell in table.columns[-1].cells:
        assert str(cell) in text


def _log() -> Console:
    """A console writing to a file, as when output is redirected to a log."""
    return Console(file=io.StringIO(), width=80, color_system=None)


def test_a_long_step_leaves_plain_lines_in_a_log() -> None:
    log = _log()

    with stage("starting the cluster", log):
        log.print("inside")

    lines = log.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines[0] == "starting the cluster …" and lines[1] == "inside"
    assert re.fullmatch(r"starting the cluster: done in \d+ s", lines[2])


def test_plain_progress_prints_its_first_update_then_one_per_period() -> None:
    log = _log()
    progress = plain_progress("bench ekya", log, period_s=3600.0)

    progress("E1 streams", 0.0)
    progress("E2 accelerators", 0.5)

    lines = log.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines == ["bench ekya: E1 streams, 0 % (0 s)"]
    every = plain_progress("bench ekya", log, period_s=0.0)
    every("E2 accelerators", 0.5)
    assert log.file.getvalue().splitlines()[-1] == "bench ekya: E2 accelerators, 50 % (0 s)"  # type: ignore[attr-defined]


WORKLOAD = EXAMPLES / "workloads" / "shapes-mobilenetv2.yaml"


def test_a_workload_plans_with_its_fitted_models_where_they_exist(tmp_path: Path) -> None:
    cluster = load_cluster(EXAMPLES / "deep-edge-testbed.yaml")
    workload = load_workload(WORKLOAD)
    name = models_name(workload, WORKLOAD)
    types = {d.type for d in cluster.with_role(Role.WORKER)}

    chosen, note = planning_models(workload, WORKLOAD, CALIBRATED, cluster, tmp_path)
    assert chosen == CALIBRATED and note is not None
    assert note.startswith("planning with the digits calibration") and name in note

    for t in types:
        (tmp_path / name / t).mkdir(parents=True)
    assert planning_models(workload, WORKLOAD, CALIBRATED, cluster, tmp_path)[0] == name
    assert planning_models(workload, WORKLOAD, "mine", cluster, tmp_path) == ("mine", None)
    assert planning_models(None, None, CALIBRATED, cluster, tmp_path) == (CALIBRATED, None)
