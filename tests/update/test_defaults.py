"""Each default Deep-Edge's headline turns on is pinned to the source docs/deep-edge.md gives
for it, and checked against what that source claims."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from edgewise.perf import calibrated_constants as K
from edgewise.perf.calibrated import calibrated
from edgewise.update.defaults import DEFAULTS, SOURCES, HeadlineDefaults, default_rows
from edgewise.update.problem import UpdateProblem

DOCS = Path(__file__).resolve().parents[2] / "docs" / "deep-edge.md"
JETSONS = ("jetson-nano", "jetson-tx2")


def _docs_table() -> dict[str, tuple[float, str]]:
    """name → (value, source) from the defaults table of docs/deep-edge.md."""
    rows = {}
    for line in DOCS.read_text().splitlines():
        m = re.match(r"^\| `(\w+)` \| `([0-9.]+)` \| (.+) \|$", line)
        if m and m.group(1) in SOURCES:
            rows[m.group(1)] = (float(m.group(2)), m.group(3))
    return rows


def test_every_default_has_a_source_and_the_docs_give_the_same_value_and_source() -> None:
    names = [f.name for f in fields(HeadlineDefaults)]
    assert sorted(SOURCES) == sorted(names)
    table = _docs_table()
    assert sorted(table) == sorted(names), "docs/deep-edge.md's defaults table is incomplete"
    for name, value, source in default_rows():
        documented, documented_source = table[name]
        assert documented == pytest.approx(value, rel=1e-4), name
        assert documented_source == source, name
        assert source.startswith(("paper ", "ours")), name


def test_defaults_are_what_the_calibrated_models_and_fair_use() -> None:
    nano, tx2 = calibrated("jetson-nano"), calibrated("jetson-tx2")
    assert (nano.sift_base_ms, tx2.sift_base_ms) == (DEFAULTS.sift_base_ms_nano,
                                                     DEFAULTS.sift_base_ms_tx2)
    for model in (nano, tx2):
        assert model.gpu_slowdown == DEFAULTS.gpu_slowdown
        assert model.cpu_slowdown == DEFAULTS.cpu_slowdown
        assert (model.sift_cpu_weight, model.sift_gpu_weight) == (DEFAULTS.sift_cpu_weight,
                                                                   DEFAULTS.sift_gpu_weight)
    field = {f.name: f for f in fields(UpdateProblem)}["user_batch"]
    assert field.default == DEFAULTS.fair_batch


def test_gpu_slope_is_fig_4s_arithmetic() -> None:
    """Fig. 4: initial GPU loads of 66% and 88% add almost 20% to the step."""
    midpoint = (66.0 + 88.0) / 2 / 100
    assert DEFAULTS.gpu_slowdown == pytest.approx(0.20 / midpoint)
    nano = calibrated("jetson-nano")
    idle = nano.idle_state()
    one = np.array([32.0])
    loaded = idle + np.array([[0.0, 77.0, 0.0]])
    assert nano.compute_time(loaded, one)[0] / nano.compute_time(idle, one)[0] == \
        pytest.approx(1.20)


def test_cpu_slowdown_is_ten_percent_at_a_full_stressor() -> None:
    for name in JETSONS:
        model = calibrated(name)
        idle, one = model.idle_state(), np.array([32.0])
        full = idle + np.array([[100.0, 0.0, 0.0]])
        ratio = model.compute_time(full, one)[0] / model.compute_time(idle, one)[0]
        assert ratio == pytest.approx(1.0 + DEFAULTS.cpu_slowdown)


def test_sift_bases_follow_the_cpu_clocks() -> None:
    assert DEFAULTS.sift_base_ms_tx2 / DEFAULTS.sift_base_ms_nano == pytest.approx(1.43 / 2.0,
                                                                                   rel=0.05)
    assert DEFAULTS.sift_gpu_weight == pytest.approx(DEFAULTS.sift_cpu_weight / 2)


@pytest.mark.parametrize("name", JETSONS)
def test_sift_estimates_meet_the_criteria_their_source_states(name: str) -> None:
    """Idle and beside training on an idle board: within 200 ms; heavy training and stress:
    a miss."""
    model = calibrated(name)
    idle = model.idle_state()
    beside = model.new_state(idle, model.max_batch_size(idle).astype(float))
    heavy = np.array([[90.0, 90.0, 60.0]])
    under_heavy = model.new_state(heavy, model.max_batch_size(heavy).astype(float))
    assert model.exec_time("sift", idle)[0] < model.exec_time("sift", beside)[0] <= \
        K.SIFT_PERIOD_MS < model.exec_time("sift", under_heavy)[0]


def test_fair_batch_is_the_profiles_reference_batch() -> None:
    assert DEFAULTS.fair_batch == K.REFERENCE_BATCH
