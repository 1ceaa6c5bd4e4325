"""Candidate partition points of a layer DAG (SEIFER §3.1): topological depth by longest
path, then the all-paths check from the previous point."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable

import networkx as nx

from edgewise.errors import ConfigError

__all__ = ["candidate_points", "dag_ends", "explain_no_candidates", "topological_depth"]


def dag_ends(dag: nx.DiGraph) -> tuple[Hashable, Hashable]:
    src = dag.graph.get("source") or _only(v for v, d in dag.in_degree() if d == 0)
    snk = dag.graph.get("sink") or _only(v for v, d in dag.out_degree() if d == 0)
    return src, snk


def _only(vertices: Iterable[Hashable]) -> Hashable:
    found = list(vertices)
    if len(found) != 1:
        raise ConfigError(f"the DAG must have one source and one sink, found {found[:5]}",
                          field="dag")
    return found[0]


def topological_depth(dag: nx.DiGraph) -> dict[Hashable, int]:
    """LP(v): the number of edges on the longest path from the source to v, by relaxing the
    out-edges of each vertex in topological order (§3.1); O(V + E)."""
    dag_ends(dag)  # one source, one sink
    depth = dict.fromkeys(dag, 0)
    for u in nx.topological_sort(dag):
        for v in dag.successors(u):
            depth[v] = max(depth[v], depth[u] + 1)
    return depth


def _all_paths_through(dag: nx.DiGraph, depth: dict[Hashable, int], prev: Hashable,
                       u: Hashable) -> bool:
    """AP(prev, u): a DFS from ``prev`` that stops at ``u`` and fails on reaching a vertex
    deeper than ``u`` (a path that bypassed it)."""
    stack, seen = [prev], {prev}
    while stack:
        w = stack.pop()
        if w == u:
            continue
        if depth[w] > depth[u]:
            return False
        for s in dag.successors(w):
            if s not in seen:
                seen.add(s)
                stack.append(s)
    return u in seen


def candidate_points(dag: nx.DiGraph) -> list[Hashable]:
    """The candidate partition points p_0 = source, p_1, ..., in topological order (§3.1).

    ``p_k = u`` iff no other vertex has depth LP(u) and every path from ``p_{k-1}`` passes
    through ``u``. With one source and one sink these are exactly the vertices whose removal
    disconnects the source from the sink; the sink is always the last point.

    Examples
    --------
    >>> import networkx as nx
    >>> candidate_points(nx.DiGraph([("x", "a"), ("a", "b"), ("a", "c"), ("b", "d"),
    ...                              ("c", "d")]))
    ['x', 'a', 'd']

    Time: O(V + E) for the depths, O(V · (V + E)) for AP in the worst case.
    """
    depth = topological_depth(dag)
    source, _ = dag_ends(dag)
    count = Counter(depth.values())
    points = [source]
    for u in sorted((v for v in dag if count[depth[v]] == 1), key=depth.__getitem__):
        if depth[u] > 0 and _all_paths_through(dag, depth, points[-1], u):
            points.append(u)
    return points


def explain_no_candidates(dag: nx.DiGraph) -> str:
    """Why no candidate point lies strictly between the source and the sink ("" if some do)."""
    if len(candidate_points(dag)) > 2:
        return ""
    depth = topological_depth(dag)
    count = Counter(depth.values())
    inner = range(1, max(depth.values()))
    alone = [d for d in inner if count[d] == 1]
    if not alone:
        return (f"every depth from {inner.start} to {inner.stop - 1} is shared by ≥ 2 "
                "vertices: parallel branches (NASNet-like cells)")
    run = _longest_run([d for d in inner if count[d] > 1])
    msg = (f"the vertices alone at depths {', '.join(map(str, alone[:8]))} are bypassed by a "
           "longer edge from an earlier vertex (skip connections)")
    return msg + (f"; every depth from {run[0]} to {run[1]} is shared by ≥ 2 vertices: "
                  "parallel branches (NASNet-like cells)" if run else "")


def _longest_run(depths: list[int]) -> tuple[int, int] | None:
    best: tuple[int, int] | None = None
    start = None
    for i, d in enumerate(depths):
        start = d if start is None or depths[i - 1] != d - 1 else start
        if best is None or d - start > best[1] - best[0]:
            best = (start, d)
    return best


# ------------------------------------------------------------------ the chain
