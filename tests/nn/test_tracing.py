"""A trace in one thread and a workload's dry run in another, in one process (the manager
plans a pipeline while it validates an update): the dry run waits for the trace instead of
being taken into it (fx patches every module's call while it traces)."""

from __future__ import annotations

import threading

import torch
from torch import nn

from edgewise.nn.graph import layer_dag
from edgewise.nn.workload import DIGITS, validate


class _Pausing(nn.Module):
    """A model whose forward pauses (while being traced) until the test lets it go on."""

    def __init__(self, inside: threading.Event, go_on: threading.Event) -> None:
        super().__init__()
        self.inside, self.go_on, self.lin = inside, go_on, nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.inside.set()
        # the test sets go_on in a finally; the timeout only bounds a test killed meanwhile
        self.go_on.wait(timeout=300.0)
        return self.lin(x)


def test_a_dry_run_during_a_trace_waits_for_it_and_succeeds() -> None:
    validate(DIGITS, batch_size=8)  # data loaded and cached: the next dry run is quick
    inside, go_on = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def guarded(work: object) -> None:
        try:
            work()  # type: ignore[operator]
        except BaseException as exc:
            errors.append(exc)

    tracer = threading.Thread(target=guarded, args=(
        lambda: layer_dag(_Pausing(inside, go_on), torch.zeros(1, 4)),))
    checker = threading.Thread(target=guarded, args=(lambda: validate(DIGITS, batch_size=8),))
    tracer.start()
    try:
        assert inside.wait(timeout=120.0)  # the trace is under way, paused in forward
        checker.start()
        checker.join(timeout=3.0)  # without the lock it would run (and fail) inside the trace
        # the trace stays paused until go_on (no timer runs out under it however slow the
        # host), so a checker that waits for the lock is alive here
        assert checker.is_alive() and errors == []  # it waits for the trace to end
    finally:
        go_on.set()
    tracer.join()
    checker.join()
    assert errors == []
