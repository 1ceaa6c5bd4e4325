"""PA (Alg. 2) and DTA (Alg. 3): the vectorised PA agrees with the one-N version, PA's
cost is the brute-force cost of its deployment, and DTA moves no more data than needed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewise.sites.placement import Geometry, deploy_metric, dta, pa, pa_all, site_capacity
from edgewise.sites.scenario import default_scenario


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), sites=st.integers(2, 9))
def test_pa_all_matches_pa(seed: int, sites: int) -> None:
    problem = default_scenario(seed, n_sites=sites, n_jobs=1, horizon=5)
    geo, job = Geometry.of(problem), problem.jobs[0]
    rng = np.random.default_rng(seed)
    avail = geo.capacity * rng.uniform(0.2, 1.0, size=geo.capacity.shape)
    remaining = np.asarray(job.data)
    metric = deploy_metric(problem, geo, job, remaining, avail)
    costs, ps_sites = pa_all(geo, job, avail, metric, 12)
    for n in range(1, 13):
        placed = pa(geo, job, avail, metric, n)
        if placed is None:
            assert not math.isfinite(costs[n - 1])
            continue
        assert placed.param_cost == pytest.approx(costs[n - 1])
        assert placed.workers.sum() == n and placed.ps_site == ps_sites[n - 1]
        # brute force: the cost of this deployment under every PS site is no lower
        for ps in range(sites):
            other = pa(geo, job, avail, metric, n, ps)
            if other is not None:
                assert other.param_cost >= placed.param_cost - 1e-9


@settings(max_examples=60, deadline=None)
@given(data=st.lists(st.integers(0, 20), min_size=2, max_size=8), seed=st.integers(0, 999))
def test_dta_moves_only_what_is_needed(data: list[int], seed: int) -> None:
    n = len(data)
    problem = default_scenario(seed, n_sites=n, n_jobs=1, horizon=5)
    geo, job = Geometry.of(problem), problem.jobs[0]
    remaining = np.array(data, dtype=np.int64)
    target = np.random.default_rng(seed).integers(0, 25, size=n)
    cost, moves = dta(geo, job, remaining, target)
    into = np.zeros(n, dtype=np.int64)
    out = np.zeros(n, dtype=np.int64)
    for g in moves:
        into[g.dst] += g.chunks
        out[g.src] += g.chunks
    assert (into <= target).all() and (out <= remaining).all()           # (7a), no overdraw
    needed = int(np.maximum(target - remaining, 0).sum())
    surplus = int(np.maximum(remaining - target, 0).sum())
    moved = sum(g.chunks for g in moves if g.src != g.dst)
    assert moved == min(needed, surplus)                                   # no more than needed
    assert into.sum() == min(int(target.sum()), int(remaining.sum()))      # capacity used
    senders = {g.src for g in moves if g.src != g.dst}
    receivers = {g.dst for g in moves if g.src != g.dst}
    assert not senders & receivers
    assert cost == pytest.approx(sum(geo.q[g.src, g.dst] * job.chunk_mb * g.chunks
                                     for g in moves))


def test_dta_takes_the_cheapest_source_first() -> None:
    problem = default_scenario(0, n_sites=3, n_jobs=1, horizon=5)
    geo, job = Geometry.of(problem), problem.jobs[0]
    cheap = int(np.argmin([geo.q[0, 1], geo.q[0, 2]])) + 1
    _, moves = dta(geo, job, np.array([0, 5, 5]), np.array([4, 0, 0]))
    assert [(g.src, g.dst, g.chunks) for g in moves if g.src != g.dst] == [(cheap, 0, 4)]


def test_site_capacity_is_constraint_2b() -> None:
    problem = default_scenario(0, n_sites=2, n_jobs=1, horizon=5)
    job = problem.jobs[0]
    caps = site_capacity(job, np.array([0, 3]))
    assert caps[0] == 0 and caps[1] == math.floor(job.rho * 3 / job.epochs)
