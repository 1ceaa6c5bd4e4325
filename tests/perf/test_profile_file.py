"""Profile files and the step-time interval (issue 24 §6): a profile recorded before the
quality columns still loads, resumes (gaining the columns, its old rows blank) and fits, the
columns are no model's features, and the summary reports the interval."""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from edgewise.cli.profile import interval_summary, summary_table
from edgewise.perf.calibrated import sample_profile
from edgewise.perf.fitting import fit_models
from edgewise.perf.profile_file import Sample, keys_path, read_samples
from edgewise.perf.profiler import ProfileConfig, ProfileResult, profile, sample_key
from edgewise.perf.schema import COLUMNS, PROFILE_COLUMNS, QUALITY_COLUMNS
from edgewise.perf.stress import StressPoint

DEVICE = "jetson-nano"
IDLE = StressPoint()


def _old_profile(path: Path, n: int = 60) -> list[dict[str, str]]:
    """A profile as recorded before the quality columns: COLUMNS only, with its keys."""
    sample_profile(DEVICE, n, np.random.default_rng(7)).to_csv(path, index=False)
    keys_path(path).write_text("".join(f"old={i}/b=8/r=0\n" for i in range(n)))
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _header(path: Path) -> tuple[str, ...]:
    with path.open(newline="") as fh:
        return tuple(next(csv.reader(fh)))


def _measurer(template: dict[str, str], ci_rel: float
              ) -> Callable[[StressPoint, list[tuple[int, int]], Callable[[Sample], None]],
                            list[Sample]]:
    """Measures each sample as ``template`` with 12 steps and interval ``ci_rel``."""
    def measure(point: StressPoint, items: list[tuple[int, int]],
                record: Callable[[Sample], None]) -> list[Sample]:
        out = []
        for batch, repeat in items:
            row = {c: template.get(c, "") for c in PROFILE_COLUMNS}
            row |= {"batch_size": batch, "steps": 12, "step_time_ci95_rel": ci_rel}
            out.append(Sample(sample_key(point, batch, repeat), row))
            record(out[-1])
        return out
    return measure


def test_an_old_profile_loads_with_blank_quality_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.csv"
    old = _old_profile(path)
    assert _header(path) == COLUMNS

    samples = read_samples(path, DEVICE)

    assert len(samples) == len(old)
    assert all(tuple(s.row) == PROFILE_COLUMNS for s in samples)
    assert all(s.row[c] == "" for s in samples for c in QUALITY_COLUMNS)
    assert [{c: s.row[c] for c in COLUMNS} for s in samples] == old


def test_resuming_an_old_profile_adds_the_columns_and_it_still_fits(tmp_path: Path) -> None:
    path = tmp_path / "old.csv"
    old = _old_profile(path)
    config = ProfileConfig((IDLE,), batch_sizes=(8, 16), device_type=DEVICE)

    result = profile(path, config, measurer=_measurer(old[0], 0.031))

    assert (result.written, len(result.samples)) == (2, len(old) + 2)
    assert _header(path) == PROFILE_COLUMNS
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [{c: r[c] for c in COLUMNS} for r in rows[: len(old)]] == old  # kept as they were
    assert all(r[c] == "" for r in rows[: len(old)] for c in QUALITY_COLUMNS)
    assert [(r["steps"], float(r["step_time_ci95_rel"])) for r in rows[len(old):]] == \
        [("12", 0.031)] * 2
    assert len(keys_path(path).read_text().split()) == len(rows)
    assert not list(tmp_path.glob("*.upgrading"))

    fitted = fit_models(pd.read_csv(path), DEVICE, time_budget_s=None, max_trials=1)
    assert not set(QUALITY_COLUMNS) & {f for feats in fitted.features.values() for f in feats}
    assert {r["function"] for r in fitted.mape} >= {"EstComputeTime", "EstUpdateTime"}


def test_a_profile_without_the_columns_fits_as_before(tmp_path: Path) -> None:
    path = tmp_path / "old.csv"
    _old_profile(path)
    fitted = fit_models(pd.read_csv(path), DEVICE, time_budget_s=None, max_trials=1)
    assert all(r["train"] + r["test"] == 60 for r in fitted.mape)


def _result(widths: list[str], target: float = 0.05) -> ProfileResult:
    samples = tuple(Sample(sample_key(IDLE, 8, i), {"step_time_ci95_rel": w})
                    for i, w in enumerate(widths))
    return ProfileResult(Path("p.csv"), len(widths), 0, samples, target)


def test_the_summary_reports_the_interval_and_the_rows_at_the_cap() -> None:
    summary = interval_summary(_result(["0.02", "0.04", "0.09", "", "0.05"]))
    assert summary == {"target": 0.05, "median": pytest.approx(0.045), "max": 0.09,
                       "above_target": 1, "reported": 4, "unreported": 1}
    caption = str(summary_table(_result(["0.02", "0.04", "0.09", "", "0.05"])).caption)
    assert "±4.5 %" in caption and "±9.0 %" in caption
    assert "1 of 4 rows stopped at the cap above the ±5 % target" in caption
    assert "1 rows recorded without an interval" in caption


def test_a_summary_of_old_rows_says_they_have_no_interval() -> None:
    summary = interval_summary(_result(["", ""]))
    assert (summary["reported"], summary["unreported"], summary["above_target"]) == (0, 2, 0)
    assert math.isnan(summary["median"]) and math.isnan(summary["max"])
    assert "no row reports" in str(summary_table(_result(["", ""])).caption)
