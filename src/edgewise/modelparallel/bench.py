"""`edgewise bench srole`: SROLE's emulation protocol (§V-A, Figs. 4–8) on the simulator.

1. Offline pre-training of each method (one shared Q-table, exploring, on fresh random
   networks of §V-A's "RL Training" ranges, the three models, 100 % workload, κ = 100),
   copied to every node.
2. JCT vs number of edges (5–25) for VGG-16, GoogLeNet and the RNN: per (edges, model) one
   Table I network; every method plays the same sequence of rounds (3 jobs per cluster,
   PageRank background at 100 %), taking its greedy action (§IV-B: "each edge takes the
   optimal action ... based on its observed state") and learning online ("keeps training
   the RL model"); a round's JCT is the mean over its jobs, the case's the median over
   rounds (§V-A: "We repeated each experiment 5 times and plotted the median").
3. Tasks per device and resource utilisation at 25 edges for workloads 60–100 %.
4. Decision and shielding overhead at 25 edges, as work (deterministic look-ups and checks
   on the critical path; parallel deciders and sub-shields count once) and, in the
   ``timings``, wall seconds (the contract's ratio: fastest-of-15 timings on identical
   random joint actions).
5. Action collisions vs κ: SROLE-C/D pre-trained and run with each κ; MARL and RL do not
   use κ. Collisions: overloaded nodes hosting layers of ≥ 2 agents, in the executed joint
   action (``collisions_*``) and in the agents' proposal (``proposed_collisions_*``).
6. (real part) a placement trained for real on Ray, `realbench.real_figures`.

Methods: RL (cluster head), MARL (CQ-learning agents), IQL (independent Q-learning agents),
SROLE-C and SROLE-D (MARL's agents with a shield). Runs of invalid schedules (memory above
capacity) fail and are placed again in the next round; they are counted per method. With
``--sweep`` the simulated part is the sweep of `sweep` instead.
"""

from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np

from edgewise.bench import BenchContext, BenchOption, BenchSpec, Figures
from edgewise.modelparallel.agents import bandwidth_in_state
from edgewise.modelparallel.benchfigs import (
    METHOD_NAMES,
    SHIELDED,
    Protocol,
    Tally,
    collision_figure,
    headline,
    jct_figure,
    load_figure,
    overhead,
    protocol,
)
from edgewise.modelparallel.models import srole_models
from edgewise.modelparallel.policies import get_method
from edgewise.modelparallel.rounds import Conditions
from edgewise.modelparallel.shield_timing import shield_seconds
from edgewise.modelparallel.training import pretrain

__all__ = ["SPEC", "mechanisms", "real", "simulated", "srole_figures"]

LEARNER_NAMES = {"cq": "cq-learning", "q": "independent-q-learning"}


def srole_figures(ctx: BenchContext, p: Protocol) -> Figures:
    """The protocol of the module docstring at sizes ``p``: the figures; wall-clock
    figures go to ``ctx.timings``."""
    tick = ctx.ticker(1 + len(METHOD_NAMES) + len(srole_models())
                      * (len(p.edges) + len(p.workloads)) + len(p.kappas))
    bases = {}
    for name in METHOD_NAMES:
        tick(f"pre-training {name}")
        bases[name] = pretrain(get_method(name), srole_models(), np.random.default_rng(
            [ctx.seed, 100]), rounds=p.pretrain, n_partitions=p.partitions)
    tally = Tally()
    jct, at25 = jct_figure(bases, p, ctx.seed, tick, tally)
    load = load_figure(bases, p, ctx.seed, tick, tally)
    kappa_fig = collision_figure(bases, p, ctx.seed, tick, tally)
    work, wall = overhead(at25)
    tick("shield timing")
    timed = shield_seconds(srole_models(), max(p.edges), min(p.rounds, 10), ctx.seed,
                           n_partitions=p.partitions)
    ctx.timings["overhead"] = {**wall, "shield_fastest_s": timed}
    ctx.timings["shield_wall_ratio_d_to_c"] = (wall["srole-d"]["shield_wall_s"]
                                               / max(wall["srole-c"]["shield_wall_s"], 1e-12))
    ctx.timings["shield_seconds_ratio_d_to_c"] = timed["srole-d"] / timed["srole-c"]
    return {**headline(jct, kappa_fig, work), **mechanisms(tally),
            "protocol": {**asdict(p), "seed": ctx.seed, "quick": ctx.quick,
                         "conditions": asdict(Conditions())},
            "jct_s": {"edges": list(p.edges), **jct}, "load": load, "overhead": work,
            "collisions_vs_kappa": kappa_fig}


