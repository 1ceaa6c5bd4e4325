"""Local emulation while someone else's Ray cluster runs on the machine (issue 15 §1b): a
foreign `ray start --head` on private ports, named by RAY_ADDRESS as Ray users do, must not
capture `start_local`; the head is stopped through its own process handle, never by a
machine-wide stop command."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import ray

from edgewise.cluster.model import Cluster
from edgewise.nn.data import digits_split
from edgewise.runtime import local_instance
from edgewise.runtime.engine import train
from edgewise.runtime.plan import TrainConfig, equal_plan
from edgewise.runtime.ray_cluster import connect

pytestmark = [pytest.mark.ray, pytest.mark.system, pytest.mark.slow,
              pytest.mark.own_instance]  # its own start ends the shared instance: last
RAY = str(Path(sys.executable).parent / "ray")


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _free_range(count: int, avoid: set[int]) -> int:
    """The first of ``count`` consecutive ports that are free now and none of ``avoid``:
    the worker ports' range, which must not hold another component's port (Ray refuses to
    start then: a fresh clone's run of 2026-12-06 drew the client server's port inside it)."""
    for _ in range(200):
        (lo,) = _free_ports(1)
        span = range(lo, lo + count)
        if span[-1] < 65536 and not avoid.intersection(span) and all(map(_bindable, span)):
            return lo
    raise RuntimeError(f"no {count} consecutive free ports found")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _pids_mentioning(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.fixture()
def foreign_head() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A Ray head of its own (private ports, its own temp dir, no token), stopped by
    terminating its `ray start --block` process and then killing what still runs from
    its temp dir: only its processes."""
    temp = tempfile.mkdtemp(prefix="ewfh", dir="/tmp")  # short: Ray's socket paths
    ports = _free_ports(8)
    gcs, nm, om, client, agent, agent_grpc, metrics, env_agent = ports
    lo = _free_range(21, set(ports))
    argv = [RAY, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={gcs}",
            f"--node-manager-port={nm}", f"--object-manager-port={om}",
            f"--ray-client-server-port={client}", f"--dashboard-agent-listen-port={agent}",
            f"--dashboard-agent-grpc-port={agent_grpc}", f"--metrics-export-port={metrics}",
            f"--runtime-env-agent-port={env_agent}", f"--min-worker-port={lo}",
            f"--max-worker-port={lo + 20}", "--num-cpus=1", "--include-dashboard=false",
            f"--temp-dir={temp}", "--disable-usage-stats"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["RAY_AUTH_MODE"] = "disabled"
    # beside stress-ng and the rest of the suite the raylet once took longer than Ray's
    # default wait for its registration (60 s), and the head gave up (2026-11-27)
    env["RAY_raylet_start_wait_time_s"] = "240"
    log = Path(temp) / "start.log"
    with log.open("wb") as out:
        head = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while b"--block" not in log.read_bytes():  # printed once the node registered
            assert head.poll() is None, "the foreign head did not start: " + log.read_text()
            assert time.monotonic() < deadline, "the foreign head took over 240 s"
            time.sleep(0.3)
        yield f"127.0.0.1:{gcs}", head
    finally:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            head.kill()
        for pid in _pids_mentioning(temp):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)


def test_emulation_starts_its_own_instance_beside_a_foreign_head(
        foreign_head: tuple[str, subprocess.Popen[bytes]], small_cluster: Cluster,
        monkeypatch: pytest.MonkeyPatch) -> None:
    address, head = foreign_head
    monkeypatch.setenv("RAY_ADDRESS", address)  # as a Ray user's shell has it
    monkeypatch.delenv("EDGEWISE_RAY_ADDRESS", raising=False)
    # a start of its own, as a command's is, not the test session's shared instance
    monkeypatch.setattr(local_instance, "_shared", None)
    runtime = connect(small_cluster)  # no address: emulate locally
    try:
        gcs = ray.get_runtime_context().gcs_address
        assert gcs != address
        assert runtime.emulated and runtime.owned and len(ray.nodes()) == 1  # type: ignore[no-untyped-call]
        ids = np.sort(digits_split()[0].ids)
        plan = equal_plan(runtime.cluster, len(ids))
        result = train(runtime, TrainConfig(epochs=1, heartbeat_s=0.5), plan)
        assert np.array_equal(np.sort(result.epochs[0].applied_ids), ids)
    finally:
        runtime.shutdown()
    assert head.poll() is None  # the foreign head still runs

