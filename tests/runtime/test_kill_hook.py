"""The mid-epoch kill hook asks the engine for frequent progress readings while it is armed
(and only then), so that an epoch shorter than the engine's usual reading period is still
crashed in its middle (`train --kill-worker` once reported 0 interruptions so)."""

from __future__ import annotations

from typing import Any

from edgewise.cli.progress import TrainingProgress
from edgewise.runtime.faults import ARMED_POLL_S, KillMidEpoch, progress_poll_s


def test_the_hook_asks_for_frequent_readings_only_in_its_epoch_before_the_kill() -> None:
    hook = KillMidEpoch("nano-1", epoch=1, n_samples=300)
    assert hook.progress_poll_s is None  # no epoch started yet
    hook("epoch_start", {"epoch": 0})
    assert hook.progress_poll_s is None
    hook("progress", {"samples": 200})  # another epoch: no kill
    assert hook.fault is None
    hook("epoch_start", {"epoch": 1})
    assert hook.progress_poll_s == ARMED_POLL_S
    hook.fault = object()  # type: ignore[assignment]  # as if it fired: disarmed
    assert hook.progress_poll_s is None


def test_the_engine_reads_the_shortest_period_any_chained_hook_asks_for() -> None:
    class Asks:
        def __init__(self, period_s: float | None) -> None:
            self.progress_poll_s = period_s

        def __call__(self, kind: str, data: dict[str, Any]) -> None:
            pass

    assert progress_poll_s(lambda kind, data: None) is None
    assert progress_poll_s(TrainingProgress(2, 100)) is None
    assert progress_poll_s(TrainingProgress(2, 100, Asks(None), Asks(0.5), Asks(0.1))) == 0.1
    assert progress_poll_s(Asks(0.3)) == 0.3
