"""Ray nodes of a testbed: the ``ray start`` line of each device, run inside the device's
namespace and cgroup, with the testbed's token."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from edgewise.runtime.local_instance import REPORTER_INTERVAL_MS, without_loopback
from edgewise.runtime.ray_cluster import (
    INLINE_ENV,
    LABEL_DEVICE,
    LABEL_DILATION,
    LABEL_LATENCY,
    device_resources,
)
from edgewise.testbed.cgroups import Cgroups
from edgewise.testbed.host import TestbedError
from edgewise.testbed.net import NETNS_DIR
from edgewise.testbed.plan import GCS_PORT, NodePlan, TestbedPlan

__all__ = ["LABEL_TESTBED", "node_argv", "node_env", "spawn_in", "start_node", "start_nodes"]

LABEL_TESTBED = "edgewise.io/testbed"
START_TIMEOUT_S = 180.0
PARALLEL_STARTS = 2  # more at once and a small loaded host misses Ray's 30 s registration

# Ray's knobs for a node on a shared small host: no worker processes started ahead of
# need (each costs a Python start under the device's quota), and room for a worker to
# register under a small quota.
_RAY_ENV = {
    "RAY_enable_worker_prestart": "0",
    "RAY_prestart_worker_first_driver": "0",
    "RAY_worker_register_timeout_seconds": "300",
    "RAY_USAGE_STATS_ENABLED": "0",
    # the dashboard agent's per-worker CPU and memory samples feed a dashboard no testbed
    # head starts (--include-dashboard=false): every 60 s, as on emulation
    "REPORTER_UPDATE_INTERVAL_MS": str(REPORTER_INTERVAL_MS),
    # a parameter server's frames inline, not through the object store and the raylets
    # that share a small device's quota (ray_cluster.INLINE_OBJECT_BYTES)
    **INLINE_ENV,
}


def node_env(token_path: Path | str) -> dict[str, str]:
    """The environment of every testbed process: this one's, with token authentication on
    the testbed's token (an inherited RAY_AUTH_TOKEN or RAY_ADDRESS would win over it)."""
    env = {k: v for k, v in without_loopback(dict(os.environ)).items()
           if k not in ("RAY_AUTH_TOKEN", "RAY_ADDRESS")}
    return env | _RAY_ENV | {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_path)}


def node_argv(plan: TestbedPlan, node: NodePlan, ray: str, latency_in: str) -> list[str]:
    """``ray start`` for ``node``: its device's resources and cores (as on a real device),
    an object store and memory that fit the device, and labels naming the testbed
    and the device."""
    object_store = node.object_store_mb * 2**20
    labels = (f"{LABEL_TESTBED}={plan.name},{LABEL_DILATION}={plan.time_dilation:.6f},"
              f"{LABEL_LATENCY}={latency_in},{LABEL_DEVICE}={node.device}")
    argv = [ray, "start", f"--node-ip-address={node.address}", f"--num-cpus={node.num_cpus}",
            "--num-gpus=0", f"--resources={json.dumps(device_resources_of(node))}",
            f"--object-store-memory={object_store}",
            f"--memory={node.memory_mb * 2**20 - object_store}",
            f"--temp-dir={node.temp_dir}", f"--labels={labels}", "--disable-usage-stats",
            "--include-log-monitor=false", "--log-style=record", "--log-color=false"]
    if node.head:
        return [*argv, "--head", f"--port={GCS_PORT}", "--include-dashboard=false"]
    return [*argv, f"--address={plan.head_address}"]


def device_resources_of(node: NodePlan) -> dict[str, int]:
    return device_resources(node.device, node.memory_mb)


def spawn_in(cgroups: Cgroups, node: NodePlan, argv: list[str], env: dict[str, str],
             log: Path | int | None = None, netns: bool = True,
             **popen: object) -> subprocess.Popen[bytes]:
    """Start ``argv`` inside ``node``'s cgroup and (unless not ``netns``) its network
    namespace; it joins the cgroup before it execs, so every process it starts is in there
    too. It enters the namespace with ``nsenter --net`` and keeps the host's mounts: ``ip
    netns exec`` mounts a fresh /sys without the cgroup file systems, and a process there
    cannot see the quota and limit that make it a device (its stressors loaded the host's
    cores, its metrics read the host's CPU)."""
    joins = " ".join(f'echo $$ > {shlex.quote(str(f))} || exit 97;'
                     for f in cgroups.procs_files(node.cgroup))
    where = shlex.quote(f"{NETNS_DIR}/{node.netns}")
    enter = f"nsenter --net={where} -- " if netns else ""
    script = f'{joins} exec {enter}"$@"'
    out = log.open("ab") if isinstance(log, Path) else log
    try:
        proc: subprocess.Popen[bytes] = subprocess.Popen(  # type: ignore[call-overload]
            ["/bin/sh", "-c", script, "sh", *argv], env=env, stdout=out,
            stderr=subprocess.STDOUT if out is not None else None, start_new_session=True,
            **popen)
        return proc
    finally:
        if isinstance(log, Path) and out is not None and not isinstance(out, int):
            out.close()


def start_node(plan: TestbedPlan, node: NodePlan, cgroups: Cgroups, ray: str,
               token_path: Path | str, latency_in: str, attempts: int = 3,
               cancelled: threading.Event | None = None) -> None:
    """Run ``ray start`` for ``node`` and wait for it, again after a failure (Ray gives a
    raylet 30 s to register, which a loaded host can miss) unless ``cancelled``;
    TestbedError with Ray's last words when every attempt failed."""
    for attempt in range(attempts):
        try:
            _start_once(plan, node, cgroups, ray, token_path, latency_in)
            return
        except TestbedError:
            cgroups.kill(node.cgroup)
            if attempt == attempts - 1 or (cancelled is not None and cancelled.is_set()):
                raise


def _start_once(plan: TestbedPlan, node: NodePlan, cgroups: Cgroups, ray: str,
                token_path: Path | str, latency_in: str) -> None:
    Path(node.temp_dir).mkdir(parents=True, exist_ok=True)
    log = Path(node.temp_dir) / "ray-start.log"
    proc = spawn_in(cgroups, node, node_argv(plan, node, ray, latency_in),
                    node_env(token_path), log)
    try:
        code = proc.wait(timeout=START_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise TestbedError(f"ray start on {node.device} took over {START_TIMEOUT_S:.0f} s "
                           f"(see {log})") from None
    if code != 0:
        tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-3:]
        raise TestbedError(f"ray start on {node.device} failed ({code}): "
                           + " | ".join(tail)[-400:])


def start_nodes(plan: TestbedPlan, cgroups: Cgroups, ray: str, token_path: Path | str,
                latency_in: str) -> None:
    """The head first, then the others, :data:`PARALLEL_STARTS` at a time."""
    start_node(plan, plan.head, cgroups, ray, token_path, latency_in)
    others = [n for n in plan.nodes if not n.head]
    if not others:
        return
    pool = ThreadPoolExecutor(max_workers=PARALLEL_STARTS)
    cancelled = threading.Event()
    try:  # no `with`: on Ctrl-C the caller's clean-up kills the starts; do not wait here
        futures = [pool.submit(start_node, plan, n, cgroups, ray, token_path, latency_in,
                               cancelled=cancelled) for n in others]
        for f in futures:
            f.result()
    except BaseException:
        cancelled.set()
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
