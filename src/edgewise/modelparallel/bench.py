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
"""

from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np

from edgewise.bench import BenchContext, BenchOption, BenchSpec, Figures
from edgewise.modelparallel.benchfigs import (
    METHOD_NAMES,
    Protocol,
    collision_figure,
    headline,
    jct_figure,
    load_figure,
    overhead,
    protocol,
)
from edgewise.modelparallel.models import srole_models
from edgewise.modelparallel.policies import get_method
from edgewise.modelparallel.shield_timing import shield_seconds
from edgewise.modelparallel.sim import pretrain

__all__ = ["SPEC", "real", "simulated", "srole_figures"]


def srole_figures(ctx: BenchContext, p: Protocol) -> Figures:
    """The protocol of the module docstring at sizes ``p``: the figures; wall-clock
    figures go to ``ctx.timings``."""
    tick = ctx.ticker(5 + len(srole_models()) * (len(p.edges) + len(p.workloads))
                      + len(p.kappas))
    bases = {}
    for name in METHOD_NAMES:
        tick(f"pre-training {name}")
        bases[name] = pretrain(get_method(name), srole_models(), np.random.default_rng(
            [ctx.seed, 100]), rounds=p.pretrain, n_partitions=p.partitions)
    jct, at25 = jct_figure(bases, p, ctx.seed, tick)
    load = load_figure(bases, p, ctx.seed, tick)
    kappa_fig = collision_figure(bases, p, ctx.seed, tick)
    work, wall = overhead(at25)
    tick("shield timing")
    timed = shield_seconds(srole_models(), max(p.edges), min(p.rounds, 10), ctx.seed,
                           n_partitions=p.partitions)
    ctx.timings["overhead"] = {**wall, "shield_fastest_s": timed}
    ctx.timings["shield_wall_ratio_d_to_c"] = (wall["srole-d"]["shield_wall_s"]
                                               / max(wall["srole-c"]["shield_wall_s"], 1e-12))
    ctx.timings["shield_seconds_ratio_d_to_c"] = timed["srole-d"] / timed["srole-c"]
    return {**headline(jct, kappa_fig, work),
            "protocol": {**asdict(p), "seed": ctx.seed, "quick": ctx.quick},
            "jct_s": {"edges": list(p.edges), **jct}, "load": load, "overhead": work,
            "collisions_vs_kappa": kappa_fig}


def simulated(ctx: BenchContext) -> Figures:
    """The kit's simulated part: the protocol (quick or full), levels grouped into at most
    ``--partitions`` tasks if given."""
    p = protocol(ctx.quick)
    if ctx.option("partitions") is not None:
        p = replace(p, partitions=int(ctx.option("partitions")))
    return srole_figures(ctx, p)


def real(ctx: BenchContext) -> Figures:
    """The kit's real part: `realbench.real_figures` (measured keys go to the timings)."""
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
                         minimum=1, maximum=64),),
    contract_timings=("shield_seconds_ratio_d_to_c",),
    labels={
        "shield_ops_ratio_d_to_c": "deterministic elementary checks on the critical path, "
                                   "SROLE-D over SROLE-C (Fig. 7's shielding time as work)",
        "shield_seconds_ratio_d_to_c": "wall seconds of the shields on identical random joint "
                                       "actions, fastest of 15 repeats, SROLE-D over SROLE-C",
    },
)
"""``edgewise bench srole``."""
