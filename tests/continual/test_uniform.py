"""The uniform baseline: static split, fixed configuration, Pareto-front Config 1/Config 2."""

from __future__ import annotations

import numpy as np
import pytest

from edgewise.continual.example import table1_trace
from edgewise.continual.policies import get_policy
from edgewise.continual.policies.uniform import pareto_configs, uniform_policy
from edgewise.continual.problem import InferenceOption, RetrainOption, StreamState
from edgewise.continual.replay import Estimates, WindowState, window_problem
from edgewise.continual.sim import TraceProblem, first_decision
from edgewise.continual.synthetic import synthetic_trace
from edgewise.errors import ConfigError

RNG = np.random.default_rng(0)


def test_uniform_splits_evenly_and_picks_the_most_accurate_config() -> None:
    problem = first_decision(TraceProblem(table1_trace(), 3.0, 120.0, 0.1, 0.4))
    plan = get_policy("uniform")(problem, RNG)
    for d in plan.decisions:
        assert d.retrain == "Cfg1"
        assert d.retrain_share == pytest.approx(0.75)
        assert d.inference_share == pytest.approx(0.75)
    # Figure 4c: 65% → 49% (A) and 50% → 37.5% (B) while retraining: B breaks a_MIN
    assert plan.violations == 1


@pytest.mark.parametrize("fraction", [0.3, 0.5, 0.9])
def test_uniform_policy_keeps_its_static_split(fraction: float) -> None:
    trace = synthetic_trace(4, 1, seed=1)
    config = trace.configs[3]
    problem = first_decision(TraceProblem(trace, 2.0))
    plan = uniform_policy(config, fraction)(problem, RNG)
    for d in plan.decisions:
        assert d.retrain == config
        assert d.inference_share == pytest.approx(fraction * 0.5)
        assert d.retrain_share == pytest.approx((1 - fraction) * 0.5)
    # after a stream finished retraining, its retraining share idles (static allocation)
    state = WindowState(0, dict(trace.initial_accuracy), Estimates(),
                        finished={trace.streams[0]})
    done = window_problem(trace, state, 100.0, 2.0, 0.1, 0.0)
    d0 = uniform_policy(config, fraction)(done, RNG).decisions[0]
    assert d0.retrain is None and d0.inference_share == pytest.approx(fraction * 0.5)


def test_pareto_rule_picks_high_and_low_points() -> None:
    opts = [RetrainOption("hi", 0.90, 100.0), RetrainOption("mid", 0.85, 30.0),
            RetrainOption("low", 0.70, 5.0), RetrainOption("bad", 0.80, 120.0),
            RetrainOption("cheap-ok", 0.81, 20.0)]
    high, low = pareto_configs([opts])
    assert high == "hi"
    # front: low(5, .70), cheap-ok(20, .81), mid(30, .85), hi(100, .90); half the gain = .80
    assert low == "cheap-ok"
    with pytest.raises(ConfigError, match="profiles"):
        pareto_configs([])


def test_uniform_rejects_a_bad_fraction() -> None:
    stream = StreamState("a", 0.5, (), (InferenceOption("s1", 1.0, 1.0),))
    from edgewise.continual.problem import ContinualProblem
    with pytest.raises(ConfigError, match="inference_fraction"):
        uniform_policy(None, 0.0)(ContinualProblem((stream,), 1.0, 10.0), RNG)
