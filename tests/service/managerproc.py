"""The manager as users run it: ``edgewise serve`` in a subprocess on loopback, with its own
state directory, a real emulated cluster on Ray and a token."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from tests.needs import require

STARTUP_S = 180.0
FINAL = ("succeeded", "failed", "stopped", "interrupted")


def skip_unless_ci(reason: str) -> None:
    """Skip, saying why, where a tool the test needs cannot be had; fail in CI, where
    ``make test`` installs it (tests/needs.py)."""
    require(False, reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


PLANNING_S = 180
"""The served manager's wall-time limit of one planning request in these tests. The
default, 20 s, is a bound a loaded host overran: beside ``stress-ng --cpu 1`` and the rest
of the suite, an SROLE placement and a MobileNet dry run each took longer (2026-11-27).
The limit itself is tested in test_limits.py."""


@dataclass
class ManagerProcess:
    """One ``edgewise serve`` process (restartable on the same state directory)."""

    state_dir: Path
    token: str = "manager-test-token-0123456789"
    port: int = field(default_factory=free_port)
    options: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    client: httpx.Client | None = None
    """One connection pool per start: ``httpx.get`` builds a client (and its TLS context)
    each call, 18 ms of CPU, which the load test's polling would add to the host's load."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def start(self) -> None:
        env = {**os.environ, "EDGEWISE_STATE_DIR": str(self.state_dir),
               "EDGEWISE_TOKEN": self.token, "PYTHONUNBUFFERED": "1"}
        self.starts += 1
        self._new_client()
        log = open(self.state_dir / f"serve-{self.starts}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from edgewise.cli import main; main()", "serve",
             "--port", str(self.port), "--planning-seconds", str(PLANNING_S), *self.options],
            env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"the manager exited: {self.log_tail()}")
            try:
                if self._client().get("/api/v1/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        pytest.fail(f"the manager did not answer within {STARTUP_S} s: {self.log_tail()}")

    def _new_client(self) -> None:
        if self.client is not None:
            self.client.close()
        self.client = httpx.Client(base_url=self.url, headers=self.headers)

    def _client(self) -> httpx.Client:
        if self.client is None:
            self._new_client()
        assert self.client is not None
        return self.client

    def log_tail(self, lines: int = 15) -> str:
        logs = sorted(self.state_dir.glob("serve-*.log"))
        text = logs[-1].read_text(errors="replace") if logs else ""
        return "\n".join(text.splitlines()[-lines:])

    def descendants(self) -> list[psutil.Process]:
        assert self.proc is not None
        return psutil.Process(self.proc.pid).children(recursive=True)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM, as a service manager would; SIGKILL if it does not end in 90 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.kill9()

    def get(self, path: str, **options: Any) -> Any:
        response = self._client().get(path, timeout=30, **options)
        response.raise_for_status()
        return response.json()

    def post(self, path: str, body: Any = None) -> Any:
        # A submission with a workload waits for its dry run in a planning child (a Python
        # start, torch, one batch through the model): seconds on a quiet host, over a minute
        # beside a loaded suite. Not a timing claim: the request must be answered.
        response = self._client().post(path, json=body, timeout=180)
        assert response.status_code < 300, response.text
        return response.json()

    def delete(self, path: str) -> Any:
        response = self._client().delete(path, timeout=30)
        assert response.status_code < 300, response.text
        return response.json()

    def clear_strikes(self) -> None:
        """Clear every device's strikes: a test starts with every device in the plans,
        whatever the tests before it struck (a killed worker, a member that fell silent
        beside a loaded suite)."""
        for device, count in self.get("/api/v1/strikes")["strikes"].items():
            if count:
                self.delete(f"/api/v1/strikes/{device}")

    def wait_job(self, job_id: str, states: tuple[str, ...] = FINAL,
                 timeout_s: float = 240.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            job: dict[str, Any] = self.get(f"/api/v1/jobs/{job_id}")
            if job["state"] in states:
                return job
            time.sleep(0.5)
        pytest.fail(f"{job_id} not in {states} within {timeout_s} s: {job}")
