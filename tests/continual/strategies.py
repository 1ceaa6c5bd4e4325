"""Random small Ekya instances for the oracle tests."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import strategies as st

from edgewise.continual.problem import (
    ContinualProblem,
    InferenceOption,
    RetrainOption,
    StreamState,
)

RATES = (1.0, 0.75, 0.5, 0.25, 0.1)


@st.composite
def streams(draw: st.DrawFn, name: str) -> StreamState:
    acc = draw(st.floats(0.3, 0.9))
    demand = draw(st.sampled_from((0.25, 0.5, 1.0)))
    alpha = draw(st.floats(0.4, 1.0))
    n_cfg = draw(st.integers(0, 3))
    retrain = tuple(RetrainOption(f"c{k}", draw(st.floats(0.3, 0.99)), draw(st.floats(5.0, 300.0)))
                    for k in range(n_cfg))
    infer = tuple(InferenceOption(f"s{r}", r ** alpha, r * demand) for r in RATES)
    return StreamState(name, acc, retrain, infer)


@st.composite
def problems(draw: st.DrawFn, max_streams: int = 3) -> ContinualProblem:
    n = draw(st.integers(1, max_streams))
    return ContinualProblem(
        tuple(draw(streams(f"v{i}")) for i in range(n)),
        accelerators=float(draw(st.sampled_from((1, 2, 3)))),
        window_s=draw(st.sampled_from((120.0, 200.0))),
        delta=draw(st.sampled_from((0.25, 0.5))),
        a_min=draw(st.sampled_from((0.0, 0.2, 0.4))))


def random_problem(rng: np.random.Generator, n_streams: int) -> ContinualProblem:
    """A seeded random instance of the same family as ``problems``."""
    out = []
    for i in range(n_streams):
        demand, alpha = float(rng.choice((0.25, 0.5, 1.0))), float(rng.uniform(0.4, 1.0))
        retrain = tuple(RetrainOption(f"c{k}", float(rng.uniform(0.3, 0.99)),
                                      float(rng.uniform(5.0, 300.0)))
                        for k in range(int(rng.integers(0, 4))))
        infer = tuple(InferenceOption(f"s{r}", r ** alpha, r * demand) for r in RATES)
        out.append(StreamState(f"v{i}", float(rng.uniform(0.3, 0.9)), retrain, infer))
    return ContinualProblem(tuple(out), float(rng.choice((1, 2, 3))),
                            float(rng.choice((120.0, 200.0))), float(rng.choice((0.25, 0.5))),
                            float(rng.choice((0.0, 0.2, 0.4))))


@st.composite
def options_with_checkpoints(draw: st.DrawFn, name: str) -> RetrainOption:
    """A retraining option with 0-4 earlier checkpoints at increasing compute."""
    cost = draw(st.floats(5.0, 300.0))
    cuts = sorted(draw(st.lists(st.integers(1, 19), max_size=4, unique=True)))
    points = tuple((k / 20 * cost, draw(st.floats(0.1, 0.99))) for k in cuts)
    return RetrainOption(name, draw(st.floats(0.3, 0.99)), cost, points)


@st.composite
def checkpoint_problems(draw: st.DrawFn, max_streams: int = 2) -> ContinualProblem:
    """Like ``problems``, with checkpoints in every retraining option."""
    base = draw(problems(max_streams))
    streams = tuple(replace(s, retrain=tuple(draw(options_with_checkpoints(f"c{k}"))
                                             for k in range(len(s.retrain))))
                    for s in base.streams)
    return replace(base, streams=streams)
