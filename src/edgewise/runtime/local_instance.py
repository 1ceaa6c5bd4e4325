"""The local Ray instance that emulates devices: one per run, or one shared by many runs.

By default every emulated run starts an instance of its own (``address="local"``), which
it ends when it is done. A process that runs many emulated jobs one after another (a test
session, a notebook) can call :func:`share_local` instead: the runs then take their own
clusters' device resources on one instance, which starts once. Each device's resources
carry a tag naming its memory (:func:`device_tag`), so two clusters whose ``nano-0`` differ
in memory keep separate accounting, and clusters that name the same device with the same
memory share it, one run after another. Devices the instance does not carry yet are added
to it as one more Ray node on this host carrying just their resources (what Ray's own
``ray.cluster_utils.Cluster.add_node`` does for its tests): about a second, where a restart
took five and ended every actor of the instance.

Ray's own test suite shares its instances the same way (its ``ray_start_regular_shared``
fixture); starting Ray costs seconds of a 2-core machine, and a suite started it ~20 times.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from edgewise.runtime.added_nodes import LOOPBACK, add_node, end_node

_log = logging.getLogger(__name__)

__all__ = [
    "LOOPBACK_RAY_ENV",
    "LOOPBACK_SET_ENV",
    "REPORTER_INTERVAL_MS",
    "LocalInstance",
    "device_tag",
    "init_local",
    "kill_named_actors",
    "loopback_only",
    "reachable_again",
    "share_local",
    "shared",
    "unshare_local",
    "without_loopback",
]

NAMESPACE = "edgewise"
WORKER_NICENESS = 0
"""The nice level of the emulated devices' Ray workers. Ray starts workers at nice 15, so
that they yield to its raylet and GCS on a node of their own. Here every device shares one
host with the driver, and at nice 15 (a scheduler weight of 36 against 1024 at nice 0)
any other process of the host took the CPU from the devices first: the manager's HTTP
server, the driver's own threads, a neighbour on a CI runner. The manager's load
test beside ``stress-ng --cpu 1`` (50 clients, 250 requests a second) slowed an update job
by 1.131 and 1.124 with Ray's default, and by 1.018 and 1.022 at nice 0
(docs/manager-api.md). A testbed's nodes keep Ray's default: each is a device of its own,
as on real hardware."""
LOOPBACK_RAY_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # the node's address is 127.0.0.1
    "RAY_enable_metrics_collection": "0",  # no unauthenticated Prometheus exporter
}
"""What keeps an emulating instance's processes on loopback. ``_node_ip_address`` alone
did not: the head still took the host's address, and the GCS, raylets, agents and workers
listened on every interface (``::``, ``0.0.0.0``; 49 such listeners in issue 28's bench)."""
REPORTER_INTERVAL_MS = 60_000
KEPT_NODES = 2
"""How many of the nodes added for clusters stay up between runs (the most recently used;
a node that a running runtime uses is never ended).
An idle node still costs its raylet, dashboard agent and runtime-env agent: seven idle
nodes took 2.9 CPU-seconds per 30 s on the 2-core host (0.1 of a core), and a test
session added 12. Adding one back takes 1.4 CPU-seconds (both measured 2026-11-27 with
``share_local`` and six ``ensure`` calls)."""


def device_tag(memory_mb: int) -> str:
    """The tag of a device's resources on a shared instance: its memory (``m4096.``), so
    that devices of one name and another memory keep their own accounting, and clusters
    that name the same device with the same memory share its node, one run after another
    (a test session's clusters: 26 nodes added for them in a suite run of 2026-12-01,
    each a raylet and two agents started under load, when each cluster had a tag of its
    own)."""
    return f"m{memory_mb}."


def init_local(resources: dict[str, float], cores: int, object_store_mb: int) -> str:
    """Start a new local instance carrying ``resources`` on loopback; its GCS address.
    Never attaches to another Ray cluster of the machine (``address="local"``)."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    loopback_only()
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    # Ray's dashboard agent (one per node) samples every worker's CPU and memory each 5 s
    # for dashboard metrics that emulation never reads; every 60 s cut an idle instance
    # with six device nodes from 3.2 to 2.4 CPU-seconds per idle 30 s on the 2-core host.
    os.environ.setdefault("REPORTER_UPDATE_INTERVAL_MS", str(REPORTER_INTERVAL_MS))
    for attempt in range(1, HEAD_START_ATTEMPTS + 1):
        before = _ray_children()
        try:
            ray.init(
                address="local",
                num_cpus=cores,
                resources=resources,
                object_store_memory=object_store_mb * 1024 * 1024,
                include_dashboard=False,
                namespace=NAMESPACE,
                logging_level=logging.WARNING,
                log_to_driver=False,
                configure_logging=True,
                _node_ip_address=LOOPBACK,
                _system_config={"worker_niceness": WORKER_NICENESS,
                                "prestart_worker_first_driver": False},
            )
            break
        except Exception as exc:
            if "timed out during startup" not in str(exc) or attempt == HEAD_START_ATTEMPTS:
                raise
            _log.warning("the local Ray instance was slow to start (%s): starting it again",
                         exc)
            ray.shutdown()
            _end_processes(_ray_children() - before)
    _end_log_monitor()
    return str(ray.get_runtime_context().gcs_address)


HEAD_START_ATTEMPTS = 3
"""How often :func:`init_local` starts the instance when its head does not register within
Ray's fixed 30 s (a loaded 2-core host: one suite run's first start failed so, 2026-12-01);
each failed attempt's processes are ended before the next."""


