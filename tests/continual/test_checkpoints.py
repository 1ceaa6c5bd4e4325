"""§5's options: checkpoint-aware planning (``thief-checkpoints``) against brute-force oracles,
and re-estimating a running retraining's accuracy from its epochs so far."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgewise.continual.curves import LearningCurve
from edgewise.continual.estimate import checkpoint_value, estimate_accuracy
from edgewise.continual.policies import get_policy
from edgewise.continual.policies._grid import Lattice, build_lattice
from edgewise.continual.policies.exact import exact_allocation
from edgewise.continual.policies.thief import thief_allocation
from edgewise.continual.problem import ContinualProblem, RetrainOption
from edgewise.continual.profiles import Curve, Trace
from edgewise.continual.replay import Estimates
from edgewise.continual.sim import TraceProblem, simulate
from edgewise.errors import ConfigError
from tests.continual.strategies import checkpoint_problems, options_with_checkpoints, problems

RNG = np.random.default_rng(0)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _integrated(deployed: float, option: RetrainOption, share: float, window_s: float) -> float:
    """The served accuracy integrated numerically: at time t the retraining has done
    share·t compute and the latest checkpoint reached (or the deployed model) serves."""
    times = (np.arange(20_000) + 0.5) * window_s / 20_000
    points = [*option.checkpoints, (option.cost_s, option.accuracy)]
    served = np.full(times.shape, deployed)
    for compute_s, accuracy in points:
        served = np.where(share * times >= compute_s, accuracy, served)
    return float(served.mean())


@SETTINGS
@given(options_with_checkpoints("c"), st.floats(0.3, 0.9), st.sampled_from((0.1, 0.25, 0.5, 1.0)),
       st.sampled_from((60.0, 200.0)))
def test_checkpoint_value_integrates_the_served_checkpoints(
        option: RetrainOption, deployed: float, share: float, window_s: float) -> None:
    got = float(checkpoint_value(deployed, option, np.array([share]), window_s)[0])
    assert got == pytest.approx(_integrated(deployed, option, share, window_s), abs=2e-3)


@SETTINGS
@given(st.floats(0.3, 0.9), st.floats(0.3, 0.99), st.floats(5.0, 300.0),
       st.sampled_from((0.1, 0.5, 1.0, 2.0)))
def test_without_checkpoints_a_finishing_retraining_is_estimated_as_the_paper_does(
        deployed: float, end: float, cost_s: float, share: float) -> None:
    option = RetrainOption("c", end, cost_s)
    plain = estimate_accuracy(deployed, option, 1.0, share, 200.0)
    value = float(checkpoint_value(deployed, option, np.array([share]), 200.0)[0])
    if plain is None:  # it does not finish: with no checkpoint it serves nothing new
        assert value == pytest.approx(deployed)
    else:
        assert value == pytest.approx(plain)


@SETTINGS
@given(problems())
def test_checkpoint_aware_thief_plans_as_the_thief_when_no_checkpoint_is_profiled(
        problem: ContinualProblem) -> None:
    plain = get_policy("thief")(problem, RNG)
    aware = get_policy("thief-checkpoints")(problem, RNG)
    assert aware.violations == plain.violations
    assert aware.accuracy == pytest.approx(plain.accuracy, abs=1e-9)


def _objective(lattice: Lattice, alloc: list[int] | tuple[int, ...]) -> float:
    return sum(lattice.score(v, alloc[2 * v], alloc[2 * v + 1])
               for v in range(len(lattice.problem.streams)))


def _brute(lattice: Lattice) -> float:
    n, size = len(lattice.problem.streams), len(lattice.shares)
    ranges = [range(size) if lattice.has_job[v] else range(1) for v in range(n)]
    best = -np.inf
    for rs in itertools.product(*ranges):
        for is_ in itertools.product(range(size), repeat=n):
            if sum(rs) + sum(is_) <= lattice.budget:
                best = max(best, _objective(lattice, [x for p in zip(rs, is_, strict=True)
                                                      for x in p]))
    return float(best)


@SETTINGS
@given(checkpoint_problems())
def test_checkpoint_aware_thief_between_its_fair_start_and_the_exact_optimum(
        problem: ContinualProblem) -> None:
    lattice = build_lattice(problem, checkpoints=True)
    optimum = _objective(lattice, exact_allocation(lattice))
    assert optimum == pytest.approx(_brute(lattice), abs=1e-9)  # the oracle is exact
    alloc = thief_allocation(lattice)
    assert _objective(lattice, lattice.fair) <= _objective(lattice, alloc) + 1e-12
    assert _objective(lattice, alloc) <= optimum + 1e-9
    plan = get_policy("thief-checkpoints")(problem, RNG)
    assert plan.total_share <= problem.accelerators + 1e-9


def _one_stream(points: tuple[float, ...], accuracy: tuple[float, ...]) -> Trace:
    curves = {(w, "A", "C"): Curve(points, accuracy) for w in range(2)}
    return Trace(("A",), {"A": 0.5}, {"A": 0.5}, 2, ("C",), curves, {}, (1.0,), {"A": (1.0,)})


def test_checkpoint_aware_planning_retrains_when_only_checkpoints_pay() -> None:
    # 100 s of compute cannot finish in a 150 s window next to full-rate inference (0.5
    # of the accelerator); its epoch-1 checkpoint (0.7 at 50 s of compute) can pay
    problem = TraceProblem(_one_stream((0.0, 50.0, 100.0), (0.5, 0.7, 0.9)), 1.0, 150.0,
                           serve_checkpoints=True)
    plain, aware = simulate(problem, "thief"), simulate(problem, "thief-checkpoints")
    assert all(d.retrain is None for _, _, p in plain.plans for d in p.decisions)
    assert plain.accuracy[0, 0] == pytest.approx(0.5)
    first = aware.plans[0][2].decision("A")
    assert (first.retrain, first.retrain_share, first.inference_share) == (
        "C", pytest.approx(0.5), pytest.approx(0.5))
    # 0.5 served until the checkpoint at 50 / 0.5 = 100 s, then 0.7 for the last 50 s
    assert aware.accuracy[0, 0] == pytest.approx((0.5 * 100 + 0.7 * 50) / 150)
    assert aware.mean_accuracy > plain.mean_accuracy


def _family_curve(truth: LearningCurve, epochs: int, epoch_s: float) -> Curve:
    return Curve(tuple(k * epoch_s for k in range(epochs + 1)),
                 tuple(truth.accuracy(k) for k in range(epochs + 1)))


def test_reestimation_recovers_the_end_accuracy_from_the_epochs_seen() -> None:
    truth = LearningCurve(rate=0.8, offset=2.0, plateau=0.95)
    curve = _family_curve(truth, 30, 10.0)
    estimates = Estimates(offset={("A", "C"): -0.3}, end={("A", "C"): truth.accuracy(30) - 0.3})
    assert estimates.option(curve, "A", "C").accuracy == pytest.approx(truth.accuracy(30) - 0.3)
    estimates.reestimate(curve, "A", "C", epochs_seen=10)
    option = estimates.option(curve, "A", "C", remaining_s=200.0)
    assert option.accuracy == pytest.approx(truth.accuracy(30), abs=0.01)
    assert option.cost_s == pytest.approx(200.0)
    assert [c for c, _ in option.checkpoints] == pytest.approx([10.0 * k for k in range(1, 20)])


def test_reestimation_replans_every_k_epochs_of_a_running_retraining() -> None:
    truth = LearningCurve(rate=0.8, offset=2.0, plateau=0.95)
    curves = {(w, "A", "C"): _family_curve(truth, 15, 10.0) for w in range(2)}
    trace = Trace(("A",), {"A": 0.5}, {"A": 0.2}, 2, ("C",), curves, {}, (1.0,), {"A": (1.0,)})
    problem = TraceProblem(trace, 1.0, 400.0, delta=0.5, windows=1)
    plain = simulate(problem, "thief")
    again = simulate(problem, "thief", reestimate_epochs=5)
    assert [round(t, 6) for _, t, _ in plain.plans] == [0.0, 300.0]  # 150 s at R = 0.5
    # epochs 5 and 10 end at 100 s and 200 s; the job keeps its configuration
    assert [round(t, 6) for _, t, _ in again.plans] == [0.0, 100.0, 200.0, 300.0]
    assert {p.decision("A").retrain for _, t, p in again.plans if t < 300.0} == {"C"}
    with pytest.raises(ConfigError, match="reestimate_epochs"):
        simulate(problem, "thief", reestimate_epochs=-1)


def test_cost_scale_multiplies_every_retraining_and_nothing_else() -> None:
    trace = _one_stream((0.0, 50.0, 100.0), (0.5, 0.7, 0.9))
    scaled = trace.with_cost_scale(2.5)
    assert scaled.curves[(0, "A", "C")].compute_s == (0.0, 125.0, 250.0)
    assert scaled.curves[(0, "A", "C")].accuracy == trace.curves[(0, "A", "C")].accuracy
    assert scaled.demand == trace.demand and scaled.initial_accuracy == trace.initial_accuracy
    one = simulate(TraceProblem(trace.with_cost_scale(1.0), 1.0, 150.0), "thief")
    assert np.array_equal(one.accuracy, simulate(TraceProblem(trace, 1.0, 150.0),
                                                 "thief").accuracy)
    with pytest.raises(ConfigError, match="cost_scale"):
        trace.with_cost_scale(0.0)
