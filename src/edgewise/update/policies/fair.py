"""The fairness baseline of Deep-Edge §V-C (equal shares, as Hadoop, YARN and Mesos)."""

from __future__ import annotations

import numpy as np

from edgewise.errors import InfeasibleError
from edgewise.update.cost import costs, deployed_exec_ms, integer_shards, max_batch_sizes
from edgewise.update.policies import register
from edgewise.update.problem import UpdatePlan, UpdateProblem

__all__ = ["fair"]


@register("fair")
def fair(problem: UpdateProblem, rng: np.random.Generator) -> UpdatePlan:
    """Equal shares, as a fairness scheduler (Hadoop, YARN, Mesos) gives them: every worker
    whose memory fits the job at the user's batch size (``problem.user_batch``, by
    EstState^mem) gets an equal share of the samples (remainder to the first ones), and all
    train at that batch size. A fairness scheduler neither tunes batch sizes nor looks at
    interference, so the plan may make background apps miss deadlines; the predicted epoch
    time is max_i d_i t_i^total."""
    max_b = max_batch_sizes(problem)
    idx = np.flatnonzero(max_b >= problem.user_batch).astype(np.int64)
    if len(idx) == 0:
        raise InfeasibleError(f"no worker has the memory for batches of {problem.user_batch}")
    shards = np.zeros(len(problem.workers), dtype=np.int64)
    shards[idx] = integer_shards(np.ones(len(idx)), problem.n_samples)
    batch = np.full(len(idx), float(problem.user_batch))
    c = costs(problem, idx, batch)
    names = [w.device for w in problem.workers]
    return UpdatePlan(
        shards={names[i]: int(shards[i]) for i in idx},
        batch_sizes={names[i]: int(b) for i, b in zip(idx, batch, strict=True)},
        predicted_epoch_s=float(np.max(shards[idx] * c.total)),
        predicted_exec_ms=deployed_exec_ms(problem, c.exec_ms, shards),
        policy="fair",
    )