def _ray_children() -> set[int]:
    """This process's descendants now (Ray's daemons among them)."""
    import psutil

    return {p.pid for p in psutil.Process().children(recursive=True)}


def _end_processes(pids: set[int]) -> None:
    """End the processes ``pids`` (a failed start's daemons), not waiting long."""
    import psutil

    found = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            process.kill()
            found.append(process)
    psutil.wait_procs(found, timeout=5)


def _end_log_monitor() -> None:
    """End the head's log monitor: it forwards workers' output to drivers, and this
    instance's driver asks for none (``log_to_driver=False``); the nodes added for clusters
    start none. Idle, it scans the session's log folder ten times a second: 22 CPU-seconds
    of the test suite's last 442 s (the heads of the commands, managers and test workers;
    sampled from /proc on the 2-core host, 2026-11-28). Workers' logs stay in their files."""
    import ray

    node: Any = ray._private.worker._global_node
    with contextlib.suppress(Exception):  # a Ray without it: the monitor keeps running
        node.kill_log_monitor(check_alive=False)


LOOPBACK_SET_ENV = "EDGEWISE_LOOPBACK_SET"
"""The keys of :data:`LOOPBACK_RAY_ENV` that :func:`loopback_only` set (a user's own
settings stay), comma-separated: in the environment, so that a child process (a command
an emulating test or demo runs) knows them too."""


def _ours(env: Mapping[str, str] = os.environ) -> set[str]:
    return {k for k in env.get(LOOPBACK_SET_ENV, "").split(",") if k}


def loopback_only() -> None:
    """Keep the instance this process starts on loopback: the processes Ray spawns read
    :data:`LOOPBACK_RAY_ENV`; this process read Ray's choice of address when it imported
    Ray, so that is set here too (``ray_constants.ENABLE_RAY_CLUSTER``, which Ray's
    ``get_node_ip_address`` consults). Only ever for a local instance: a driver that joins
    a real cluster must be reachable at its own address. The environment is set before
    this imports Ray, so that a process that calls this first (the manager) reads it at
    its own import too."""
    ours = _ours()
    for key, value in LOOPBACK_RAY_ENV.items():
        if key not in os.environ:
            os.environ[key] = value
            ours.add(key)
    if ours:
        os.environ[LOOPBACK_SET_ENV] = ",".join(sorted(ours))
    import ray._private.ray_constants as ray_constants

    if os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0":
        ray_constants.ENABLE_RAY_CLUSTER = False


def reachable_again() -> None:
    """Undo :func:`loopback_only` before this process joins a real cluster (a testbed, a
    cluster of devices), whose nodes must reach the driver at its own address."""
    import ray._private.ray_constants as ray_constants

    for key in (*_ours(), LOOPBACK_SET_ENV):
        os.environ.pop(key, None)
    if os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") != "0":
        ray_constants.ENABLE_RAY_CLUSTER = not ray_constants.IS_WINDOWS_OR_OSX


def without_loopback(env: dict[str, str]) -> dict[str, str]:
    """``env`` (a copy of this process's environment) less what :func:`loopback_only` set,
    here or in a parent: for the Ray processes of a real cluster this process starts (a
    testbed's ``ray start`` on each device), which must listen on their own addresses.
    Inherited, the loopback setting made every device's ``ray start`` refuse to join
    ("Multi-node Ray clusters are not supported") after an emulated run in the same
    process (the demo's part 1, then its part 2 on a testbed)."""
    drop = _ours(env) | {LOOPBACK_SET_ENV}
    return {k: v for k, v in env.items() if k not in drop}


