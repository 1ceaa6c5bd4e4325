"""The manager's device agents start in the background: a start that failed (agents too slow
to answer on a loaded host) is reported to the call that finds it and tried again, so that
the manager is not left without agents for good."""

from __future__ import annotations

from typing import Any

import pytest

from edgewise.errors import ConfigError
from edgewise.service import cluster as services


class _FlakyAgents:
    """Fails its first start, as agents that did not answer in time; then comes up."""

    starts = 0

    def __init__(self, runtime: Any, heartbeat_s: float) -> None:
        _FlakyAgents.starts += 1
        if _FlakyAgents.starts == 1:
            raise TimeoutError("Get timed out: some object(s) not ready.")
        self.runtime = runtime

    def device_metrics(self) -> dict[str, dict[str, float]]:
        return {"nano-0": {"cpu": 0.5}}

    def inject_fault(self, kind: str, device: str, peer: str | None,
                     seconds: float) -> dict[str, Any]:
        return {"kind": kind, "target": device}

    def close(self) -> None:
        pass


def test_a_failed_start_is_reported_once_and_tried_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(services, "RayDeviceServices", _FlakyAgents)
    _FlakyAgents.starts = 0
    background = services.BackgroundDeviceServices(runtime="rt")
    background._thread.join(10)

    with pytest.raises(ConfigError, match=r"did not start: Get timed out.*starting them again"):
        background.inject_fault("kill-worker", "nano-0", None, 0.0)
    assert background.inject_fault("kill-worker", "nano-0", None, 0.0) == {
        "kind": "kill-worker", "target": "nano-0"}
    assert background.device_metrics() == {"nano-0": {"cpu": 0.5}}
    assert _FlakyAgents.starts == 2
    background.close()
