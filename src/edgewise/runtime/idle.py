"""A thread that runs only when nothing else of its device wants the CPU: for work beside the
training (the evaluation beside the next epoch, ``runtime.readings``) that must not slow it.

Linux's ``SCHED_IDLE`` policy gives a thread the least weight there is (below nice 19): on a
busy CPU it runs only in what the others leave, and on a testbed device it shares the
device's cgroup quota on those terms. Where the platform has no ``SCHED_IDLE``, the thread
takes the lowest nice value instead; where neither can be set, it runs as any thread.

Only where the device is a CPU of its own (a testbed's cgroup, a real board). A host that
emulates the devices runs them all in one kernel: there an idle thread yields to every other
device's work, not to its own device's, and it shares its process's GIL. Preempted while it
holds the GIL, it stalls the process's other threads until the host has a moment to spare:
on a loaded 2-core host the evaluator's heartbeat went silent and the engine struck a
healthy device (CI's failures of 2026-12-06, reproduced under load; docs/testing.md).
Emulated devices are paced by their throttle (``runtime.throttle``), not by their share of
the host, so there the thread runs at its caller's priority (``lowered=False``)."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["IDLE_NICE", "idle_executor", "lower_this_thread"]

IDLE_NICE = 19


def lower_this_thread() -> str:
    """Put the calling thread at idle priority (Linux: only this thread, not its process);
    returns how: ``"idle"`` (SCHED_IDLE), ``"nice"`` (nice 19) or ``"none"``."""
    policy = getattr(os, "SCHED_IDLE", None)
    if policy is not None:
        try:
            os.sched_setscheduler(0, policy, os.sched_param(0))
            return "idle"
        except OSError:
            pass
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), IDLE_NICE)
        return "nice"
    except (AttributeError, OSError):
        return "none"


def idle_executor(name: str, lowered: bool = True) -> ThreadPoolExecutor:
    """One thread, at idle priority (:func:`lower_this_thread`) for as long as it lives; with
    ``lowered`` False at its caller's (an emulated device: this module's docstring)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=name,
                              initializer=lower_this_thread if lowered else None)