def kill_named_actors() -> int:
    """Kill every named actor of the edgewise namespace (what a finished run left behind on
    a shared instance); how many."""
    import ray

    from edgewise.runtime.vessel_pool import clear_reservations, idle_vessel_names

    clear_reservations()  # the device resources its members held apart from their vessels
    keep = idle_vessel_names()  # this process's pooled vessels: no run's leftovers
    killed = 0
    for name in ray.util.list_named_actors():
        if name in keep:
            continue
        try:
            ray.kill(ray.get_actor(name, namespace=NAMESPACE))
            killed += 1
        except ValueError:  # gone in the meantime
            continue
    return killed


@dataclass(slots=True)
class LocalInstance:
    """The shared instance: every resource registered so far, and the address of the
    instance that carries them (``None`` until started)."""

    resources: dict[str, float] = field(default_factory=dict)
    cores: int = os.cpu_count() or 1
    object_store_mb: int = 256
    gcs_address: str | None = None
    starts: int = 0
    uses: int = 0
    added: int = 0
    carried: dict[str, float] = field(default_factory=dict)
    nodes: list[tuple[Any, frozenset[str]]] = field(default_factory=list)
    """The added nodes with the resources each carries, least recently used first."""
    users: dict[str, int] = field(default_factory=dict)
    """Per resource, how many runtimes that use it have not shut down yet."""

    def register(self, resources: dict[str, float], cores: int, object_store_mb: int) -> bool:
        """Add a cluster's resources; whether the instance must (re)start for them: it is
        not running, or its head's cores or object store no longer fit."""
        restart = cores != self.cores or object_store_mb > self.object_store_mb
        self.resources |= resources
        self.cores = cores
        self.object_store_mb = max(self.object_store_mb, object_store_mb)
        return restart or not self.running()

    def running(self) -> bool:
        import ray

        return (self.gcs_address is not None and ray.is_initialized()
                and ray.get_runtime_context().gcs_address == self.gcs_address)

    def ensure(self, resources: dict[str, float], cores: int, object_store_mb: int) -> None:
        """Carry ``resources`` on the shared instance: start it (with every resource seen so
        far) when it must, else add a node for the resources it does not carry yet."""
        self.uses += 1
        for key in resources:
            self.users[key] = self.users.get(key, 0) + 1
        if self.register(resources, cores, object_store_mb):
            self.end_nodes()
            self.gcs_address = init_local(dict(self.resources), self.cores,
                                          self.object_store_mb)
            self.carried = dict(self.resources)
            self.starts += 1
            return
        used = [n for n in self.nodes if n[1] & resources.keys()]
        self.nodes = [n for n in self.nodes if n not in used] + used
        new = {k: v for k, v in resources.items() if k not in self.carried}
        if new:
            assert self.gcs_address is not None
            node = add_node(self.gcs_address, new, self.object_store_mb)
            self.nodes.append((node, frozenset(new)))
            self.carried |= new
            self.added += 1

    def release(self, resources: Iterable[str]) -> None:
        """A runtime that used ``resources`` has shut down."""
        for key in resources:
            if self.users.get(key, 0) > 0:
                self.users[key] -= 1

    def trim(self, keep: int = KEPT_NODES, *, in_use_too: bool = False) -> int:
        """End all but the ``keep`` most recently used added nodes, leaving those a runtime
        still uses (unless ``in_use_too``); their clusters get a node again at their next
        run. How many were ended."""
        idle = [n for n in self.nodes
                if in_use_too or not any(self.users.get(k, 0) for k in n[1])]
        ended = idle[:max(0, len(self.nodes) - keep)]
        for entry in ended:
            node, keys = entry
            self.nodes.remove(entry)
            end_node(node)
            for key in keys:
                self.carried.pop(key, None)
        return len(ended)

    def end_nodes(self) -> None:
        """End the nodes added to the instance (before it ends or restarts)."""
        self.trim(keep=0, in_use_too=True)


_shared: LocalInstance | None = None


def shared() -> LocalInstance | None:
    """The shared instance, when :func:`share_local` is on."""
    return _shared


def share_local(resources: dict[str, float] | None = None) -> LocalInstance:
    """From now on, emulated runs in this process share one local instance; ``resources``
    (e.g. every cluster a test session uses) are carried from its first start on."""
    global _shared
    if _shared is None:
        _shared = LocalInstance()
    if resources:
        _shared.register(resources, _shared.cores, _shared.object_store_mb)
    return _shared


def unshare_local() -> None:
    """Back to one instance per run; ends the shared instance if it is running."""
    global _shared
    import ray

    if _shared is not None:
        _shared.end_nodes()
        if _shared.running():
            ray.shutdown()
    _shared = None
