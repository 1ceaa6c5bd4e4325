"""The §6.1 sweep: deterministic, and both scorings of Eq. 3 on the same clusters."""

from __future__ import annotations

import numpy as np

from edgewise.nn.chain import ModelChain
from edgewise.pipeline.bench import _summary, sweep

MB = 2**20


def _chains() -> list[ModelChain]:
    rng = np.random.default_rng(3)
    out = []
    for k in range(2):
        segs = 12
        out.append(ModelChain(f"c{k}", 600_000, tuple(int(x) for x in rng.integers(
            10_000, 4_000_000, segs)), tuple(int(x) for x in rng.integers(10, 40, segs) * MB),
            (1.0,) * segs))
    return out


def test_sweep_is_deterministic_and_dropping_the_dispatcher_never_raises_the_optimum() -> None:
    chains = _chains()
    paper = sweep(trials=4, node_counts=(5,), seed=1, exact_nodes=5, chains=chains)
    again = sweep(trials=4, node_counts=(5,), seed=1, exact_nodes=5, chains=chains)
    deployed = sweep(trials=4, node_counts=(5,), seed=1, exact_nodes=5, chains=chains,
                     dispatcher_transfer=True)
    strip = ("_seconds",)
    assert [{k: v for k, v in r.items() if not k.endswith(strip)} for r in paper] == \
        [{k: v for k, v in r.items() if not k.endswith(strip)} for r in again]
    assert len(paper) == len(deployed) > 0
    for a, b in zip(paper, deployed, strict=True):
        assert a["model"] == b["model"]
        assert a["best"] <= b["best"]  # same cluster, one term fewer in the max
        assert a["bottleneck-dp"] == a["best"]
    summary = _summary(paper)
    assert summary["speedup_vs_random_mean"] >= 1.0
    assert set(summary["speedup_vs_random_by_model"]) == {"c0", "c1"}
