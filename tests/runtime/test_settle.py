"""Calls a fault leaves running (a survivor's epoch whose server went away) are collected
when their attempt is torn down (``launch.settle``): Ray reports an errored result that is
dropped unread as an "Unhandled error" with a traceback, which a user of ``train`` or the
demo would read as a crash after the job recovered."""

from __future__ import annotations

import gc
import time
from typing import Any

import pytest
import ray
from ray._private import worker as ray_worker

from edgewise.cluster.model import Cluster
from edgewise.runtime.launch import settle
from edgewise.runtime.ray_cluster import start_local

pytestmark = pytest.mark.ray


@ray.remote
def _fails(label: str) -> None:
    raise RuntimeError(f"member {label} has ended")


def _reported(seen: list[Any], label: str) -> bool:
    return any(label in str(e) for e in seen)


def test_settled_failures_are_not_reported_and_dropped_ones_are(
        small_cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = start_local(small_cluster)
    try:
        seen: list[Any] = []
        monkeypatch.setattr(ray_worker, "_unhandled_error_handler", seen.append)
        dropped = _fails.remote("dropped")  # the control: never read, so Ray reports it
        del dropped
        settled = [_fails.remote("settled-a"), _fails.remote("settled-b")]
        settle(settled, timeout_s=60)
        del settled
        gc.collect()
        deadline = time.monotonic() + 60
        while not _reported(seen, "dropped") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _reported(seen, "dropped"), "Ray reported no unhandled error at all"
        assert not _reported(seen, "settled-a") and not _reported(seen, "settled-b")
    finally:
        rt.shutdown()


def test_settling_nothing_returns_at_once() -> None:
    settle([], timeout_s=0.0)
