"""Calibrated device profiles: the paper's anchors, the trends of Fig. 9, SIFT deadlines and
the generated profiles (schema, determinism, noise)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.cluster.catalog import catalog
from edgewise.errors import ConfigError
from edgewise.perf import calibrated_constants as K
from edgewise.perf.calibrated import (
    CALIBRATED_TYPES,
    CalibratedDevice,
    calibrated,
    sample_profile,
)
from edgewise.perf.schema import COLUMNS, PerfModel

ALL_TYPES = sorted(catalog())
GPU_TYPES = [t for t in ALL_TYPES if catalog()[t].accelerator != "none"]
types = st.sampled_from(ALL_TYPES)
load = st.floats(min_value=0.0, max_value=100.0)
powers = st.sampled_from([8.0, 16.0, 32.0, 64.0, 128.0, 256.0])
workers = st.integers(min_value=1, max_value=6)
REF = np.array([float(K.REFERENCE_BATCH)])


def _one(x: float) -> np.ndarray:
    return np.array([x])


def _state(cpu: float, gpu: float, mem: float) -> np.ndarray:
    return np.array([[cpu, gpu, mem]])


def _update(m: CalibratedDevice, cpu: float, b: float, mean: float, ps: float, n: int) -> float:
    return float(m.update_time(_state(cpu, 0.0, 30.0), _one(b), _one(mean), _one(ps),
                               _one(float(n)))[0])


# --- anchors (Fig. 3, Fig. 4) ---------------------------------------------------------------

@pytest.mark.parametrize(("name", "step_s"), [("jetson-nano", 2.69), ("jetson-tx2", 1.89)])
def test_idle_step_time_at_reference_batch_matches_fig3(name: str, step_s: float) -> None:
    model = calibrated(name)
    assert float(model.step_time(model.idle_state(), REF)[0]) == pytest.approx(step_s, rel=0.01)


@pytest.mark.parametrize("name", GPU_TYPES)
def test_gpu_load_of_77_percent_adds_20_percent_step_time(name: str) -> None:
    model = calibrated(name)
    idle = model.idle_state()
    loaded = idle + np.array([[0.0, 77.0, 0.0]])
    ratio = float(model.step_time(loaded, REF)[0] / model.step_time(idle, REF)[0])
    assert ratio == pytest.approx(1.20, abs=0.03)


@pytest.mark.parametrize(("name", "batch"),
                         [("jetson-nano", 64), ("jetson-tx2", 128), ("raspberry-pi-4-4gb", 64)])
def test_max_batch_at_idle_is_memory_bound(name: str, batch: int) -> None:
    model = calibrated(name)
    assert int(model.max_batch_size(model.idle_state())[0]) == batch
    assert model.new_state(model.idle_state(), _one(2.0 * batch))[0, 2] > K.OOM_KILL_PCT


def test_every_catalog_type_is_calibrated_and_a_perf_model() -> None:
    for name in ALL_TYPES:
        model: PerfModel = calibrated(name)
        assert model.device_type == name
    assert set(CALIBRATED_TYPES) <= set(ALL_TYPES)
    with pytest.raises(KeyError, match="known types"):
        calibrated("commodore-64")


# --- the trends of Fig. 9 (§V-B) ------------------------------------------------------------

@given(types, load, load, load, load, powers)
def test_gpu_and_cpu_load_increase_compute_time(name: str, cpu: float, gpu: float, a: float,
                                                b: float, batch: float) -> None:
    m, lo, hi = calibrated(name), min(a, b), max(a, b)

    def t(c: float, g: float) -> float:
        return float(m.compute_time(_state(c, g, 30.0), _one(batch))[0])

    assert t(cpu, lo) <= t(cpu, hi)  # Fig. 9(a)
    assert t(lo, gpu) <= t(hi, gpu)  # Fig. 9(b)
    if hi - lo > 0.01:  # strictly, beyond rounding
        assert t(lo, gpu) < t(hi, gpu)
        assert t(cpu, lo) < t(cpu, hi) or not m.has_gpu


@given(types, load, load, load, powers, powers)
def test_batch_decreases_compute_per_sample_and_increases_memory(
        name: str, cpu: float, gpu: float, mem: float, b1: float, b2: float) -> None:
    m, s, lo, hi = calibrated(name), _state(cpu, gpu, mem), min(b1, b2), max(b1, b2)
    if hi > lo:
        assert m.compute_time(s, _one(hi))[0] < m.compute_time(s, _one(lo))[0]  # Fig. 9(c)
        assert m.new_state(s, _one(hi))[0, 2] > m.new_state(s, _one(lo))[0, 2]  # Fig. 9(d)


@given(types, load, load, load, load, powers)
def test_memory_does_not_affect_compute_time(name: str, cpu: float, gpu: float, m1: float,
                                             m2: float, batch: float) -> None:
    m = calibrated(name)
    assert (m.compute_time(_state(cpu, gpu, m1), _one(batch))[0]
            == m.compute_time(_state(cpu, gpu, m2), _one(batch))[0])


@given(types, load, load, powers, powers, powers, workers)
def test_batch_decreases_update_time(name: str, cpu: float, ps: float, b1: float, b2: float,
                                     mean: float, n: int) -> None:
    m, lo, hi = calibrated(name), min(b1, b2), max(b1, b2)
    if hi > lo:  # Fig. 9(e): own batch, the others' batches, and all of them together
        assert _update(m, cpu, hi, mean, ps, n) < _update(m, cpu, lo, mean, ps, n)
        assert _update(m, cpu, mean, hi, ps, n) <= _update(m, cpu, mean, lo, ps, n)
        assert _update(m, cpu, hi, hi, ps, n) < _update(m, cpu, lo, lo, ps, n)


@given(types, load, load, load, powers, powers, workers, workers)
def test_ps_cpu_and_workers_increase_update_time(name: str, cpu: float, p1: float, p2: float,
                                                 b: float, mean: float, n1: int,
                                                 n2: int) -> None:
    m = calibrated(name)
    if p2 - p1 > 0.01:  # Fig. 9(f)
        assert _update(m, cpu, b, mean, p1, n1) < _update(m, cpu, b, mean, p2, n1)
    if n2 > n1:  # §V-B: more workers, longer updates
        assert _update(m, cpu, b, mean, p1, n1) < _update(m, cpu, b, mean, p1, n2)


@given(types, load, load, load, powers)
def test_training_raises_the_state_and_caps_cpu_and_gpu(name: str, cpu: float, gpu: float,
                                                        mem: float, batch: float) -> None:
    m = calibrated(name)
    gpu = gpu if m.has_gpu else 0.0
    new = m.new_state(_state(cpu, gpu, mem), _one(batch))[0]
    assert np.all(new >= [cpu, gpu, mem])
    assert new[0] <= 100.0 and new[1] <= 100.0


@given(types, load, load, load, load)
def test_sift_slows_with_every_resource(name: str, cpu: float, gpu: float, mem: float,
                                        more: float) -> None:
    m = calibrated(name)

    def e(c: float, g: float, x: float) -> float:
        return float(m.exec_time("sift", _state(c, g, x))[0])

    base = e(cpu, gpu, mem)
    assert base <= e(cpu + more, gpu, mem)
    assert base <= e(cpu, gpu + more, mem)
    assert base <= e(cpu, gpu, mem + more)


# --- SIFT's deadline (§V-A) ------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL_TYPES)
def test_sift_meets_its_deadline_on_an_idle_device(name: str) -> None:
    model = calibrated(name)
    assert float(model.exec_time("sift", model.idle_state())[0]) < K.SIFT_PERIOD_MS


@pytest.mark.parametrize("name", ["jetson-nano", "jetson-tx2"])
def test_sift_meets_its_deadline_beside_training_on_an_idle_jetson(name: str) -> None:
    model = calibrated(name)
    idle = model.idle_state()
    new = model.new_state(idle, model.max_batch_size(idle).astype(np.float64))
    assert float(model.exec_time("sift", new)[0]) < K.SIFT_PERIOD_MS


@pytest.mark.parametrize("name", CALIBRATED_TYPES)
def test_heavy_training_and_stress_make_sift_miss(name: str) -> None:
    model = calibrated(name)
    stressed = _state(90.0, 90.0 if model.has_gpu else 0.0, 60.0)
    batch = model.max_batch_size(stressed).astype(np.float64)
    assert batch[0] > 0  # training still fits: it is the interference that breaks SIFT
    assert float(model.exec_time("sift", model.new_state(stressed, batch))[0]) > 200.0


def test_unknown_app_kind_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="app kind"):
        calibrated("jetson-nano").exec_time("yolo", calibrated("jetson-nano").idle_state())


# --- sample_profile ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL_TYPES)
def test_profile_has_exactly_the_schema_columns_and_valid_rows(name: str) -> None:
    frame = sample_profile(name, 300, np.random.default_rng(1))
    model = calibrated(name)
    assert list(frame.columns) == list(COLUMNS) and len(frame) == 300
    assert set(frame["host"]) == {"calibrated"} and set(frame["app_kind"]) == {"sift"}
    assert set(frame["device_type"]) == {name}
    assert set(frame["batch_size"]) <= {8, 16, 32, 64, 128, 256}
    assert frame["n_workers"].between(1, 6).all()
    state = frame[["cpu", "gpu", "mem"]].to_numpy()
    assert (frame["batch_size"].to_numpy() <= model.max_batch_size(state)).all()
    assert (frame["gpu"] == 0).all() or model.has_gpu


def test_profile_is_deterministic_per_seed() -> None:
    one = sample_profile("jetson-tx2", 200, np.random.default_rng(7))
    two = sample_profile("jetson-tx2", 200, np.random.default_rng(7))
    pd.testing.assert_frame_equal(one, two)
    other = sample_profile("jetson-tx2", 200, np.random.default_rng(8))
    assert not one.equals(other)
    assert len(sample_profile("jetson-tx2", 0, np.random.default_rng(7))) == 0


@pytest.mark.parametrize("name", CALIBRATED_TYPES)
def test_profile_noise_is_log_normal_within_the_documented_band(name: str) -> None:
    frame = sample_profile(name, 4000, np.random.default_rng(3))
    model = calibrated(name)
    state = frame[["cpu", "gpu", "mem"]].to_numpy()
    batch = frame["batch_size"].to_numpy(dtype=np.float64)
    new = model.new_state(state, batch)
    truth = {
        "compute_s_per_sample": model.compute_time(state, batch),
        "update_s": model.update_time(state, batch, frame["batch_mean"].to_numpy(),
                                      frame["ps_cpu"].to_numpy(),
                                      frame["n_workers"].to_numpy(dtype=np.float64)),
        "new_cpu": new[:, 0], "new_gpu": new[:, 1], "new_mem": new[:, 2],
        "app_exec_ms": model.exec_time("sift", new),
    }
    for column, sigma in K.NOISE_SIGMA.items():
        measured = frame[column].to_numpy()
        clipped = column.startswith("new_") & (measured >= 100.0)  # utilisation caps at 100%
        keep = (truth[column] > 0) & ~clipped
        log_ratio = np.log(measured[keep] / truth[column][keep])
        if not model.has_gpu and column == "new_gpu":
            assert keep.sum() == 0
            continue
        assert abs(log_ratio.mean()) < 0.15 * sigma, column
        assert log_ratio.std() == pytest.approx(sigma, rel=0.15), column
        assert np.abs(log_ratio).max() < 5.0 * sigma, column


@settings(max_examples=20, deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_profile_rows_respect_the_memory_limit_before_noise(seed: int) -> None:
    frame = sample_profile("jetson-nano", 50, np.random.default_rng(seed))
    model = calibrated("jetson-nano")
    new = model.new_state(frame[["cpu", "gpu", "mem"]].to_numpy(),
                          frame["batch_size"].to_numpy(dtype=np.float64))
    assert (new[:, 2] <= K.OOM_KILL_PCT).all()


def test_negative_sample_count_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="n_samples"):
        sample_profile("jetson-nano", -1, np.random.default_rng(0))
