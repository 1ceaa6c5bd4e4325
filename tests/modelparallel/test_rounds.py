"""A round in the environment: invalid schedules fail and are placed again (their JCT counts
the wait), shields never run one, demands drift within their range, and the rewards."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgewise.modelparallel.jobs import DEMAND_DRIFT, drifted, make_job
from edgewise.modelparallel.network import random_network
from edgewise.modelparallel.problem import (
    BackgroundTask,
    EdgeNetwork,
    EdgeNode,
    Job,
    Partition,
    TaskPlacement,
)
from edgewise.modelparallel.rounds import GAMMA, RHO, Conditions, outcome, random_round, rewards
from edgewise.modelparallel.schedule import Decision, Plan, Round
from edgewise.modelparallel.sim import MAX_ATTEMPTS, SroleProblem, simulate

STILL = Conditions(drift=0.0)


def _tiny() -> tuple[EdgeNetwork, Job]:
    """Two nodes, each with a PageRank worker (128 MB) at 50 % workload: node a (200 MB)
    cannot also hold the job's two 50 MB layers, node b can."""
    net = EdgeNetwork((EdgeNode("a", 1.0, 200.0), EdgeNode("b", 1.0, 1000.0)))
    job = Job("j", "m", 0, (Partition("p0", 1.0, 0.1, 50.0, 1.0, 1.0),
                            Partition("p1", 1.0, 0.1, 50.0, 0.0)))
    return net, job


def test_an_invalid_schedule_fails_and_the_job_is_placed_again_after_the_round() -> None:
    net, job = _tiny()
    calls: list[int] = []

    def stubborn_once(rnd: Round, rng: np.random.Generator) -> Plan:
        calls.append(len(rnd.jobs))
        return tuple(TaskPlacement((0, 0) if len(calls) == 1 else (1, 1)) for _ in rnd.jobs)

    out = simulate(SroleProblem(net, workload_pct=50.0, jobs=((job,),), conditions=STILL),
                   stubborn_once)
    assert [r.failed for r in out.rounds] == [("memory",), (None,)]
    assert math.isnan(out.rounds[0].jct_s[0]) and calls == [1, 1]
    record, = out.jobs
    assert record.attempts == 2 and record.failures == ("memory",) and record.ran
    # no job of its cluster ran: the round lasted what its invalid placement would have taken
    assert record.jct_s == pytest.approx(out.rounds[0].would_be_s[0] + out.rounds[1].jct_s[0])
    assert out.failures("memory") == 1 and out.dropped() == 0


def test_a_job_never_valid_is_given_up_with_a_lower_bound_not_forgotten() -> None:
    net, job = _tiny()
    out = simulate(SroleProblem(net, workload_pct=50.0, jobs=((job,),), conditions=STILL),
                   lambda rnd, rng: tuple(TaskPlacement((0, 0)) for _ in rnd.jobs))
    record, = out.jobs
    assert not record.ran and record.attempts == MAX_ATTEMPTS == len(out.rounds)
    assert record.jct_s >= sum(r.would_be_s[0] for r in out.rounds) > 0
    assert out.round_jct_s() == [record.jct_s]  # it counts in the JCT figure


@pytest.mark.parametrize("method", ["srole-c", "srole-d"])
def test_shielded_methods_never_run_an_invalid_schedule(method: str) -> None:
    """GoogLeNet's ~1 GB jobs on Table I's 768 MB–4 GB nodes: untrained agents keep every
    layer at home; MARL's runs fail for memory, SROLE's shield repairs them (§IV-B)."""
    net = random_network(5, np.random.default_rng(2))
    problem = SroleProblem(net, "googlenet", rounds=4, pretrain_rounds=1,
                           pretrain_models=("googlenet",))
    assert simulate(problem, "marl", seed=1).failures("memory") > 0
    shielded = simulate(problem, method, seed=1)
    assert shielded.failures("memory") == 0 and shielded.dropped() == 0


def test_demands_drift_within_their_range_and_memory_does_not() -> None:
    net = random_network(5, np.random.default_rng(0))
    job = make_job("j", "rnn", 0)
    bg = (BackgroundTask(1, 0.05, 128.0, 10.0),)
    jobs, tasks = drifted((job,) * 50, bg * 50, np.random.default_rng(3))
    cpu = np.array([p.cpu / q.cpu for j in jobs for p, q in zip(j.partitions, job.partitions,
                                                                 strict=True)])
    assert np.all(np.abs(cpu - 1) <= DEMAND_DRIFT) and cpu.std() > 0.05
    assert all(np.isclose(j.input_mbps / job.input_mbps, j.partitions[0].out_mbps
                          / job.partitions[0].out_mbps) for j in jobs)  # one factor per job
    assert {p.memory_mb for j in jobs for p in j.partitions} == {
        p.memory_mb for p in job.partitions}
    assert all(abs(t.bandwidth_mbps / 10.0 - 1) <= DEMAND_DRIFT and t.memory_mb == 128.0
               for t in tasks)
    still = random_round(net, "rnn", 100.0, np.random.default_rng(1), conditions=STILL)
    assert still.run_jobs is None and still.actual() == (still.jobs, still.background)


def test_rewards_penalise_invalid_runs_and_moved_or_deferred_layers() -> None:
    net, job = _tiny()
    rnd = Round(net, (job, job), ())
    dec = Decision((TaskPlacement((0, 0)), TaskPlacement((0, 0))), (0, 0), ((), ()), 0, 0.0,
                   executed=(TaskPlacement((1, 0)), TaskPlacement((0, 0))), changed=((0, 0),),
                   deferred=(1,))
    res = outcome(rnd, dec)
    assert res.failed == (None, "deferred")
    r = rewards(res, rnd, dec, kappa=100.0)
    assert r[0] == pytest.approx([-100.0, RHO / math.sqrt(res.jct_s[0])])
    assert r[1] == [-100.0, -100.0]  # deferred: every layer replaced, no run to reward
    invalid = Decision((TaskPlacement((0, 0)),), (0,), ((),), 0, 0.0)
    heavy = Round(net, (job,), (BackgroundTask(0, 0.0, 150.0),))
    assert rewards(outcome(heavy, invalid), heavy, invalid)[0][-1] == -GAMMA
