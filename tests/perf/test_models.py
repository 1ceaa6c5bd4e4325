"""Tests of the learned performance models: fitting, MAPE, save/load guards, GetMaxBatchSize."""

from __future__ import annotations

import json
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
import xgboost as xgb
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray
from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor

from edgewise.errors import ConfigError
from edgewise.perf.model_io import read_regressor, write_regressor
from edgewise.perf.models import (
    FUNCTIONS,
    LearnedDevice,
    exec_key,
    fit_models,
    get_max_batch_size,
    load,
    mape_markdown,
    mape_table,
    save,
)
from edgewise.perf.regressors import from_estimator
from edgewise.perf.schema import COLUMNS, PerfModel

Array = NDArray[np.float64]
BATCHES = np.array([8, 16, 32, 64, 128], dtype=float)


def synthetic_profile(device_type: str, n: int, seed: int, *, gpu: bool = True) -> pd.DataFrame:
    """Rows with the schema's columns and smooth, known relationships (1 % noise)."""
    rng = np.random.default_rng(seed)
    cpu, mem, ps_cpu = rng.uniform(0, 60, n), rng.uniform(10, 60, n), rng.uniform(0, 80, n)
    g = rng.uniform(0, 60, n) if gpu else np.zeros(n)
    batch = rng.choice(BATCHES, n)
    workers = rng.integers(1, 5, n).astype(float)

    def noise() -> Array:
        return rng.normal(1.0, 0.01, n)

    new_cpu = (cpu + 20 + 0.1 * batch) * noise()
    new_gpu = (g + 30 * (1 - np.exp(-batch / 32))) * noise() if gpu else np.zeros(n)
    new_mem = (mem + 0.2 * batch + 5) * noise()
    return pd.DataFrame({
        "device_type": device_type, "host": "synthetic", "cpu": cpu, "gpu": g, "mem": mem,
        "batch_size": batch, "n_workers": workers, "batch_mean": batch, "ps_cpu": ps_cpu,
        "ps_gpu": 0.0, "ps_mem": 30.0,
        "compute_s_per_sample": 0.02 * (1 + cpu / 100) * (1 + g / 100) * (1 + 8 / batch) * noise(),
        "update_s": 0.2 * (1 + ps_cpu / 200) * (1 + 0.1 * workers) * (1 + 4 / batch) * noise(),
        "new_cpu": new_cpu, "new_gpu": new_gpu, "new_mem": new_mem,
        "app_kind": "sift",
        "app_exec_ms": 50 * (1 + new_cpu / 100 + 0.5 * new_gpu / 100 + 0.2 * new_mem / 100)
        * noise(),
    }, columns=list(COLUMNS))


@pytest.fixture(scope="module")
def nano() -> LearnedDevice:
    # A trial count, not wall time, bounds the search: the test does not depend on load.
    return fit_models(synthetic_profile("jetson-nano", 400, 1), "jetson-nano",
                      time_budget_s=None, max_trials=20)


@pytest.fixture(scope="module")
def pi() -> LearnedDevice:
    return fit_models(synthetic_profile("raspberry-pi-5", 200, 2, gpu=False), "raspberry-pi-5",
                      time_budget_s=None, max_trials=8)


def _inputs(n: int, seed: int) -> dict[str, Array]:
    rng = np.random.default_rng(seed)
    return {"state": np.column_stack([rng.uniform(0, 60, n), rng.uniform(0, 60, n),
                                      rng.uniform(10, 60, n)]),
            "batch": rng.choice(BATCHES, n), "ps_cpu": rng.uniform(0, 80, n),
            "workers": rng.integers(1, 5, n).astype(float)}


def _all_predictions(model: PerfModel, n: int = 50) -> list[Array]:
    i = _inputs(n, 7)
    new = model.new_state(i["state"], i["batch"])
    return [model.compute_time(i["state"], i["batch"]),
            model.update_time(i["state"], i["batch"], i["batch"], i["ps_cpu"], i["workers"]),
            new, model.exec_time("sift", new)]


def test_fit_reaches_table_i_accuracy_on_smooth_targets(nano: LearnedDevice) -> None:
    rows = {r["function"]: r for r in nano.mape}
    assert set(rows) == {*FUNCTIONS, exec_key("sift")}
    for row in rows.values():
        assert (row["train"], row["test"]) == (336, 64)
        assert row["mape_mean"] is not None and row["mape_mean"] <= 10.0, row
        assert row["estimator"] in ("lgbm", "xgboost", "rf", "extra_tree")
    assert nano.versions["flaml"] and nano.trained_at


def test_same_seed_and_trial_count_give_the_same_models(pi: LearnedDevice) -> None:
    again = fit_models(synthetic_profile("raspberry-pi-5", 200, 2, gpu=False), "raspberry-pi-5",
                       time_budget_s=None, max_trials=8)
    assert [r["mape_mean"] for r in again.mape] == [r["mape_mean"] for r in pi.mape]
    for before, after in zip(_all_predictions(pi), _all_predictions(again), strict=True):
        np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize(("settings_", "field"), [
    ({"time_budget_s": None}, "max_trials"), ({"time_budget_s": 0.0}, "time_budget_s"),
    ({"max_trials": 0}, "max_trials"), ({"test_fraction": 0.5}, "test_fraction")])
