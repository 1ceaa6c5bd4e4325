"""A thread that runs only when nothing else of its device wants the CPU: for work beside the
training (the evaluation beside the next epoch, ``runtime.readings``) that must not slow it.

Linux's ``SCHED_IDLE`` policy gives a thread the least weight there is (below nice 19): on a
busy CPU it runs only in what the others leave, and on a testbed device it shares the
device's cgroup quota on those terms. Where the platform has no ``SCHED_IDLE``, the thread
takes the lowest nice value instead; where neither can be set, it runs as any thread."""

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


def idle_executor(name: str) -> ThreadPoolExecutor:
    """One thread, at idle priority (:func:`lower_this_thread`) for as long as it lives."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=name,
                              initializer=lower_this_thread)
