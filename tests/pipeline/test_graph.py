"""Layer DAGs, SEIFER §3.1 candidate partition points and the chains between them."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import networkx as nx
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from typer.testing import CliRunner

from edgewise.cli import app
from edgewise.errors import ConfigError
from edgewise.nn import zoo
from edgewise.nn.graph import (
    candidate_points,
    explain_no_candidates,
    layer_dag,
    to_chain,
    topological_depth,
)


def _cells(n_cells: int, skip_two_back: bool) -> nx.DiGraph:
    """A stem and cells of two parallel branches (lengths 1 and 2) joined by an add; with
    ``skip_two_back`` the long branch reads the cell two back, as NASNet's cells do."""
    g = nx.DiGraph([("x", "stem")])
    prev2, prev = "x", "stem"
    for i in range(n_cells):
        long_in = prev2 if skip_two_back else prev
        g.add_edges_from([(prev, f"a{i}"), (f"a{i}", f"add{i}"),
                          (long_in, f"b{i}"), (f"b{i}", f"c{i}"), (f"c{i}", f"add{i}")])
        prev2, prev = prev, f"add{i}"
    g.add_edges_from([(prev, "head"), (prev2, "head")] if skip_two_back else [(prev, "head")])
    return g


def test_branching_cells_have_no_candidate_inside_a_cell() -> None:
    points = candidate_points(_cells(4, skip_two_back=False))
    assert points == ["x", "stem", "add0", "add1", "add2", "add3", "head"]


def test_nasnet_like_cells_have_no_candidate_at_all() -> None:
    g = _cells(5, skip_two_back=True)
    assert candidate_points(g) == ["x", "head"]
    assert "NASNet-like" in explain_no_candidates(g) or "bypassed" in explain_no_candidates(g)
    assert explain_no_candidates(_cells(2, skip_two_back=False)) == ""


@st.composite
def dags(draw: Any) -> nx.DiGraph:
    """A random DAG on 0..n-1 with edges i<j, closed to one source 0 and one sink n-1."""
    n = draw(st.integers(3, 10))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    keep = draw(st.lists(st.booleans(), min_size=len(pairs), max_size=len(pairs)))
    g = nx.DiGraph([e for e, k in zip(pairs, keep, strict=True) if k])
    g.add_nodes_from(range(n))
    g.add_edges_from((0, v) for v in range(1, n) if g.in_degree(v) == 0)
    g.add_edges_from((v, n - 1) for v in range(n - 1) if g.out_degree(v) == 0)
    return g


def _is_cut(g: nx.DiGraph, v: int) -> bool:
    if v in (0, len(g) - 1):
        return True
    h = g.copy()
    h.remove_node(v)
    return not nx.has_path(h, 0, len(g) - 1)


@settings(max_examples=200, deadline=None)
@given(dags())
def test_candidates_are_exactly_the_cut_vertices(g: nx.DiGraph) -> None:
    points = candidate_points(g)
    depth = topological_depth(g)
    assert points[0] == 0 and points[-1] == len(g) - 1
    assert all(_is_cut(g, v) for v in points)
    assert set(points) == {v for v in g if _is_cut(g, v)}
    assert [depth[p] for p in points] == sorted({depth[p] for p in points})
    chain = to_chain("random", _with_sizes(g), points)
    assert chain.n_segments == len(points) - 1
    assert sum(chain.flops) == len(g) - 1  # every vertex but the source, exactly once


def _with_sizes(g: nx.DiGraph) -> nx.DiGraph:
    h = g.copy()
    for i, v in enumerate(h):
        h.nodes[v].update(output_bytes=10 * (i + 1), param_bytes=1, flops=1.0)
    return h


def test_sequential_model_has_one_candidate_per_layer() -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
    dag = layer_dag(model, torch.randn(1, 8))
    points = candidate_points(dag)
    chain = to_chain("mlp", dag, points)
    assert dag.graph["tracer"] == "fx"
    assert len(points) == 4 and chain.n_segments == 3
    assert chain.input_bytes == 8 * 4
    assert chain.output_bytes == (16 * 4, 16 * 4, 4 * 4)
    assert chain.flops == (2 * 8 * 16, 16, 2 * 16 * 4)
    assert chain.memory_bytes == ((8 * 16 + 16) * 4 + 64, 64, (16 * 4 + 4) * 4 + 16)
    assert to_chain("mlp", layer_dag(model, torch.randn(1, 8), 2), points).input_bytes == 16


def test_to_chain_rejects_points_that_miss_the_sink() -> None:
    g = _with_sizes(_cells(2, skip_two_back=False))
    with pytest.raises(ConfigError, match="points"):
        to_chain("bad", g, ["x", "stem"])


@cache
def _zoo_dag(name: str) -> nx.DiGraph:
    model, example = zoo.build(name)
    return layer_dag(model, example)


def test_vgg16_has_many_points_and_138m_parameters() -> None:
    dag = _zoo_dag("vgg-16")
    points = candidate_points(dag)
    chain = to_chain("vgg-16", dag, points)
    params = sum(dag.nodes[v]["param_bytes"] for v in dag)
    assert len(points) >= 20
    assert params == pytest.approx(138_357_544 * 4, rel=1e-6)
    assert sum(chain.memory_bytes) >= params
    assert sum(chain.flops) == pytest.approx(31e9, rel=0.05)  # 15.5 GMACs


@pytest.mark.parametrize("name", zoo.zoo_names())
def test_every_zoo_model_traces_into_a_chain(name: str) -> None:
    dag = _zoo_dag(name)
    chain = to_chain(name, dag, candidate_points(dag))
    if name == "nasnet-toy":  # by construction: NASNet-like cells, no cut vertex
        assert chain.n_segments == 1 and explain_no_candidates(dag)
    else:
        assert chain.n_segments >= 5 and explain_no_candidates(dag) == ""
    assert chain.input_bytes > 0 and min(chain.output_bytes) > 0 and sum(chain.flops) > 0


def test_cli_analyze() -> None:
    runner = CliRunner()
    unknown = runner.invoke(app, ["pipeline", "analyze", "alexnet"])
    assert unknown.exit_code == 2 and "vgg-16" in unknown.output
    none = runner.invoke(app, ["pipeline", "analyze", "nasnet-toy"])
    assert none.exit_code == 0 and "no candidate" in none.output
    js = runner.invoke(app, ["pipeline", "analyze", "nasnet-toy", "--json"])
    assert js.exit_code == 0 and len(json.loads(js.output)["points"]) == 2
