"""Simulates a method round by round (§IV-B/C): decide, shield, run, reward, learn; offline
pre-training on random networks, then online learning on the evaluated one. A job that
could not run (an invalid schedule, or deferred by the shield) is placed again in the next
round of its cluster, after that round's end. Deterministic from its seed; wall-clock
seconds are kept apart in the outcome's ``timings``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from edgewise.anatomy import OnlinePolicy
from edgewise.modelparallel.agents import QAgent
from edgewise.modelparallel.jobs import background_tasks, drifted
from edgewise.modelparallel.models import srole_models
from edgewise.modelparallel.policies import (
    Method,
    NodeAgents,
    PlanPolicy,
    PlanStep,
    get_method,
)
from edgewise.modelparallel.problem import EdgeNetwork, Job
from edgewise.modelparallel.rounds import KAPPA, Conditions, RoundResult, outcome, random_round
from edgewise.modelparallel.schedule import Decision, Round
from edgewise.modelparallel.training import play_round, pretrain
from edgewise.modelparallel.workloads import ModelRef

__all__ = ["MAX_ATTEMPTS", "JobRecord", "SimOutcome", "SroleProblem", "play_round",
           "pretrain", "simulate"]

MAX_ATTEMPTS = 10  # placements of a job before it is given up (assumption)
Seed = int | Sequence[int]
Online = OnlinePolicy[Round, Decision]


@dataclass(frozen=True, slots=True)
class SroleProblem:
    """SROLE's problem on one network (§V-A): ``rounds`` scheduling rounds, each with
    3 jobs of ``model`` at random nodes of every cluster (one task per model level, or
    ``n_partitions`` groups of levels) over the PageRank background of ``workload_pct``,
    under ``conditions`` (α, overload model, background intensity, demand drift); agents
    rewarded −``kappa`` per layer a shield moves. Learning methods are first pre-trained
    for ``pretrain_rounds`` rounds on fresh random networks of §V-A's "RL Training" ranges,
    on ``pretrain_models``, under the same conditions. ``jobs``: the jobs of every round,
    given (then ``rounds`` and ``model`` are not used), instead of drawn."""

    network: EdgeNetwork
    model: ModelRef = "vgg-16"
    workload_pct: float = 100.0
    rounds: int = 60
    n_partitions: int | None = None
    kappa: float = KAPPA
    conditions: Conditions = field(default_factory=Conditions)
    pretrain_rounds: int = 1500
    pretrain_models: tuple[ModelRef, ...] = field(
        default_factory=lambda: tuple(srole_models()))
    jobs: tuple[tuple[Job, ...], ...] | None = None

    def draw_rounds(self, rng: np.random.Generator) -> list[Round]:
        """The rounds of the problem, their jobs (if not given), background and drift drawn
        from ``rng``."""
        env = self.conditions
        if self.jobs is None:
            return [random_round(self.network, self.model, self.workload_pct, rng,
                                 self.n_partitions, env) for _ in range(self.rounds)]
        return [env.round_of(self.network, jobs, background_tasks(
            self.network, self.workload_pct, rng, env.intensity), rng) for jobs in self.jobs]


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One job from its first placement to its run: the round it was initiated in, the
    placements tried (1: it ran at once), why each earlier one failed, and its JCT counted
    from its first placement: the rounds it waited, then its run. A job given up after
    ``MAX_ATTEMPTS`` placements (``ran`` False) counts its waits and the time its last
    placement would have taken had it been valid: a lower bound, so that giving up on a job
    never shortens the JCT figure."""

    name: str
    first_round: int
    attempts: int
    failures: tuple[str, ...]
    jct_s: float
    ran: bool = True


@dataclass(frozen=True, slots=True)
class SimOutcome:
    """Every round's result and every job's record, in order, and the wall-clock
    ``timings``: the mean seconds per round of the busiest decider (``decision_seconds``)
    and of the slowest shield (``shield_seconds``)."""

    rounds: tuple[RoundResult, ...]
    jobs: tuple[JobRecord, ...]
    timings: Mapping[str, float]

    def jct_s(self) -> list[float]:
        """The JCT of every job, in the order they completed (or were given up)."""
        return [j.jct_s for j in self.jobs]

    def round_jct_s(self) -> list[float]:
        """Per initiating round, the mean JCT of its jobs."""
        by_round: dict[int, list[float]] = {}
        for j in self.jobs:
            by_round.setdefault(j.first_round, []).append(j.jct_s)
        return [float(np.mean(v)) for _, v in sorted(by_round.items())]

    def failures(self, reason: str) -> int:
        """How many runs failed (or were deferred) for ``reason``."""
        return sum(f == reason for r in self.rounds for f in r.failed)

    def dropped(self) -> int:
        """Jobs that never ran within ``MAX_ATTEMPTS`` placements."""
        return sum(not j.ran for j in self.jobs)


@dataclass(slots=True)
class _Pending:
    job: Job
    first_round: int
    waited_s: float = 0.0
    failures: tuple[str, ...] = ()


