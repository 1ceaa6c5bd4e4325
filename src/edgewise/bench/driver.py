"""The one benchmark driver: runs a BenchSpec's parts behind one progress callback and
returns one JSON-able object with a separate ``timings`` section and the spec's labels."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from edgewise.bench.progress import Progress, silent, within
from edgewise.bench.spec import BenchContext, BenchSpec, Figures, Timings

__all__ = ["load_object", "load_part", "run_bench"]


def load_object(path: str) -> Any:
    """The object at ``"module:name"``, imported now (the lazy import of a part or spec)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def load_part(path: str) -> Callable[..., Any]:
    """The function at ``"module:function"``."""
    found: Callable[..., Any] = load_object(path)
    return found


def _plots(spec: BenchSpec, figures: Figures, folder: Path) -> Figures:
    """The spec's plots, drawn with matplotlib's file backend (no display needed); they see
    the figures and, under ``timings``, the wall-clock figures measured so far."""
    import matplotlib

    matplotlib.use("Agg")
    assert spec.plots is not None
    made: Figures = load_part(spec.plots)(figures, folder)
    return made


def run_bench(spec: BenchSpec, *, seed: int = 0, quick: bool = False,
              include_real: bool = True, plots_dir: Path | None = None,
              options: Mapping[str, Any] | None = None,
              progress: Progress = silent) -> Figures:
    """Run ``spec``: its simulated part, its plots (into ``plots_dir``), and its real part
    unless ``include_real`` is False. Figures keep their keys; wall-clock figures go to
    ``timings`` (``bench_seconds`` is the whole run), labels to ``labels``."""
    started = time.perf_counter()
    chosen = {o.name: o.default for o in spec.options} | dict(options or {})
    real = spec.real is not None and (include_real or spec.simulated is None)
    split = (1.0 - spec.real_share if spec.simulated is not None else 0.0) if real else 1.0
    timings = Timings()
    ctx = BenchContext(seed, quick, chosen, within(progress, 0.0, split), timings)
    figures: Figures = {} if spec.simulated is None else load_part(spec.simulated)(ctx)
    if spec.plots is not None and plots_dir is not None and spec.simulated is not None:
        progress("plots", split)
        figures.update(_plots(spec, {**figures, "timings": dict(timings)}, plots_dir))
    if real:
        assert spec.real is not None
        ctx.progress = within(progress, split, 1.0)
        figures.update(load_part(spec.real)(ctx))
    if spec.plots is not None and plots_dir is not None and spec.simulated is None:
        # a real-only bench plots what it measured
        figures.update(_plots(spec, {**figures, "timings": dict(timings)}, plots_dir))
    timings["bench_seconds"] = time.perf_counter() - started
    progress("done", 1.0)
    return _assemble(spec, figures, timings)


def _assemble(spec: BenchSpec, figures: Figures, timings: Timings) -> Figures:
    clash = sorted(set(figures) & {"timings", "labels"})
    if clash:
        raise ValueError(f"{spec.name}: figures may not use the kit's keys {clash}")
    labels = dict(spec.labels)
    for key in spec.contract_timings:
        if key in timings:
            figures[key] = timings[key]
            labels.setdefault(key, "wall-clock seconds on this host (copied from timings for "
                                   "the earlier issue's contract)")
    return {**figures, "timings": dict(timings), "labels": labels}
