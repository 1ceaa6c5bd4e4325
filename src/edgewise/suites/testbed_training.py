"""Parameter-server training on a testbed: the runtime bench's scaling protocol, a whole
device killed mid-epoch (the job completes, every sample of every epoch trained exactly
once) and a link cut mid-job (the job finishes)."""

from __future__ import annotations

from typing import Any

import numpy as np

from edgewise.bench import Figures
from edgewise.cluster.model import Role
from edgewise.nn.data import digits_split
from edgewise.runtime.bench import runtime_figures
from edgewise.runtime.engine import TrainResult, train
from edgewise.runtime.faults import FaultInjector, KillMidEpoch
from edgewise.runtime.plan import TrainConfig, equal_plan
from edgewise.runtime.ray_cluster import RayRuntime

__all__ = ["fault_figures", "scaling_figures"]


def scaling_figures(runtime: RayRuntime, *, epochs: int, solo_epochs: int,
                    seed: int) -> tuple[Figures, Figures]:
    """``ps_scaling_efficiency_3_workers`` as ``edgewise bench runtime`` defines it, on
    ``runtime``; (figures, wall-clock timings), samples/s also in device time."""
    found = runtime_figures(runtime, epochs=epochs, solo_epochs=solo_epochs, seed=seed)
    dilation = runtime.time_dilation
    timings = {"ps_samples_per_second_together": found["samples_per_second_together"],
               "ps_samples_per_second_alone": found["samples_per_second_alone"],
               "ps_samples_per_device_second_together":
                   round(found["samples_per_second_together"] * dilation, 1),
               "transport_roundtrip_ms_1mb": found["transport_roundtrip_ms_1mb"]}
    return {"ps_scaling_efficiency_3_workers": found["ps_scaling_efficiency_3_workers"],
            "ps_digits_val_accuracy": found["digits_val_accuracy"]}, timings


def _exactly_once(result: TrainResult, epochs: int) -> bool:
    """Every epoch done, and each trained every training sample exactly once."""
    ids = np.sort(digits_split()[0].ids)
    return len(result.epochs) == epochs and all(
        np.array_equal(np.sort(r.applied_ids), ids) for r in result.epochs)


class _CutAt:
    """Cuts ``a`` from ``b`` for ``seconds`` when epoch ``epoch`` starts."""

    def __init__(self, faults: FaultInjector, a: str, b: str, epoch: int,
                 seconds: float) -> None:
        self.faults, self.a, self.b, self.epoch, self.seconds = faults, a, b, epoch, seconds
        self.at = 0.0

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "epoch_start" and data["epoch"] == self.epoch and not self.at:
            self.at = self.faults.cut_link(self.a, self.b, seconds=self.seconds).at


def fault_figures(runtime: RayRuntime, faults: FaultInjector, restart: Any, *,
                  epochs: int, seed: int) -> Figures:
    """Two parameter-server jobs of ``epochs`` epochs on every worker: in one a worker's
    whole device is killed a third into epoch 1 (then ``restart(device)`` boots it again);
    in the other a worker is cut from the server for 4 s (times the dilation) at epoch 1."""
    cluster = runtime.cluster
    workers = [d.name for d in cluster.with_role(Role.WORKER)]
    ps = cluster.with_role(Role.PARAMETER_SERVER)[0].name
    n = len(digits_split()[0].ids)
    config = TrainConfig(mode="async", epochs=epochs, seed=seed, heartbeat_s=0.5,
                         evaluation="after")
    kill = KillMidEpoch(workers[1], 1, n, nodes=faults.nodes)
    killed = train(runtime, config, equal_plan(cluster, n), events=kill)
    restart(workers[1])
    cut = _CutAt(faults, workers[0], ps, 1, 4.0 * runtime.time_dilation)
    cut_run = train(runtime, config, equal_plan(cluster, n), events=cut)
    return {
        "node_kill_training_completed": int(kill.fault is not None
                                            and _exactly_once(killed, epochs)),
        "node_kill_training_device": workers[1],
        "node_kill_training_interruptions": [(i.device, i.epoch)
                                             for i in killed.interruptions],
        "link_cut_recovered": int(cut.at > 0 and _exactly_once(cut_run, epochs)),
        "link_cut": f"{workers[0]}<->{ps}",
        "link_cut_interruptions": [(i.device, i.epoch) for i in cut_run.interruptions],
    }