def test_bad_search_settings_raise(settings_: dict[str, float | None], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        fit_models(synthetic_profile("jetson-nano", 60, 3), "jetson-nano", **settings_)  # type: ignore[arg-type]
    assert info.value.field == field


def test_predictions_are_clamped_and_shaped(nano: LearnedDevice) -> None:
    compute, update, new, exec_ms = _all_predictions(nano)
    assert compute.shape == update.shape == exec_ms.shape == (50,) and new.shape == (50, 3)
    assert (compute > 0).all() and (update > 0).all() and (exec_ms > 0).all()
    hot = nano.new_state(np.array([[100.0, 100.0, 100.0]]), np.array([128.0]))
    assert ((hot >= 0) & (hot <= 100)).all()


def test_exec_time_for_an_unfitted_app_raises(nano: LearnedDevice) -> None:
    assert nano.app_kinds == ("sift",)
    with pytest.raises(ConfigError, match="no EstExecTime") as info:
        nano.exec_time("yolo", np.array([[50.0, 50.0, 50.0]]))
    assert info.value.field == "app_kind"


def test_constant_target_gets_a_constant_predictor(pi: LearnedDevice) -> None:
    row = next(r for r in pi.mape if r["function"] == "EstState^gpu")
    assert row["estimator"] == "constant" and "constant" in row["note"]
    assert row["mape_mean"] is None  # zero target: no percentage error
    assert (pi.new_state(np.array([[10.0, 0.0, 20.0]]), np.array([32.0]))[:, 1] == 0).all()


def test_save_load_round_trip_predicts_identically(nano: LearnedDevice, pi: LearnedDevice,
                                                   tmp_path: Path) -> None:
    for model in (nano, pi):
        save(model, tmp_path / model.device_type)
        loaded = load(tmp_path / model.device_type, model.device_type)
        for before, after in zip(_all_predictions(model), _all_predictions(loaded), strict=True):
            np.testing.assert_array_equal(before, after)
        assert loaded.mape == model.mape and loaded.features == model.features


@pytest.mark.parametrize("name", ["lgbm", "xgboost", "rf", "extra_tree"])
def test_every_native_format_round_trips_exactly(name: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x = pd.DataFrame(rng.uniform(0, 100, (200, 3)), columns=["cpu", "gpu", "batch_size"])
    y = x["cpu"] * 0.3 + np.sqrt(x["batch_size"])
    estimator = {"lgbm": lgb.LGBMRegressor(n_estimators=20, verbose=-1, n_jobs=1),
                 "xgboost": xgb.XGBRegressor(n_estimators=20, n_jobs=1),
                 "rf": RandomForestRegressor(n_estimators=5, random_state=0),
                 "extra_tree": ExtraTreesRegressor(n_estimators=5, random_state=0)}[name]
    estimator.fit(x, y)
    regressor = from_estimator(name, estimator)
    np.testing.assert_allclose(regressor.predict(x), estimator.predict(x), rtol=1e-6)
    entry = write_regressor(tmp_path, "EstComputeTime", regressor, ("cpu", "gpu", "batch_size"))
    loaded = read_regressor(tmp_path, "EstComputeTime", entry)
    np.testing.assert_array_equal(loaded.predict(x), regressor.predict(x))


def test_load_for_another_device_type_raises(nano: LearnedDevice, tmp_path: Path) -> None:
    save(nano, tmp_path)
    with pytest.raises(ConfigError, match="never applied to jetson-tx2") as info:
        load(tmp_path, "jetson-tx2")
    assert info.value.field == "device_type"


def test_changed_schema_in_manifest_raises(nano: LearnedDevice, tmp_path: Path) -> None:
    manifest_path = save(nano, tmp_path)
    manifest = json.loads(manifest_path.read_text())
    manifest["functions"]["EstComputeTime"]["features"] = ["cpu", "batch_size"]
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="refit") as info:
        load(tmp_path, "jetson-nano")
    assert info.value.field == "functions.EstComputeTime.features"


def test_tampered_model_file_raises(nano: LearnedDevice, tmp_path: Path) -> None:
    manifest = json.loads(save(nano, tmp_path).read_text())
    model_file = tmp_path / manifest["functions"]["EstUpdateTime"]["file"]
    model_file.write_bytes(model_file.read_bytes() + b" ")
    with pytest.raises(ConfigError, match="SHA-256") as info:
        load(tmp_path, "jetson-nano")
    assert info.value.field == "functions.EstUpdateTime.sha256"


def test_manifest_file_name_cannot_leave_the_directory(nano: LearnedDevice,
                                                       tmp_path: Path) -> None:
    manifest_path = save(nano, tmp_path / "m")
    manifest = json.loads(manifest_path.read_text())
    manifest["functions"]["EstUpdateTime"]["file"] = "../elsewhere.txt"
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="plain file name"):
        load(tmp_path / "m", "jetson-nano")


