"""What a benchmark is: a BenchSpec (its parts, options and labels) and the context its parts
receive (seed, quick, options, progress, timings)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from edgewise.bench.progress import Progress, Ticker, silent

__all__ = ["INTERRUPTED", "BenchContext", "BenchOption", "BenchSpec", "Figures", "Timings"]

Figures = dict[str, Any]
INTERRUPTED = "interrupted"  # a figures key: true where Ctrl-C cut the bench short


@dataclass(frozen=True, slots=True)
class BenchOption:
    """A benchmark's own command-line option (``--name``), beside the kit's shared ones;
    ``kind="bool"`` is a flag ``--name`` (no value; absent means ``default``, False)."""

    name: str
    default: int | float | str | bool | None
    help: str
    kind: Literal["int", "float", "str", "path", "bool"] = "int"
    minimum: float | None = None
    maximum: float | None = None


@dataclass(frozen=True, slots=True)
class BenchSpec:
    """A headline experiment. ``simulated`` (deterministic for a seed), ``real`` (runs on
    Ray; skipped with ``--no-real`` where a simulated part exists) and ``plots`` are
    ``"module:function"`` paths that the driver imports only when it runs them: a part is
    ``part(ctx) -> Figures``; ``plots`` is ``plots(figures, folder) -> Figures`` (the keys
    naming the files it wrote).

    ``labels`` names keys that compare the emulator with its own formula (or are otherwise
    easy to misread), and says what they measure; ``contract_timings`` are wall-clock
    figures that earlier issues' contracts read at the top level: the driver copies them
    there from ``timings`` and labels them."""

    name: str
    title: str
    simulated: str | None
    real: str | None = None
    plots: str | None = None
    options: tuple[BenchOption, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    contract_timings: tuple[str, ...] = ()
    real_share: float = 0.5
    has_quick: bool = True

    def __post_init__(self) -> None:
        if self.simulated is None and self.real is None:
            raise ValueError(f"bench {self.name!r} has neither a simulated nor a real part")


class Timings(dict[str, Any]):
    """Wall-clock figures of a run, kept apart from the deterministic ones."""

    @contextmanager
    def timed(self, key: str) -> Iterator[None]:
        """Record the wall seconds of the body under ``key``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self[key] = time.perf_counter() - started


@dataclass(slots=True)
class BenchContext:
    """What a part receives: the shared options, its own ``options`` (by name), its
    ``progress`` (fractions in [0, 1] of this part) and the run's ``timings``."""

    seed: int = 0
    quick: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    progress: Progress = silent
    timings: Timings = field(default_factory=Timings)

    def ticker(self, total: int) -> Ticker:
        """Counts ``total`` steps of this part onto its progress."""
        return Ticker(self.progress, total)

    def option(self, name: str) -> Any:
        """The value of the benchmark's own option ``name``."""
        return self.options[name]
