"""An epoch's validation reading: measured by the run's evaluating worker after the epoch,
or beside the next one (``TrainConfig.evaluation``)."""

from __future__ import annotations

from typing import Any

import ray

from edgewise.runtime.launch import PS_PROBE_S, Attempt, await_all, ps_get

__all__ = ["evaluate_beside", "evaluate_epoch"]


def evaluate_epoch(run: Attempt, heartbeat_s: float, events: Any) -> dict[str, Any]:
    """The validation metric of the server's weights, measured by the run's evaluator
    (``val_accuracy``, ``validation_seconds``, and the BatchNorm ``statistics`` it measured
    with, for the checkpoint); a lost evaluator interrupts the attempt."""
    ref = run.workers[run.evaluator].evaluate.remote()
    return dict(await_all(run, {run.evaluator: ref}, heartbeat_s, events)[run.evaluator])


def evaluate_beside(run: Attempt) -> Any:
    """Start the evaluation of the server's weights as they are now, to run beside the next
    epoch: the weights are taken before it begins (waited for where they are, not fetched
    here), and the evaluator reads them into a network of the evaluation's own; returns its
    result's ObjectRef (``Worker.evaluate``). A server that does not answer interrupts."""
    weights = [shard.weights.remote() for shard in run.shards]
    ready, _ = ray.wait(weights, num_returns=len(weights), fetch_local=False,
                        timeout=PS_PROBE_S)
    if len(ready) < len(weights):
        ps_get(run, weights, timeout_s=0)
    return run.workers[run.evaluator].evaluate.remote(weights)
