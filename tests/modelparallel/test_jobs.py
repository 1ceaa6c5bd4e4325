"""Jobs derived from real models through graph analysis, and the §V-A background load."""

from __future__ import annotations

import numpy as np
import pytest

from edgewise.errors import ConfigError
from edgewise.modelparallel.jobs import (
    JOB_CPU,
    background_tasks,
    cluster_jobs,
    make_job,
    max_levels,
    model_profile,
    pagerank_jobs,
)
from edgewise.modelparallel.models import build_srole_model
from edgewise.modelparallel.network import random_network

LEVELS = {"vgg-16": 16, "googlenet": 11, "rnn": 4}  # weight layers / modules, §III levels


@pytest.mark.parametrize("name", ["vgg-16", "googlenet", "rnn"])
def test_profiles_keep_the_models_parameters_and_flops(name: str) -> None:
    model, _ = build_srole_model(name)
    prof = model_profile(name)
    n_params = sum(p.numel() for p in model.parameters())
    assert sum(prof.param_mb) == pytest.approx(4 * n_params / 1e6)
    assert len(prof.gflop) == LEVELS[name] and all(g >= 0 for g in prof.gflop)
    assert all(p > 0 for p in prof.param_mb)  # every level holds weights
    job = make_job("j", name, origin=0, batch=8)
    assert len(job.partitions) == LEVELS[name]
    assert sum(p.cpu for p in job.partitions) == pytest.approx(JOB_CPU)
    assert sum(p.gflop for p in job.partitions) == pytest.approx(3 * 8 * sum(prof.gflop))


@pytest.mark.parametrize("name", ["vgg-16", "googlenet", "rnn"])
def test_coarser_grouping_merges_whole_levels(name: str) -> None:
    levels, grouped = model_profile(name), model_profile(name, n_partitions=3)
    assert 2 <= len(grouped.gflop) <= 3
    assert set(grouped.labels) <= set(levels.labels) and grouped.labels[-1] == levels.labels[-1]
    assert sum(grouped.gflop) == pytest.approx(sum(levels.gflop))
    assert sum(grouped.act_mb) == pytest.approx(sum(levels.act_mb))
    assert max_levels() == 16 and max_levels(3) == 3
    with pytest.raises(ConfigError, match="n_partitions"):
        model_profile(name, n_partitions=0)


def test_vgg16_for_mnist_has_its_known_size() -> None:
    model, _ = build_srole_model("vgg-16")
    assert sum(p.numel() for p in model.parameters()) == 33_638_218


def test_workload_levels_and_jobs_per_cluster() -> None:
    assert [pagerank_jobs(w) for w in (50, 60, 70, 80, 90, 100)] == [1, 2, 3, 4, 5, 6]
    net = random_network(10, np.random.default_rng(0))
    assert len(background_tasks(net, 100, np.random.default_rng(0))) == 2 * 6 * 3
    jobs = cluster_jobs(net, "rnn", np.random.default_rng(0))
    assert len(jobs) == 6 and len({j.origin for j in jobs}) == 6
    with pytest.raises(ConfigError, match="workload"):
        pagerank_jobs(40)
    with pytest.raises(ConfigError, match="n_edges"):
        random_network(7, np.random.default_rng(0))