def mechanisms(tally: Tally) -> Figures:
    """What the issue-18 mechanisms did: the MARL baseline's learner, whether the agents
    see bandwidth, and per method the runs of invalid schedules and the re-placements."""
    def by_method(key: str) -> dict[str, int]:
        return {n: tally.counts[n].get(key, 0) for n in METHOD_NAMES}

    memory = by_method("invalid_memory_runs")
    return {"marl_kind": LEARNER_NAMES[get_method("marl").learner],
            "bandwidth_in_state": bandwidth_in_state(),
            "invalid_memory_schedules_run": sum(memory[n] for n in SHIELDED),
            "invalid_memory_schedules_run_by_method": memory,
            "deferred_by_shield_by_method": by_method("deferred_by_shield"),
            "re_placed_by_method": by_method("re_placed"),
            "never_run_by_method": by_method("never_run"),
            "jobs_by_method": by_method("jobs")}


def simulated(ctx: BenchContext) -> Figures:
    """The kit's simulated part: the protocol (quick or full), levels grouped into at most
    ``--partitions`` tasks if given; with ``--sweep``, the sweep instead (`sweep`)."""
    parts = ctx.option("partitions")
    if ctx.option("sweep"):
        from edgewise.modelparallel.sweep import sweep_figures, sweep_protocol

        return sweep_figures(ctx, replace(sweep_protocol(ctx.quick), partitions=parts))
    return srole_figures(ctx, replace(protocol(ctx.quick), partitions=parts))


def real(ctx: BenchContext) -> Figures:
    """The kit's real part: `realbench.real_figures` (measured keys go to the timings);
    nothing with ``--sweep``."""
    if ctx.option("sweep"):
        return {}
    from edgewise.modelparallel.realbench import real_figures

    return real_figures(ctx)


SPEC = BenchSpec(
    name="srole",
    title="SROLE §V: JCT vs edges, tasks per device, utilisation, shield overhead, collisions "
          "vs κ, real model-parallel iteration.",
    simulated="edgewise.modelparallel.bench:simulated",
    real="edgewise.modelparallel.bench:real",
    plots="edgewise.modelparallel.plots:plots",
    real_share=0.2,
    options=(BenchOption("partitions", None, "group each model's levels into at most this "
                         "many FLOP-balanced partitions (default: one per level, §III)",
                         minimum=1, maximum=64),
             BenchOption("sweep", False, "instead of the protocol, sweep the background "
                         "intensity and the overload model: JCT reductions over that grid "
                         "(JSON grid and sweep.png)", kind="bool")),
    contract_timings=("shield_seconds_ratio_d_to_c",),
    labels={
        "shield_ops_ratio_d_to_c": "deterministic elementary checks on the critical path, "
                                   "SROLE-D over SROLE-C (Fig. 7's shielding time as work)",
        "shield_seconds_ratio_d_to_c": "wall seconds of the shields on identical random joint "
                                       "actions, fastest of 15 repeats, SROLE-D over SROLE-C",
        "invalid_memory_schedules_run": "runs of a schedule with a node's memory above "
                                        "capacity by SROLE-C and SROLE-D over every simulated "
                                        "case: 0 by construction (the shields repair or defer, "
                                        "§IV-B), a check that they do",
        "bandwidth_in_state": "a probe of the agents' state encoding: two decisions that "
                              "differ only in a candidate's bandwidth utilisation get "
                              "different states",
        "real_transfer_s_per_iteration": "the emulated links wait bytes·8/rate at the rate "
                                         "the environment computes: compared with "
                                         "predicted_transfer_s_per_iteration it measures "
                                         "overhead, not the model",
    },
)
"""``edgewise bench srole``."""
