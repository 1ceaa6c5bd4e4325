"""One profile sample measured: the node state before training, training steps until the
stop rule (``perf.stability``) is met and the co-located app has finished a period, and the
values of a profile row (Deep-Edge §IV-B1)."""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

import numpy as np

from edgewise.perf.app_process import BackgroundApp
from edgewise.perf.metrics import sample_metrics, without_self
from edgewise.perf.stability import StepStats, StopRule

__all__ = ["APP_WAIT_S", "State", "Stepper", "measure_sample", "state_now"]

State = tuple[float, float, float]


def _state(metrics: dict[str, float]) -> State:
    return (metrics["cpu_percent"], metrics.get("accelerator_percent", 0.0),
            metrics["memory_percent"])


def state_now(interval_s: float = 0.25) -> State:
    """The node state (cpu, gpu, mem %) before the update runs, CPU averaged over
    ``interval_s``, memory without this process's (``metrics.without_self``)."""
    sample_metrics()  # primes psutil's CPU counter
    time.sleep(interval_s)
    return _state(without_self(sample_metrics()))


@contextmanager
def _sampled(period_s: float = 0.05) -> Iterator[list[State]]:
    """Node states sampled every ``period_s`` in a thread while the block runs."""
    states: list[State] = []
    stop = threading.Event()

    def loop() -> None:
        sample_metrics()
        while not stop.wait(period_s):
            states.append(_state(sample_metrics()))

    thread = threading.Thread(target=loop, name="profile-sampler", daemon=True)
    thread.start()
    try:
        yield states
    finally:
        stop.set()
        thread.join()


APP_WAIT_S = 30.0  # longest a sample trains on waiting for the app to finish a period


def _keep_training(t0: float, now: float, rule: StopRule, stats: StepStats,
                   app: BackgroundApp | None) -> bool:
    """Train on until ``rule`` is met (the minimum time and steps, then a narrow enough
    interval of the mean step time or the cap), and until the app has finished a period
    released during the sample (its records arrive after each period ends; on a loaded host
    a 0.3 s sample may see none), for at most APP_WAIT_S past the minimum time."""
    elapsed = now - t0
    if not rule.done(elapsed, stats):
        return True
    return app is not None and not app.exec_ms_between(t0, now) \
        and elapsed < rule.min_s + APP_WAIT_S


class Stepper(Protocol):
    """What a sample trains: one step at a batch size, (compute seconds, update seconds)."""

    def step(self, batch: int) -> tuple[float, float]: ...


def measure_sample(trainer: Stepper, batch: int, rule: StopRule, app: BackgroundApp | None,
                   before: State, dilation: float = 1.0, ps_state: State | None = None,
                   clock: Callable[[], float] = time.monotonic) -> dict[str, float]:
    """One sample's measured values (all but the identifying columns) from the state
    ``before`` training, times in device time (÷ ``dilation``), with the steps taken and
    the relative half-width of the 95 % interval of their mean time that ``rule`` stopped
    at; the server's state is ``ps_state`` (default: this machine's). ``clock`` reads
    seconds; the app's records are on ``time.monotonic``, the default."""
    for _ in range(2):  # warm-up at this batch size, not timed
        trainer.step(batch)
    computes: list[float] = []
    updates: list[float] = []
    stats = StepStats()  # of whole steps: compute + update
    t0 = clock()
    with _sampled() as states:
        while _keep_training(t0, clock(), rule, stats, app):
            compute_s, update_s = trainer.step(batch)
            computes.append(compute_s)
            updates.append(update_s)
            stats = stats.add(compute_s + update_s)
    t1 = clock()
    new = np.percentile(np.array(states or [before]), 95, axis=0)
    execs = app.exec_ms_between(t0, t1) if app else []
    ps = before if ps_state is None else ps_state
    return {"cpu": before[0], "gpu": before[1], "mem": before[2],
            "ps_cpu": ps[0], "ps_gpu": ps[1], "ps_mem": ps[2],
            # means, not medians: an epoch takes the sum of its steps, and under a CPU quota
            # most steps run unthrottled while a few wait out the period (a median saw
            # only the fast ones, and learned compute-time models erred 150-280 %)
            "compute_s_per_sample": statistics.fmean(computes) / batch / dilation,
            "update_s": statistics.fmean(updates) / dilation,
            "new_cpu": float(new[0]), "new_gpu": float(new[1]), "new_mem": float(new[2]),
            "app_exec_ms": float(np.percentile(execs, 95)) / dilation if execs else math.nan,
            "steps": stats.n, "step_time_ci95_rel": stats.ci95_rel}
