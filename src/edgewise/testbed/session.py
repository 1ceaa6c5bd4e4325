"""Run on a testbed from code: ``with testbed(cluster_file, name=...) as tb:`` brings it up
(or joins the live one of that name), joins this process as the driver and gives
``tb.runtime``, a :class:`~edgewise.runtime.ray_cluster.RayRuntime` that every run of the
runtime and the problems accepts unchanged; at the end it takes down what it brought up."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import ray

from edgewise.errors import ConfigError
from edgewise.runtime.faults import FaultInjector
from edgewise.runtime.ray_cluster import RayRuntime, device_resource
from edgewise.testbed import lifecycle
from edgewise.testbed.control import TestbedNodes
from edgewise.testbed.driver import joined
from edgewise.testbed.host import TestbedError
from edgewise.testbed.plan import DEFAULT_SUBNET, HostFacts
from edgewise.testbed.record import Record, read_record

__all__ = ["Testbed", "testbed"]


@dataclass(frozen=True, slots=True)
class Testbed:
    """A live testbed this process is joined to as the driver."""

    record: Record
    runtime: RayRuntime
    nodes: TestbedNodes
    state: Path | None = None

    @property
    def name(self) -> str:
        return self.record.name

    def faults(self) -> FaultInjector:
        """A fault injector with node-level faults on this testbed's devices."""
        return FaultInjector(self.nodes)

    def alive_nodes(self) -> int:
        """Devices of this testbed whose Ray node Ray reports alive. A device killed and
        started again has two node entries until Ray's health checks mark the old one dead
        (a fresh-clone suite run read 5 on four devices, 2026-12-05): it counts once."""
        alive = [n.get("Resources", {}) for n in ray.nodes()  # type: ignore[no-untyped-call]
                 if n.get("Alive")]
        return sum(any(device_resource(d) in r for r in alive)
                   for d in self.runtime.cluster.device_names)

    def restart_node(self, device: str, wait_s: float = 60.0) -> None:
        """Start ``device``'s node again (after a kill) and wait until Ray has it back."""
        lifecycle.restart_node(self.name, device, state=self.state, verify=False)
        deadline = time.monotonic() + wait_s
        while self.runtime.lost_devices((device,)) and time.monotonic() < deadline:
            time.sleep(0.5)
        if self.runtime.lost_devices((device,)):
            raise TestbedError(f"{device} did not come back within {wait_s:.0f} s")


def _live(name: str, state: Path | None, cluster_file: Path) -> Record | None:
    """The live testbed ``name`` if there is one, checked to be of ``cluster_file``."""
    record = read_record(name, state)
    if record is None or record.state != "up":
        return None
    cgroups = lifecycle.require_cgroups()
    if not any(cgroups.pids(n.cgroup) for n in record.plan.nodes):
        return None
    if Path(record.cluster_file) != cluster_file.resolve():
        raise ConfigError(f"testbed {name!r} runs {record.cluster_file}, not {cluster_file}",
                          field="name")
    return record


@contextmanager
def testbed(cluster_file: Path | str, name: str = "edgewise", *,
            subnet: str = DEFAULT_SUBNET, state: Path | None = None,
            host: HostFacts | None = None, keep: bool = False, fresh: bool = False,
            echo: Callable[[str], None] = lambda line: None) -> Iterator[Testbed]:
    """Testbed ``name`` of ``cluster_file`` with this process joined as its driver.

    A live testbed of that name is joined and left running (with ``fresh``: TestbedError,
    as ``up`` refuses it); otherwise one is brought up for the body and taken down
    afterwards (``keep`` leaves it up).
    """
    path = Path(cluster_file)
    record = None if fresh else _live(name, state, path)
    ours = record is None
    if record is None:
        record = lifecycle.up(path, name, subnet=subnet, state=state, host=host, echo=echo)
    try:
        with joined(record) as runtime:
            yield Testbed(record, runtime, TestbedNodes(record, lifecycle.require_cgroups()),
                          state)
    finally:
        if ours and not keep:
            lifecycle.down(name, state=state)
