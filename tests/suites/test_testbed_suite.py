"""The testbed bench's pure parts: its place in the bench kit, its refusal on a host that
cannot run testbeds (one line, exit 2), the profile design of companion workers, and device
time for the background apps of a dilated cluster."""

from __future__ import annotations

import itertools
import os
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from edgewise.bench import BenchSpec
from edgewise.cli import app
from edgewise.cli.bench import BENCHES, LISTING
from edgewise.runtime.devprofile import _n_workers, device_grid
from edgewise.suites.testbed import SPEC
from edgewise.suites.testbed_update import epochs_for, prediction_errors
from edgewise.update.run import _device_time

runner = CliRunner()


def test_the_suite_is_a_bench_of_the_kit() -> None:
    assert isinstance(SPEC, BenchSpec) and SPEC.name == "testbed"
    assert BENCHES["testbed"] == "edgewise.suites.testbed:SPEC" and LISTING["testbed"]
    assert "up_seconds" in SPEC.contract_timings  # wall-clock: copied from timings


def test_without_root_the_bench_says_why_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)

    result = runner.invoke(app, ["bench", "testbed", "--json"])

    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "root" in lines[0], result.output
    assert "Traceback" not in result.output


def test_an_unknown_part_is_refused_before_anything_is_made() -> None:
    result = runner.invoke(app, ["bench", "testbed", "--parts", "kernel,bogus"])

    assert result.exit_code == 2 and "--parts" in result.output


@given(cpu_levels=st.integers(1, 5), memory_levels=st.integers(1, 4),
       levels=st.lists(st.integers(1, 8), min_size=1, max_size=4, unique=True))
def test_worker_counts_are_not_confounded_with_a_stress_level(
        cpu_levels: int, memory_levels: int, levels: list[int]) -> None:
    grid = list(itertools.product(range(cpu_levels), range(memory_levels)))
    counts = {i: _n_workers(i, levels, memory_levels) for i in range(len(grid))}
    # each CPU level meets as many counts as it has memory levels (up to all of them), and
    # each memory level as many as there are CPU levels
    for c in range(cpu_levels):
        met = {counts[i] for i, (cc, _) in enumerate(grid) if cc == c}
        assert len(met) == min(memory_levels, len(levels))
    for m in range(memory_levels):
        met = {counts[i] for i, (_, mm) in enumerate(grid) if mm == m}
        assert len(met) == min(cpu_levels, len(levels))


def test_a_device_grid_stresses_the_device_memory_not_the_host() -> None:
    grid = device_grid(4096, (0, 50), (0.0, 0.25))

    assert {p.memory_mb for p in grid} == {0, 1024}
    assert {p.cpu_percent for p in grid} == {0, 50}


def test_app_times_of_a_dilated_cluster_are_given_in_device_time() -> None:
    measured = {"app": "sift", "periods": 10, "misses": 2, "exec_ms_p50": 600.0,
                "exec_ms_p95": 900.0, "exec_ms_max": 1200.0, "frames_received": 10}

    device = _device_time(measured, 6.0)

    assert device["exec_ms_p95"] == pytest.approx(150.0)
    assert (device["periods"], device["misses"]) == (10, 2)  # counts are not times


@pytest.mark.parametrize(("predicted_s", "quick", "epochs"), [
    (0.04, False, 51),   # ten 0.2 s periods of 0.04 s epochs, after the first
    (0.16, False, 14),   # ⌈2 / 0.16⌉ = 13 after the first
    (1.0, False, 6),     # at least 5 after the first
    (0.04, True, 18),    # a third of the span: ⌈0.667 / 0.04⌉ = 17
    (5.0, True, 3),      # at least 2 after the first
    (1e-5, False, 400),  # at most 400
])
def test_a_run_spans_ten_app_periods_after_its_first_epoch(predicted_s: float, quick: bool,
                                                           epochs: int) -> None:
    assert epochs_for(predicted_s, 0.2, quick) == epochs


def test_the_error_is_of_the_mean_epoch_and_the_first_is_left_out() -> None:
    # epochs alternating 0.02 and 0.06 around a prediction of 0.04: each errs, the mean not
    of_mean, of_epochs = prediction_errors(0.04, [9.0, 0.02, 0.06, 0.02, 0.06])
    assert of_mean == 0.0
    assert of_epochs == pytest.approx(statistics.median([1.0, 1 / 3, 1.0, 1 / 3]), abs=1e-4)
    assert prediction_errors(0.05, [0.04]) == (0.25, 0.25)  # one epoch: itself