def test_mixed_device_types_raise_naming_the_field() -> None:
    profile = synthetic_profile("jetson-nano", 60, 3)
    profile.loc[5, "device_type"] = "jetson-tx2"
    with pytest.raises(ConfigError, match="jetson-tx2") as info:
        fit_models(profile, "jetson-nano", time_budget_s=1.0)
    assert info.value.field == "device_type"


def test_missing_columns_raise_naming_the_field() -> None:
    profile = synthetic_profile("jetson-nano", 60, 3).drop(columns=["ps_cpu"])
    with pytest.raises(ConfigError) as info:
        fit_models(profile, "jetson-nano", time_budget_s=1.0)
    assert info.value.field == "ps_cpu"


def test_too_few_rows_and_non_finite_values_raise() -> None:
    with pytest.raises(ConfigError, match="at least"):
        fit_models(synthetic_profile("jetson-nano", 10, 3), "jetson-nano", time_budget_s=1.0)
    profile = synthetic_profile("jetson-nano", 60, 3)
    profile.loc[3, "update_s"] = np.nan
    with pytest.raises(ConfigError) as info:
        fit_models(profile, "jetson-nano", time_budget_s=1.0)
    assert info.value.field == "update_s"


def test_mape_table_labels_rows_and_renders(nano: LearnedDevice, pi: LearnedDevice) -> None:
    rows = mape_table({"Nano": nano, "Pi": pi})
    assert len(rows) == len(nano.mape) + len(pi.mape)
    assert {r["device"] for r in rows} == {"Nano", "Pi"}
    text = mape_markdown(rows)
    assert "| Nano | EstComputeTime | 336/64 |" in text and "| — |" in text


class LinearMemory:
    """Analytic PerfModel stub: memory grows by ``per_sample`` percent per sample."""

    device_type = "stub"

    def __init__(self, per_sample: float) -> None:
        self.per_sample = per_sample

    def compute_time(self, state: Array, batch: Array) -> Array:
        return np.ones(len(state))

    def update_time(self, state: Array, batch: Array, batch_mean: Array, ps_cpu: Array,
                    n_workers: Array) -> Array:
        return np.ones(len(state))

    def new_state(self, state: Array, batch: Array) -> Array:
        out = np.array(state, dtype=np.float64, copy=True)
        out[:, 2] = np.minimum(100.0, state[:, 2] + self.per_sample * batch)
        return out

    def exec_time(self, app_kind: str, new_state: Array) -> Array:
        return np.ones(len(new_state))


def _brute_force(model: LinearMemory, mem: float, b_min: int, b_max: int, limit: float) -> int:
    b = b_max
    while True:
        if model.new_state(np.array([[0.0, 0.0, mem]]), np.array([float(b)]))[0, 2] <= limit:
            return b
        if b == b_min:
            return 0
        b = b // 2 if b // 2 >= b_min else b_min


def test_get_max_batch_size_worked_example() -> None:
    model = LinearMemory(per_sample=1.0)
    state = np.array([[0.0, 0.0, 50.0], [0.0, 0.0, 10.0], [0.0, 0.0, 90.0]])
    # 50 + 64 > 95, 50 + 32 fits; 10 + 64 fits; 90 + 8 > 95 at b_min = 8.
    assert get_max_batch_size(model, state, 8, 64).tolist() == [32, 64, 0]
    with pytest.raises(ConfigError):
        get_max_batch_size(model, state, 0, 64)


@settings(max_examples=150, deadline=None)
@given(mems=st.lists(st.floats(0, 100), min_size=1, max_size=8),
       per_sample=st.floats(0.01, 5.0), b_min=st.integers(1, 64), span=st.integers(0, 300),
       limit=st.floats(1.0, 100.0))
def test_get_max_batch_size_matches_brute_force(mems: list[float], per_sample: float, b_min: int,
                                                span: int, limit: float) -> None:
    model, b_max = LinearMemory(per_sample), b_min + span
    state = np.column_stack([np.zeros(len(mems)), np.zeros(len(mems)), mems])
    got = get_max_batch_size(model, state, b_min, b_max, limit)
    for mem, b in zip(mems, got.tolist(), strict=True):
        assert b == _brute_force(model, mem, b_min, b_max, limit)
        assert (b == 0) == (min(100.0, mem + per_sample * b_min) > limit)  # 0 iff b_min fails


def test_get_max_batch_size_on_learned_models(nano: LearnedDevice) -> None:
    state = np.array([[10.0, 10.0, 20.0], [10.0, 10.0, 95.0]])
    got = get_max_batch_size(nano, state, 8, 128, mem_limit_percent=60.0)
    assert got[1] == 0 and got[0] in (8, 16, 32, 64, 128)
    assert (nano.new_state(state[:1], got[:1].astype(float))[:, 2] <= 60.0).all()
