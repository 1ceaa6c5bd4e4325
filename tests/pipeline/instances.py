"""Pipeline instances shared by the tests: random small problems (hypothesis), a case
worked by hand, random chains."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from edgewise.nn.chain import ModelChain
from edgewise.pipeline.generate import MB
from edgewise.pipeline.problem import PipelineProblem

__all__ = ["problems", "random_chain", "typed_problems", "worked"]


def _chain(draw: st.DrawFn, segs: int) -> ModelChain:
    """A chain of ``segs`` segments: input and output bytes, memory and FLOPs drawn."""
    sizes = st.integers(1_000, 5_000_000)

    def each(values: st.SearchStrategy[float]) -> tuple[float, ...]:
        return tuple(draw(st.lists(values, min_size=segs, max_size=segs)))

    return ModelChain("m", draw(sizes), tuple(int(x) for x in each(sizes)),
                      tuple(int(x) for x in each(st.integers(1, 40))),
                      each(st.floats(1e6, 1e9)))


@st.composite
def problems(draw: st.DrawFn) -> PipelineProblem:
    n = draw(st.integers(3, 6))
    chain = _chain(draw, draw(st.integers(4, 10)))
    memory = tuple(draw(st.lists(st.integers(30, 120), min_size=n, max_size=n)))
    upper = draw(st.lists(st.floats(0.5, 100.0), min_size=(n + 1) * n // 2,
                          max_size=(n + 1) * n // 2))
    bw = np.zeros((n + 1, n + 1))
    bw[np.triu_indices(n + 1, 1)] = upper
    bw += bw.T
    gflops = draw(st.none() | st.lists(st.floats(0.1, 10.0), min_size=n, max_size=n))
    return PipelineProblem(chain, tuple(f"n{i}" for i in range(n)), memory, bw,
                           None if gflops is None else tuple(gflops),
                           dispatcher_transfer=draw(st.booleans()))


def worked() -> PipelineProblem:
    """3 segments of 10 B on 3 nodes of 10 B: one segment per node, so only the placement
    matters. Every transfer is 3.024e6 B = 1e6 B after λ = 3.024, i.e. 8 / bw seconds.
    Links (Mbit/s): d–n0 10, d–n1 1, d–n2 1, n0–n1 1, n0–n2 5, n1–n2 10. Paths from d:
    d→n0→n2→n1 has min bandwidth 5 (bottleneck 1.6 s); every other order crosses a
    1 Mbit/s link (8 s)."""
    chain = ModelChain("worked", 3_024_000, (3_024_000, 3_024_000, 10), (10, 10, 10),
                       (1.0, 1.0, 1.0))
    bw = np.array([[0, 10, 1, 1], [10, 0, 1, 5], [1, 1, 0, 10], [1, 5, 10, 0]], dtype=float)
    return PipelineProblem(chain, ("n0", "n1", "n2"), (10, 10, 10), bw)


def random_chain(rng: np.random.Generator, segs: int) -> ModelChain:
    return ModelChain("gen", int(rng.integers(1_000, 10_000)),
                      tuple(int(x) for x in rng.integers(10_000, 2_000_000, segs)),
                      tuple(int(x) for x in rng.integers(8 * MB, 30 * MB, segs)),
                      tuple(float(x) for x in rng.uniform(1e8, 1e9, segs)))


@st.composite
def typed_problems(draw: st.DrawFn) -> PipelineProblem:
    """Clusters of 1–3 device types, 1–3 devices each: links depend on the two types only
    (within a type too), so the program counts devices per type."""
    counts = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    kinds = [k for k, c in enumerate(counts) for _ in range(c)]
    chain = _chain(draw, draw(st.integers(3, 8)))
    t = len(counts)
    mem = draw(st.lists(st.integers(30, 120), min_size=t, max_size=t))
    speed = draw(st.lists(st.floats(0.1, 10.0), min_size=t, max_size=t))
    pair = draw(st.lists(st.floats(0.5, 100.0), min_size=t * t, max_size=t * t))
    to_dispatcher = draw(st.lists(st.floats(0.5, 100.0), min_size=t, max_size=t))
    n = len(kinds)
    bw = np.zeros((n + 1, n + 1))
    for a, ka in enumerate(kinds):
        bw[0, a + 1] = bw[a + 1, 0] = to_dispatcher[ka]
        for b, kb in enumerate(kinds):
            if a != b:
                lo, hi = min(ka, kb), max(ka, kb)
                bw[a + 1, b + 1] = pair[lo * t + hi]
    return PipelineProblem(chain, tuple(f"n{i}" for i in range(n)),
                           tuple(mem[k] for k in kinds), bw, tuple(speed[k] for k in kinds),
                           dispatcher_transfer=draw(st.booleans()))
