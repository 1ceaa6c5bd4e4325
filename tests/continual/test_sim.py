"""The trace-driven simulator and the profile CSV files."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from edgewise.continual.example import table1_trace
from edgewise.continual.policies import get_policy
from edgewise.continual.policies.uniform import uniform_policy
from edgewise.continual.profiles import Curve, Trace, load_trace, write_trace
from edgewise.continual.sim import TraceProblem, first_decision, simulate
from edgewise.continual.synthetic import synthetic_trace
from edgewise.errors import ConfigError

RNG = np.random.default_rng(0)


def test_csv_round_trip(tmp_path: Path) -> None:
    trace = synthetic_trace(3, 2, seed=5)
    back = load_trace(write_trace(trace, tmp_path / "t"))
    assert back.streams == trace.streams and back.configs == tuple(sorted(trace.configs))
    assert back.windows == 2 and back.subsampling == trace.subsampling
    key = (1, "s02", trace.configs[4])
    assert back.curves[key].final == pytest.approx(trace.curves[key].final, rel=1e-5)
    assert back.curves[key].cost_s == pytest.approx(trace.curves[key].cost_s, rel=1e-5)
    a = simulate(TraceProblem(trace, 2.0), "thief")
    b = simulate(TraceProblem(back, 2.0), "thief")
    assert np.allclose(a.accuracy, b.accuracy, atol=1e-4)


def test_bad_csv_names_the_file_and_field(tmp_path: Path) -> None:
    write_trace(synthetic_trace(2, 1, seed=0), tmp_path)
    (tmp_path / "drift.csv").write_text("window,stream\n0,s00\n")
    with pytest.raises(ConfigError, match=r"drift\.csv.*retained"):
        load_trace(tmp_path)
    with pytest.raises(ConfigError, match="not found"):
        load_trace(tmp_path / "missing")


def test_same_seed_same_numbers_and_shapes() -> None:
    trace = synthetic_trace(5, 3, seed=2)
    a = simulate(TraceProblem(trace, 2.0, window_s=200.0), get_policy("thief"))
    b = simulate(TraceProblem(synthetic_trace(5, 3, seed=2), 2.0), "thief")
    assert a.accuracy.shape == (3, 5)
    assert np.array_equal(a.accuracy, b.accuracy)
    assert ((a.accuracy >= 0) & (a.accuracy <= 1)).all()


def test_policy_reruns_when_a_retraining_completes() -> None:
    result = simulate(TraceProblem(table1_trace(), 3.0, 120.0, 0.25, 0.4), "thief")
    times = [(w, t) for w, t, _ in result.plans]
    # window 1: B's Cfg2 ends at 50 s on one GPU, then A's Cfg2 at 50 + 65 s
    assert times[:3] == [(0, 0.0), (0, pytest.approx(50.0)), (0, pytest.approx(115.0))]
    assert result.plans[1][2].decision("B").retrain is None  # B has retrained: no job left
    assert result.plans[1][2].decision("A").retrain == "Cfg2"


def test_more_accelerators_never_hurt_the_thief() -> None:
    trace = synthetic_trace(6, 2, seed=4)
    acc = [simulate(TraceProblem(trace, g), "thief").mean_accuracy for g in (1.0, 2.0, 4.0)]
    assert acc[0] < acc[1] < acc[2]


def test_windows_argument_is_checked() -> None:
    with pytest.raises(ConfigError, match="windows"):
        TraceProblem(table1_trace(), 3.0, windows=3)
    with pytest.raises(ConfigError, match="accelerators"):
        TraceProblem(table1_trace(), 0.0)
    with pytest.raises(ConfigError, match="unknown policy"):
        simulate(TraceProblem(table1_trace(), 3.0), "nope")


def test_shipped_trace_has_the_benchs_shape() -> None:
    from edgewise.continual.problem import default_retrain_configs
    from edgewise.continual.traces import default_trace

    trace = default_trace()
    assert len(trace.streams) == 12 and trace.windows >= 2
    assert set(trace.configs) == {c.name for c in default_retrain_configs()}
    for curve in trace.curves.values():
        assert curve.cost_s > 0 and all(0 <= a <= 1 for a in curve.accuracy)
        assert list(curve.compute_s) == sorted(curve.compute_s)


def test_subsampling_reuses_the_last_analysed_frame() -> None:
    from edgewise.continual.traces import subsampled_accuracy

    y = np.array([1, 1, 2, 2, 3, 3, 4, 4])
    assert subsampled_accuracy(y.copy(), y, 1.0) == 1.0
    assert subsampled_accuracy(y.copy(), y, 0.5) == 1.0  # runs of 2 frames: nothing lost
    assert subsampled_accuracy(y.copy(), y, 0.25) == 0.5
    distinct = np.arange(8)
    assert subsampled_accuracy(distinct, distinct, 0.75) == 0.75  # skips one frame in four
    assert subsampled_accuracy(distinct, distinct, 0.1) == 0.125


def test_profile_error_perturbs_decisions_not_outcomes() -> None:
    trace = synthetic_trace(6, 2, seed=4)
    problem = TraceProblem(trace, 2.0)
    exact = simulate(problem, "thief")
    zero = simulate(problem, "thief", profile_error=0.0, seed=9)
    assert np.array_equal(exact.accuracy, zero.accuracy)
    noisy = [simulate(problem, "thief", profile_error=0.3, seed=s) for s in (1, 1, 2)]
    assert np.array_equal(noisy[0].accuracy, noisy[1].accuracy)  # same seed, same numbers
    assert not np.array_equal(noisy[0].accuracy, exact.accuracy)
    # the policy saw estimates: some decision's estimated accuracy differs from the truth
    est = noisy[2].plans[0][2].accuracy
    true = get_policy("thief")(first_decision(problem), RNG).accuracy
    assert est != true
    with pytest.raises(ConfigError, match="profile_error"):
        simulate(problem, "thief", profile_error=-0.1)


def _one_stream_trace() -> Trace:
    curves = {(0, "A", "C"): Curve((0.0, 50.0, 100.0), (0.5, 0.7, 0.9)),
              (1, "A", "C"): Curve((0.0, 50.0, 100.0), (0.6, 0.8, 0.95))}
    return Trace(("A",), {"A": 0.5}, {"A": 0.5}, 2, ("C",), curves, {}, (1.0,),
                 {"A": (1.0,)})


def test_checkpoints_serve_each_epoch_and_the_last_one_stands() -> None:
    # half of one accelerator retrains (100 s of compute: 200 s > the 150 s window), half
    # serves inference at full rate; epoch 1 ends at 100 s
    policy = uniform_policy("C", 0.5)
    problem = TraceProblem(_one_stream_trace(), 1.0, 150.0)
    plain = simulate(problem, policy)
    assert plain.accuracy[:, 0] == pytest.approx([0.5, 0.5])  # unfinished: worth nothing
    ckpt = simulate(replace(problem, serve_checkpoints=True), policy)
    # window 1: 0.5 for 100 s, epoch 1's 0.7 for 50 s; window 2 starts from that checkpoint
    assert ckpt.accuracy[:, 0] == pytest.approx([(0.5 * 100 + 0.7 * 50) / 150,
                                                 (0.7 * 100 + 0.8 * 50) / 150])
