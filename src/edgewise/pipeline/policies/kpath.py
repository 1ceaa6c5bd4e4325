"""Colour-coding k-path (Alon, Yuster & Zwick 1995), as SEIFER's Algorithm 2 uses it.

Written here: no library we use (networkx included) implements colour-coding. Each trial
colours the vertices with k random colours and a dynamic programme over colour subsets
finds a *colourful* path (all colours distinct, hence all vertices distinct). A given
k-path is colourful with probability k!/k^k ≥ e^-k, so ``ceil(ln(1/δ) · k^k/k!)`` trials
find an existing k-path with probability ≥ 1 - δ. Trials run as a batch: the DP state
for a colour subset is a (trials × vertices) boolean array, extended by one matrix
product with the adjacency. Time O(trials · 2^k · k · n²/batch-vectorised), memory
O(2^k · batch · n).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

__all__ = ["k_path", "n_trials"]

BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.int64]


def n_trials(k: int, delta: float) -> int:
    """Colourings needed to find an existing k-vertex path with probability ≥ 1 - δ."""
    return max(1, math.ceil(math.log(1.0 / delta) * float(k) ** k / math.factorial(k)))


def _colourful(adj: BoolArray, allowed: BoolArray, col: IntArray) -> dict[int, BoolArray]:
    """DP over colour subsets: ``reach[mask][t, v]`` iff trial ``t`` has a colourful path
    using exactly the colours ``mask`` that ends at ``v`` at position popcount(mask) - 1,
    every vertex allowed at its position."""
    k = allowed.shape[0]
    adj_f = adj.astype(np.float32)
    reach: dict[int, BoolArray] = {
        1 << c: allowed[0][None, :] & (col == c) for c in range(k)}
    for mask in range(1, 1 << k):  # subsets before supersets: mask | bit > mask
        cur = reach.get(mask)
        pos = mask.bit_count()
        if cur is None or pos == k or not cur.any():
            continue
        nxt = ((cur.astype(np.float32) @ adj_f) > 0) & allowed[pos][None, :]
        for c in range(k):
            if not mask >> c & 1:
                add = nxt & (col == c)
                prev = reach.get(mask | 1 << c)
                reach[mask | 1 << c] = add if prev is None else prev | add
    return reach


def _trace(reach: dict[int, BoolArray], adj: BoolArray, col: IntArray, t: int,
           v: int, k: int) -> list[int]:
    """Walk a colourful path of trial ``t`` back from its end ``v``."""
    path, mask = [v], (1 << k) - 1
    for _ in range(k - 1):
        mask ^= 1 << int(col[t, v])
        v = int(np.flatnonzero(reach[mask][t] & adj[:, v])[0])
        path.append(v)
    return path[::-1]


def k_path(adj: BoolArray, allowed: BoolArray, rng: np.random.Generator, *,
           delta: float = 1e-3, batch: int = 128) -> list[int] | None:
    """A simple path ``p_0, ..., p_{k-1}`` with ``allowed[i, p_i]`` for every ``i``.

    Fixed endpoints (Algorithm 2's ``s`` and ``u``) are expressed through ``allowed``:
    row 0 (or row k - 1) holds only that vertex, and a fixed ``u`` is allowed at no other
    position, so a path that reaches ``u`` early stops there (the paper's early stop).

    Parameters
    ----------
    adj : numpy.ndarray
        (n, n) symmetric boolean adjacency (the class-X subgraph G_c^X).
    allowed : numpy.ndarray
        (k, n) boolean: which vertices may take each position.
    rng : numpy.random.Generator
        Source of the random colourings.
    delta : float
        Allowed probability of missing an existing path.
    batch : int
        Colourings processed together.

    Returns
    -------
    list of int or None
        The path's vertices, or None if none was found (none exists, with probability
        ≥ 1 - δ).

    Examples
    --------
    >>> adj = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=bool)
    >>> k_path(adj, np.ones((3, 3), dtype=bool), np.random.default_rng(0)) in ([0, 1, 2],
    ...                                                                        [2, 1, 0])
    True
    """
    k, n = allowed.shape
    if k == 0 or not allowed.any(axis=1).all():
        return None
    left = n_trials(k, delta)
    while left > 0:
        size = min(batch, left)
        left -= size
        col = rng.integers(0, k, size=(size, n))
        reach = _colourful(adj, allowed, col)
        full = reach.get((1 << k) - 1)
        if full is not None and full.any():
            t, v = (int(x) for x in np.argwhere(full)[0])
            return _trace(reach, adj, col, t, v, k)
    return None
