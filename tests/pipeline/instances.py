"""Pipeline instances shared by the tests: random small problems (hypothesis), a case
worked by hand, random chains."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from edgewise.nn.chain import ModelChain
from edgewise.pipeline.generate import MB
from edgewise.pipeline.problem import PipelineProblem

__all__ = ["problems", "random_chain", "worked"]


@st.composite
def problems(draw: st.DrawFn) -> PipelineProblem:
    n = draw(st.integers(3, 6))
    segs = draw(st.integers(4, 10))
    ints = st.integers(1_000, 5_000_000)
    chain = ModelChain("m", draw(ints), tuple(draw(st.lists(ints, min_size=segs,
                                                            max_size=segs))),
                       tuple(draw(st.lists(st.integers(1, 40), min_size=segs, max_size=segs))),
                       tuple(draw(st.lists(st.floats(1e6, 1e9), min_size=segs,
                                           max_size=segs))))
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
