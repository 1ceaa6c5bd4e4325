"""Deep-Edge's Algorithm 1 judged by time to accuracy instead of epoch time (issue 24 §6).

Algorithm 1 gives each worker the largest batch its memory and its apps allow: the epoch is
shortest so, but a larger global batch ``B`` teaches less per sample. McCandlish et al. ("An
Empirical Model of Large-Batch Training", 2018, eq. 2.11) give the epochs to a target as
``E_min (1 + B / B_noise)``, with ``B_noise`` the gradient noise scale; Pollux (Qiao et al.,
OSDI 2021) maximises the same trade-off as goodput, throughput times statistical efficiency.
So this policy runs Algorithm 1 once for each cap on the workers' batches (``b_min`` doubled
up to ``b_max``) and keeps the plan with the least predicted time to a target,
``epoch time × (1 + B / noise_scale)``, where ``B`` is the plan's global batch (the sum of
its batches, which the balanced synchronous steps keep). With Adam the noise scale is that
of the preconditioned gradient (Pollux §3.1; the server measures it,
``EpochRecord.noise_scale_adam``).
"""

from __future__ import annotations

import numpy as np

from edgewise.errors import ConfigError, InfeasibleError
from edgewise.update.policies import register
from edgewise.update.policies.deep_edge import algorithm_1, batch_limits
from edgewise.update.problem import UpdatePlan, UpdateProblem

__all__ = ["batch_caps", "deep_edge_goodput", "epochs_factor", "time_to_target_s"]


def batch_caps(b_min: int, b_max: int) -> list[int]:
    """``b_min``, doubled while below ``b_max``, and ``b_max``."""
    caps, cap = [], b_min
    while cap < b_max:
        caps.append(cap)
        cap *= 2
    return [*caps, b_max]


def epochs_factor(global_batch: float, noise_scale: float) -> float:
    """Epochs to a target relative to the smallest batch's: ``1 + B / B_noise``."""
    return 1.0 + global_batch / noise_scale


def time_to_target_s(plan: UpdatePlan, noise_scale: float) -> float:
    """The plan's predicted epoch time times its epochs factor (in units of ``E_min``)."""
    return plan.predicted_epoch_s * epochs_factor(sum(plan.batch_sizes.values()), noise_scale)


@register("deep-edge-goodput")
def deep_edge_goodput(problem: UpdateProblem, rng: np.random.Generator) -> UpdatePlan:
    """Algorithm 1 (with the pressure constraint, as ``deep-edge``) under each batch cap;
    the plan of least ``epoch time × (1 + B / noise_scale)``, the larger cap on a tie.

    Raises ConfigError without ``problem.noise_scale``; InfeasibleError as ``deep-edge``."""
    if problem.noise_scale is None:
        raise ConfigError("deep-edge-goodput needs the workload's gradient noise scale "
                          "(--noise-scale; a synchronous run measures it: the "
                          "Adam-preconditioned figure, docs/runtime.md)", field="noise_scale")
    limits = batch_limits(problem, shrink=True)  # once: a cap only lowers them
    plans, infeasible = [], None
    for cap in batch_caps(problem.b_min, problem.b_max):
        capped = np.where(limits > 0, np.maximum(np.minimum(limits, cap), problem.b_min), 0)
        try:
            plans.append(algorithm_1(problem, capped, "deep-edge-goodput"))
        except InfeasibleError as exc:
            infeasible = exc
    if not plans:
        assert infeasible is not None
        raise infeasible
    # the least predicted time to the target; on a tie the last (largest) cap
    noise = problem.noise_scale
    return min(reversed(plans), key=lambda plan: time_to_target_s(plan, noise))
