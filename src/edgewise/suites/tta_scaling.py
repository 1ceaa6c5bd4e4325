"""The scaling part of ``bench time-to-accuracy``: the runtime bench's parameter-server
scaling efficiency on three Nanos, and the efficiency that the network allows for the
bytes each sample moved (:func:`link_bound`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import linprog

from edgewise.bench import Figures
from edgewise.cluster.model import Cluster, Role
from edgewise.runtime.ray_cluster import RayRuntime

__all__ = ["link_bound", "median_scaling", "scaling"]


def link_bound(runtime: RayRuntime, found: dict[str, Any], *, duplex: bool = False) -> float:
    """The scaling efficiency the network allows, the most samples/s the workers can train
    together over the sum of their rates alone.

    Each worker's own link to the server (the cluster file's pair; the testbed shapes each
    pair apart at its rate ÷ the dilation, the emulator likewise) carries that worker's
    pushes and replies, at most its rate ÷ the wire bytes each of its samples moved in the
    three-worker run; a worker trains at most that fast, and at most as fast as it did
    alone. The emulator carries both directions on one rate (a worker's thread waits out its
    push and then the reply), so there a sample's bytes are both directions' sum. ``duplex``
    (a testbed: ``tc`` shapes each direction of a pair apart) divides the rate into the
    busier direction's bytes alone (docs/workloads.md has the runs that exceeded the bound
    counted otherwise). On a testbed a device's port (``port_mbps``) is enforced too: the
    server's port carries every worker's pushes in and every reply out, so the workers'
    rates together fit it each way (a linear programme: most samples/s under the port;
    the emulator does not model ports, so without ``duplex`` they are not counted)."""
    cluster = runtime.cluster
    server = cluster.with_role(Role.PARAMETER_SERVER)[0].name
    solo: dict[str, float] = found["samples_per_second_alone"]
    received: dict[str, int] = found.get("transport_wire_bytes_received_by_worker", {})
    workers = list(solo)
    caps, pushes, replies = [], [], []
    for worker in workers:
        samples = max(found["samples_by_worker"].get(worker, 0), 1)
        both = found["transport_wire_bytes_by_worker"].get(worker, 0)
        reply = received.get(worker, 0) if duplex else 0
        per_sample = (max(reply, both - reply) if duplex else both) / samples
        rate = _bytes_per_s(cluster, worker, server, runtime.time_dilation, ports=duplex)
        caps.append(min(solo[worker], rate / per_sample) if per_sample > 0 else solo[worker])
        pushes.append((both - reply) / samples)
        replies.append(reply / samples)
    port = cluster.device(server).port_mbps if duplex else None
    total = sum(caps) if port is None else _most_under_port(
        caps, pushes, replies, port * 1e6 / 8 / runtime.time_dilation)
    return round(min(1.0, total / max(sum(solo.values()), 1e-9)), 4)


def _bytes_per_s(cluster: Cluster, worker: str, server: str, dilation: float, *,
                 ports: bool) -> float:
    """The pair's rate in bytes/s of the runtime's time, at most either end's port."""
    mbps = cluster.link(worker, server).bandwidth_mbps
    if ports:
        mbps = min([mbps, *(p for d in (worker, server)
                            if (p := cluster.device(d).port_mbps) is not None)])
    return mbps * 1e6 / 8 / dilation


def _most_under_port(caps: list[float], pushes: list[float], replies: list[float],
                     port_bytes_s: float) -> float:
    """The most samples/s in all, each worker at most its cap, with the pushes' bytes
    together and the replies' together each at most the port's rate."""
    done = linprog(-np.ones(len(caps)), A_ub=np.array([pushes, replies]),
                   b_ub=np.array([port_bytes_s, port_bytes_s]),
                   bounds=[(0.0, cap) for cap in caps], method="highs")
    return float(-done.fun) if done.status == 0 else 0.0


def scaling(runtime: RayRuntime, seed: int, epochs: int, *, duplex: bool = False,
            repeats: int = 1) -> Figures:
    """The runtime bench's scaling efficiency and the bound the network sets, both in the
    runtime's own (wall) time: a testbed shapes each link at its rate ÷ the dilation, and
    each direction apart (``duplex``); run ``repeats`` times (seeds ``seed``, ``seed +
    1``, ...), the run of the median efficiency reported (:func:`median_scaling`)."""
    from edgewise.runtime.bench import runtime_figures

    runs = []
    for r in range(max(repeats, 1)):
        found = runtime_figures(runtime, epochs=epochs, solo_epochs=max(2, epochs // 2),
                                seed=seed + r)
        samples = max(sum(found["samples_by_worker"].values()), 1)
        runs.append({
            "ps_scaling_efficiency_3_workers": found["ps_scaling_efficiency_3_workers"],
            "ps_scaling_link_bound": link_bound(runtime, found, duplex=duplex),
            "ps_scaling_wire_bytes_per_sample": round(found["transport_wire_bytes"] / samples, 1),
            "ps_server_busy_fraction": found["ps_server_busy_fraction"],
            "ps_worker_seconds_per_batch": found["worker_seconds_per_batch"]})
    return median_scaling(runs)


def median_scaling(runs: list[Figures]) -> Figures:
    """The run of the median ``ps_scaling_efficiency_3_workers`` (the lower of the two middle
    ones for an even count), with every run's efficiency beside it
    (``ps_scaling_efficiency_runs``, in run order): single runs scatter (docs/runtime.md)."""
    efficiencies = [float(r["ps_scaling_efficiency_3_workers"]) for r in runs]
    middle = sorted(range(len(runs)), key=lambda i: efficiencies[i])[(len(runs) - 1) // 2]
    return {**runs[middle], "ps_scaling_efficiency_runs": efficiencies}
