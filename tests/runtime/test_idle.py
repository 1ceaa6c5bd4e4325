"""The evaluation's idle-priority thread: only its own thread is lowered, and it runs work."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from edgewise.runtime.idle import idle_executor, lower_this_thread


def _policy() -> int:
    return os.sched_getscheduler(0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SCHED_IDLE is Linux's")
def test_the_idle_thread_is_sched_idle_and_no_other_thread_is() -> None:
    before = _policy()
    pool = idle_executor("test")
    try:
        name, policy = pool.submit(lambda: (threading.current_thread().name, _policy())).result()
        assert name.startswith("test") and policy == os.SCHED_IDLE
        assert pool.submit(sum, [1, 2, 3]).result() == 6  # and it runs what it is given
    finally:
        pool.shutdown()
    assert _policy() == before  # the caller's thread keeps its policy


def test_lowering_a_thread_says_how() -> None:
    seen: list[str] = []
    thread = threading.Thread(target=lambda: seen.append(lower_this_thread()))
    thread.start()
    thread.join()
    expected = {"idle"} if hasattr(os, "SCHED_IDLE") else {"nice", "none"}
    assert seen[0] in expected


def test_an_unlowered_thread_keeps_its_callers_policy() -> None:
    """An emulated device's evaluation thread: not lowered, it runs at the caller's policy."""
    pool = idle_executor("plain", lowered=False)
    try:
        assert pool.submit(_policy).result() == _policy()
    finally:
        pool.shutdown()
