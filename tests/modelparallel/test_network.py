"""Offline pre-training networks follow §V-A's "RL Training" ranges."""

from __future__ import annotations

import numpy as np

from edgewise.modelparallel.network import HOST_GHZ, pretraining_network


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
        off = net.bandwidth_mbps[~np.eye(net.n, dtype=bool)] / 8.0  # MBps
        assert np.all((off >= 128.0) & (off <= 1000.0))
        assert np.allclose(net.bandwidth_mbps, net.bandwidth_mbps.T)
