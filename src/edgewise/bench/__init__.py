"""The one benchmark kit: BenchSpec, the driver, progress, timings and plots."""

from edgewise.bench.driver import load_object, load_part, run_bench
from edgewise.bench.progress import Progress, Ticker, silent, within
from edgewise.bench.spec import INTERRUPTED, BenchContext, BenchOption, BenchSpec, Figures, Timings

__all__ = [
    "INTERRUPTED", "BenchContext", "BenchOption", "BenchSpec", "Figures", "Progress", "Ticker",
    "Timings", "load_object", "load_part", "run_bench", "silent", "within",
]  # fmt: skip
