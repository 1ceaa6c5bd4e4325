"""The environment's network as an emulated Ray cluster: one device per node at its CPU share,
links at the environment's rates (a lone transfer's, or the shared rate of a whole round),
and the stage actors a placement needs (one per run of consecutive partitions on a node)."""

from __future__ import annotations

from edgewise.cluster.model import Cluster, Device, Link
from edgewise.modelparallel.jct import occupancy, pair_rates_mbps
from edgewise.modelparallel.problem import EdgeNetwork, EdgeNode, TaskPlacement
from edgewise.modelparallel.schedule import Plan, Round
from edgewise.runtime.emulation import EmulationConfig

__all__ = ["cluster_network", "network_cluster", "network_emulation", "shared_links",
           "stage_runs"]


def network_cluster(network: EdgeNetwork, name: str = "srole-real") -> Cluster:
    """The emulated cluster of an environment's network: one device per node, named like
    it, with its memory and ``speed`` = its CPU (host ratio), so that under
    :func:`network_emulation` a node computes at ``cpu`` of one host core; every pair linked
    at the rate of a lone transfer between them (the slower of the two nodes' links), with
    no latency (the environment's transfer model has none)."""
    devices = tuple(Device(n.name, "srole-node", 1, "none", max(1, int(n.memory_mb)), n.cpu)
                    for n in network.nodes)
    links = tuple(Link(a.name, b.name, network.pair_mbps(i, j), 0.0)
                  for i, a in enumerate(network.nodes) for j, b in enumerate(network.nodes)
                  if i < j)  # fmt: skip
    default = Link("*", "*", float(min(lk.bandwidth_mbps for lk in links) if links else 1e3), 0.0)
    return Cluster(name, devices, default, links)


def cluster_network(cluster: Cluster) -> EdgeNetwork:
    """The environment's network of a cluster file (the inverse of :func:`network_cluster`):
    one node per device, named like it, with its speed as its CPU, its memory, and its
    fastest link as its own link; one group of nodes, all within range of each other."""
    nodes = tuple(EdgeNode(d.name, d.speed, float(d.memory_mb), max(
        cluster.link(d.name, o.name).bandwidth_mbps for o in cluster.devices if o != d))
        for d in cluster.devices)
    return EdgeNetwork(nodes, (0,) * len(nodes))


def network_emulation(network: EdgeNetwork, host_cores: int | None = None) -> EmulationConfig:
    """Emulation where host ratio 1.0 is one host core: ``host_speed`` = max(1, largest CPU),
    so a node's stretch is ``host_speed / cpu`` (= 1 / cpu on Table I's ranges)."""
    speed = max(1.0, *(n.cpu for n in network.nodes))
    if host_cores is None:
        return EmulationConfig(host_speed=speed)
    return EmulationConfig(host_speed=speed, host_cores=host_cores)


def stage_runs(placement: TaskPlacement) -> tuple[tuple[int, int], ...]:
    """The maximal runs of consecutive partitions placed on one node, as half-open index
    ranges ``(first, end)``: one stage actor each. Nothing crosses a link inside a run, so
    the environment's ``iteration_time_s`` of the placement is that of the runs."""
    runs: list[tuple[int, int]] = []
    for i, host in enumerate(placement.nodes):
        if runs and placement.nodes[runs[-1][0]] == host:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    return tuple(runs)


def shared_links(problem: Round, plan: Plan, job: int) -> dict[tuple[str, str], Link]:
    """Every pair of the round's nodes linked at the rate the environment gives job
    ``job``'s transfers between them when the whole round runs (`jct.pair_rates_mbps`: the
    slower link, shared max-min fairly with the round's other transfers and background
    traffic)."""
    net = problem.network
    occ = occupancy(net, problem.jobs, plan, problem.background)
    rates = pair_rates_mbps(problem.jobs[job], plan[job], net, occ, problem.alpha,
                            problem.overload)
    return {(a.name, b.name): Link(a.name, b.name, float(rates[i, k]), 0.0)
            for i, a in enumerate(net.nodes) for k, b in enumerate(net.nodes) if i != k}
