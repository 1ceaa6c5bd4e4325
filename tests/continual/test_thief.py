"""The thief scheduler (Algorithms 1-2) on the §3.2 worked example, checked against the paper's
statements and a hand computation from Table 1; its oracle tests are in test_exact.py."""

from __future__ import annotations

import numpy as np
import pytest

from edgewise.continual.example import (
    EXAMPLE_A_MIN,
    EXAMPLE_ACCELERATORS,
    EXAMPLE_WINDOW_S,
    table1_trace,
)
from edgewise.continual.policies import get_policy
from edgewise.continual.policies._grid import Lattice, build_lattice
from edgewise.continual.policies.exact import exact_allocation
from edgewise.continual.policies.thief import thief_allocation
from edgewise.continual.sim import TraceProblem, first_decision, simulate
from edgewise.continual.synthetic import synthetic_trace

RNG = np.random.default_rng(0)


def _example(accelerators: float = EXAMPLE_ACCELERATORS, delta: float = 0.25) -> TraceProblem:
    return TraceProblem(table1_trace(), accelerators, EXAMPLE_WINDOW_S, delta, EXAMPLE_A_MIN)


@pytest.mark.parametrize("delta", [0.05, 0.25])
def test_worked_example_first_decision(delta: float) -> None:
    plan = get_policy("thief")(first_decision(_example(delta=delta)), RNG)
    b, a = plan.decision("B"), plan.decision("A")
    # §3.2: "the scheduler prioritizes video B's retraining in Window 1 as its inference
    # accuracy after retraining increases by 35% (compared to 5% for video A)", with Cfg2B
    assert b.retrain == "Cfg2" and a.retrain is None
    assert plan.violations == 0
    assert plan.total_share <= EXAMPLE_ACCELERATORS + 1e-9
    assert a.inference_share >= 1.0 - 1e-9 and b.inference_share >= 1.0 - 1e-9


def _uniform_by_hand() -> float:
    """§3.2's uniform scheduler on Table 1, computed here from the table: each stream gets
    1.5 of the 3 GPUs, 0.75 for inference (full-rate demand 1 GPU, so 3/4 of the frames are
    analysed: accuracy × 0.75, Figure 4c) and 0.75 to retrain the most accurate Cfg1, which
    takes GPU-seconds / 0.75; the old model serves until it completes (no drift)."""
    window, share = 120.0, 0.75

    def average(before: float, after: float, gpu_s: float) -> float:
        busy = min(window, gpu_s / share)
        return share * (before * busy + after * (window - busy)) / window

    a1, b1 = average(0.65, 0.75, 85.0), average(0.50, 0.90, 80.0)  # window 1: Cfg1A, Cfg1B
    a2, b2 = average(0.75, 0.95, 90.0), average(0.90, 0.98, 80.0)  # window 2
    return (a1 + b1 + a2 + b2) / 4


def test_worked_example_over_both_windows() -> None:
    thief = simulate(_example(), "thief")
    uniform = simulate(_example(), "uniform")
    window1 = [p for w, _, p in thief.plans if w == 0]
    picked = {(d.stream, d.retrain) for p in window1 for d in p.decisions if d.retrain}
    assert picked == {("A", "Cfg2"), ("B", "Cfg2")}  # Cfg2A and Cfg2B, the (*) of Table 1
    assert all(p.violations == 0 for _, _, p in thief.plans)  # never below a_MIN = 40%
    # Figure 4c: uniform drops A 65% → 49% and B 50% → 37.5% (below a_MIN) while retraining
    first = uniform.plans[0][2]
    assert first.violations == 1
    for name, before in (("A", 0.65), ("B", 0.50)):
        assert before * min(1.0, first.decision(name).inference_share) == pytest.approx(
            {"A": 0.4875, "B": 0.375}[name])
    assert uniform.mean_accuracy == pytest.approx(_uniform_by_hand(), abs=1e-9)
    # the paper: 73% vs 56%, and uniform "would require nearly twice the GPUs (i.e., 6 GPUs
    # instead of 3)" to match
    assert thief.mean_accuracy >= 0.73 - 0.03
    assert thief.mean_accuracy > uniform.mean_accuracy + 0.15
    assert simulate(_example(6.0), "uniform").mean_accuracy >= thief.mean_accuracy


@pytest.mark.parametrize("delta", [0.05, 0.1, 0.25, 0.5])
def test_thief_never_lets_inference_fall_below_a_min_in_the_example(delta: float) -> None:
    result = simulate(_example(delta=delta), "thief")
    assert all(plan.violations == 0 for _, _, plan in result.plans)
    first = result.plans[0][2]
    for name, acc in table1_trace().initial_accuracy.items():
        assert acc * min(1.0, first.decision(name).inference_share) >= EXAMPLE_A_MIN - 1e-9


def _objective(lattice: Lattice, alloc: list[int]) -> float:
    return sum(lattice.score(v, alloc[2 * v], alloc[2 * v + 1])
               for v in range(len(lattice.problem.streams)))


@pytest.mark.parametrize("seed", [0, 3, 5])
def test_ten_streams_eight_accelerators_between_fair_start_and_optimum(seed: int) -> None:
    # Figure 10's setting: 10 streams, 8 accelerators, 18 configurations, Δ = 0.1
    problem = first_decision(TraceProblem(synthetic_trace(10, 1, seed=seed), 8.0, a_min=0.3))
    assert len(problem.streams[0].retrain) == 18
    lattice = build_lattice(problem)
    fair, alloc = list(lattice.fair), thief_allocation(lattice)
    assert sum(fair) == lattice.budget  # line 2 hands out every unit
    assert sum(alloc) <= lattice.budget
    assert _objective(lattice, fair) <= _objective(lattice, alloc) + 1e-12
    assert _objective(lattice, alloc) <= _objective(lattice, exact_allocation(lattice)) + 1e-9
    plan = get_policy("thief")(problem, RNG)
    assert plan.total_share <= 8.0 + 1e-9