def _online(problem: SroleProblem, policy: str | Method | PlanPolicy | Online,
            rng: np.random.Generator, agent: QAgent | None, seeds: list[int]) -> Online:
    if isinstance(policy, str):
        policy = get_method(policy)
    if isinstance(policy, Method):
        if not policy.learns:
            return policy.policy([], rng, learning=False)
        base = agent if agent is not None else pretrain(
            policy, problem.pretrain_models, np.random.default_rng([*seeds, 100]),
            problem.pretrain_rounds, kappa=problem.kappa, n_partitions=problem.n_partitions,
            conditions=problem.conditions)
        return policy.policy(NodeAgents(base, problem.network.n), rng, kappa=problem.kappa)
    if isinstance(policy, OnlinePolicy):
        return policy
    return PlanStep(policy, rng)


def _with_pending(rnd: Round, pending: list[_Pending], problem: SroleProblem,
                  rng: np.random.Generator) -> Round:
    """``rnd`` with the jobs waiting from earlier rounds added after its own."""
    if not pending:
        return rnd
    extra = tuple(p.job for p in pending)
    run_extra = drifted(extra, (), rng, problem.conditions.drift)[0]
    own_run, bg_run = rnd.actual()
    return Round(rnd.network, rnd.jobs + extra, rnd.background, rnd.alpha, rnd.overload,
                 own_run + run_extra, bg_run)


def _cluster_ends(rnd: Round, res: RoundResult) -> dict[int, float]:
    """When each cluster's round ends: its longest run, or, if none of its jobs ran, the
    longest its joint action would have taken (the cluster was busy trying it)."""
    ran: dict[int, float] = {}
    tried: dict[int, float] = {}
    for j, job in enumerate(rnd.jobs):
        c = rnd.network.cluster(job.origin)
        if res.failed[j] is None:
            ran[c] = max(ran.get(c, 0.0), res.jct_s[j])
        tried[c] = max(tried.get(c, 0.0), res.would_be_s[j])
    return {c: ran.get(c, tried[c]) for c in tried}


def _settle(rnd: Round, res: RoundResult, tags: list[_Pending],
            records: list[JobRecord]) -> list[_Pending]:
    """Record the jobs that ran; return those to place again (given up after
    ``MAX_ATTEMPTS``)."""
    ends, again = _cluster_ends(rnd, res), []
    for j, job in enumerate(rnd.jobs):
        tag, reason = tags[j], res.failed[j]
        if reason is None:
            records.append(JobRecord(job.name, tag.first_round, len(tag.failures) + 1,
                                     tag.failures, tag.waited_s + res.jct_s[j]))
            continue
        if len(tag.failures) + 1 >= MAX_ATTEMPTS:
            records.append(JobRecord(job.name, tag.first_round, len(tag.failures) + 1,
                                     (*tag.failures, reason),
                                     tag.waited_s + res.would_be_s[j], ran=False))
            continue
        tag = _Pending(job, tag.first_round, tag.waited_s + ends[rnd.network.cluster(
            job.origin)], (*tag.failures, reason))
        again.append(tag)
    return again


def simulate(problem: SroleProblem, policy: str | Method | PlanPolicy | Online, *,
             seed: Seed = 0, agent: QAgent | None = None) -> SimOutcome:
    """Play ``problem.rounds`` rounds (drawn from ``[*seed, 1]``), then as many more as the
    jobs still waiting need, with ``policy``: a method by name or as a :class:`Method`
    (its agents pre-trained from ``[*seed, 100]``, or copies of ``agent``, then greedy
    with online learning, §IV-B), a pure policy ``(round, rng) -> plan`` (e.g.
    ``policies.trained``) or an online policy. Actions draw from ``[*seed, 2]``. Same
    seed, same results (``timings`` aside)."""
    seeds = [seed] if isinstance(seed, int) else list(seed)
    gen, env = np.random.default_rng([*seeds, 1]), problem.conditions
    rnds = problem.draw_rounds(gen)
    online = _online(problem, policy, np.random.default_rng([*seeds, 2]), agent, seeds)
    late = np.random.default_rng([*seeds, 3])
    results: list[RoundResult] = []
    records: list[JobRecord] = []
    pending: list[_Pending] = []
    decide_s = shield_s = 0.0
    t = 0
    while t < len(rnds) or pending:
        rnd = rnds[t] if t < len(rnds) else env.round_of(
            problem.network, (), background_tasks(problem.network, problem.workload_pct, gen,
                                                  env.intensity), gen)
        tags = [_Pending(j, t) for j in rnd.jobs] + pending
        rnd = _with_pending(rnd, pending, problem, late)
        dec = online.step(rnd)
        result = outcome(rnd, dec)
        online.learn(result)
        results.append(result)
        pending = _settle(rnd, result, tags, records)
        decide_s, shield_s, t = decide_s + dec.seconds, shield_s + dec.shield_seconds, t + 1
    n = max(1, len(results))
    return SimOutcome(tuple(results), tuple(records), {"decision_seconds": decide_s / n,
                                                       "shield_seconds": shield_s / n})
