"""The held-out error of the pressure estimate EstExecTime(EstState(X, b)) (Algorithm 1 line 14)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from edgewise.perf import calibrated_constants as K
from edgewise.perf.calibrated import calibrated, sample_profile
from edgewise.perf.models import held_out
from edgewise.perf.pressure import pressure_mape
from edgewise.perf.schema import PerfModel

NANO = calibrated("jetson-nano")
PROFILE = sample_profile("jetson-nano", 600, np.random.default_rng(3))


@dataclass
class WrongWhenSwapping:
    """The ground truth, except that EstExecTime is doubled above ``limit`` % memory."""

    truth: PerfModel
    limit: float
    device_type: str = "jetson-nano"

    def compute_time(self, state: np.ndarray, batch: np.ndarray) -> np.ndarray:
        return self.truth.compute_time(state, batch)

    def update_time(self, state: np.ndarray, batch: np.ndarray, batch_mean: np.ndarray,
                    ps_cpu: np.ndarray, n_workers: np.ndarray) -> np.ndarray:
        return self.truth.update_time(state, batch, batch_mean, ps_cpu, n_workers)

    def new_state(self, state: np.ndarray, batch: np.ndarray) -> np.ndarray:
        return self.truth.new_state(state, batch)

    def exec_time(self, app_kind: str, new_state: np.ndarray) -> np.ndarray:
        factor = np.where(new_state[:, 2] > self.limit, 2.0, 1.0)
        return self.truth.exec_time(app_kind, new_state) * factor


def _truth_mape(rows: pd.DataFrame) -> float:
    new = NANO.new_state(rows[["cpu", "gpu", "mem"]].to_numpy(), rows["batch_size"].to_numpy())
    predicted = NANO.exec_time("sift", new)
    measured = rows["app_exec_ms"].to_numpy()
    return float(100.0 * np.mean(np.abs(predicted - measured) / measured))


def test_the_ground_truth_errs_by_the_measurement_noise_only() -> None:
    got = pressure_mape(NANO, PROFILE, "sift", mem_limit_percent=85.0, seed=0)
    assert got is not None
    # |exp(σZ) − 1| has mean ≈ 0.8 σ for the profile's log-normal noise σ.
    assert got == pytest.approx(80.0 * K.NOISE_SIGMA["app_exec_ms"], rel=0.35)


def test_only_held_out_rows_within_the_memory_limit_are_scored() -> None:
    rows = PROFILE.loc[held_out(len(PROFILE), 0.16, 7)]
    new_mem = NANO.new_state(rows[["cpu", "gpu", "mem"]].to_numpy(),
                             rows["batch_size"].to_numpy())[:, 2]
    inside = rows.loc[new_mem <= 80.0]
    assert 0 < len(inside) < len(rows)
    wrong = WrongWhenSwapping(NANO, limit=80.0)
    got = pressure_mape(wrong, PROFILE, "sift", mem_limit_percent=80.0, seed=7)
    assert got == pytest.approx(_truth_mape(inside))
    assert pressure_mape(wrong, PROFILE, "sift", mem_limit_percent=100.0, seed=7) == \
        pytest.approx(_truth_mape(rows) + 100.0 * float(np.mean(new_mem > 80.0)), rel=0.05)


def test_no_row_to_score_gives_none() -> None:
    assert pressure_mape(NANO, PROFILE, "sift", mem_limit_percent=0.0) is None
    assert pressure_mape(NANO, PROFILE, "other-app", mem_limit_percent=85.0) is None
