"""Networks: Table I's resources round-robin (§V-A), and offline pre-training networks in §V-A's
"RL Training" ranges."""

from __future__ import annotations

import numpy as np

from edgewise.modelparallel.network import HOST_GHZ, TABLE_I, pretraining_network, random_network


def test_pretraining_networks_draw_the_papers_ranges() -> None:
    rng = np.random.default_rng(0)
    nets = [pretraining_network(rng) for _ in range(200)]
    sizes = {net.n for net in nets}
    assert min(sizes) == 2 and max(sizes) == 10  # "in the range of [2,10]"
    for net in nets:
        assert net.n_clusters == 1
        cap = net.capacity()
        ghz = cap[:, 0] * HOST_GHZ
        assert np.all((ghz >= 0.5 - 1e-2) & (ghz <= 2.0 + 1e-2))
        assert np.all((cap[:, 1] >= 64.0) & (cap[:, 1] <= 4096.0))
        link = cap[:, 2] / 8.0  # MBps, each node's link
        assert np.all((link >= 128.0) & (link <= 1000.0))


def test_table_i_resources_are_assigned_round_robin() -> None:
    """§V-A: "the resources of the devices were assigned in a round-robin way" (Table I,
    container row): memory and link bandwidth cycle through their values, CPU (a range) is
    drawn in it."""
    net = random_network(10, np.random.default_rng(0))
    mems, (low, high), bws = TABLE_I["container"]
    for j, node in enumerate(net.nodes):
        assert node.memory_mb == mems[j % 5] and node.bandwidth_mbps == bws[j % 5]
        assert low <= node.cpu <= high
    assert net.pair_mbps(0, 4) == min(bws[0], bws[4]) == 50
