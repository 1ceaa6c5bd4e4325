"""Per-stream profile traces for the trace-driven simulator (§6.1): types and CSV files.

A trace directory holds four CSV files (documented in docs/ekya.md):

- ``streams.csv``: ``stream,initial_accuracy,demand`` — the deployed model's accuracy on
  window 0 and the accelerator share full-rate inference needs to keep up.
- ``retrain.csv``: ``window,stream,config,compute_s,accuracy`` — each configuration's
  retraining accuracy over compute time (accelerator-seconds at one whole accelerator); the
  last point of a (window, stream, config) curve is its end accuracy and its cost.
- ``drift.csv``: ``window,stream,retained`` — the fraction of its accuracy a model keeps
  when the stream moves from window w-1 to window w (data drift; window 0 is unused).
- ``inference.csv``: ``subsampling,<stream>,<stream>...`` — the fraction of the model's
  accuracy inference keeps when it analyses that fraction of the frames.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from edgewise.errors import ConfigError

__all__ = ["Curve", "Trace", "load_trace", "write_trace"]

FILES = ("streams.csv", "retrain.csv", "drift.csv", "inference.csv")


@dataclass(frozen=True, slots=True)
class Curve:
    """Retraining accuracy over compute time for one (window, stream, config)."""

    compute_s: tuple[float, ...]
    accuracy: tuple[float, ...]

    @property
    def cost_s(self) -> float:
        return self.compute_s[-1]

    @property
    def final(self) -> float:
        return self.accuracy[-1]


@dataclass(frozen=True, slots=True)
class Trace:
    """Everything the simulator replays: see the module docstring for the meaning."""

    streams: tuple[str, ...]
    initial_accuracy: Mapping[str, float]
    demand: Mapping[str, float]
    windows: int
    configs: tuple[str, ...]
    curves: Mapping[tuple[int, str, str], Curve]
    retained: Mapping[tuple[int, str], float]
    subsampling: tuple[float, ...]
    inference_factor: Mapping[str, tuple[float, ...]]

    def __post_init__(self) -> None:
        for w in range(self.windows):
            for s in self.streams:
                for c in self.configs:
                    if (w, s, c) not in self.curves:
                        raise ConfigError(f"no curve for window {w}, stream {s!r}, config "
                                          f"{c!r}", field="retrain.csv")
        missing = [s for s in self.streams if s not in self.inference_factor]
        if missing:
            raise ConfigError(f"no column for {', '.join(missing)}", field="inference.csv")

    def subset(self, streams: tuple[str, ...]) -> Trace:
        """The same trace restricted to ``streams`` (in that order)."""
        keep = set(streams)
        return Trace(streams, {s: self.initial_accuracy[s] for s in streams},
                     {s: self.demand[s] for s in streams}, self.windows, self.configs,
                     {k: v for k, v in self.curves.items() if k[1] in keep},
                     {k: v for k, v in self.retained.items() if k[1] in keep},
                     self.subsampling, {s: self.inference_factor[s] for s in streams})


    def with_cost_scale(self, scale: float) -> Trace:
        """The same trace with every retraining's compute (each curve's time axis) times
        ``scale``; inference demands unchanged. The recording's stretch fixes the cost
        scale, which the paper does not pin (docs/ekya.md, "Where the headline holds")."""
        if not scale > 0 or not math.isfinite(scale):
            raise ConfigError(f"must be a positive number, got {scale}", field="cost_scale")
        curves = {k: Curve(tuple(t * scale for t in c.compute_s), c.accuracy)
                  for k, c in self.curves.items()}
        return Trace(self.streams, self.initial_accuracy, self.demand, self.windows,
                     self.configs, curves, self.retained, self.subsampling,
                     self.inference_factor)


def _rows(path: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    if not path.is_file():
        raise ConfigError("file not found", source=str(path))
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        missing = set(columns) - set(reader.fieldnames or ())
        if missing:
            raise ConfigError(f"missing columns {', '.join(sorted(missing))}", source=str(path))
        return list(reader)


def _num(row: Mapping[str, str], key: str, path: Path) -> float:
    try:
        return float(row[key])
    except ValueError:
        raise ConfigError(f"not a number: {row[key]!r}", source=str(path), field=key) from None


def load_trace(directory: str | Path) -> Trace:
    """Read a trace directory (the four CSV files of the module docstring)."""
    d = Path(directory)
    srows = _rows(d / "streams.csv", ("stream", "initial_accuracy", "demand"))
    streams = tuple(r["stream"] for r in srows)
    points: dict[tuple[int, str, str], list[tuple[float, float]]] = {}
    path = d / "retrain.csv"
    for r in _rows(path, ("window", "stream", "config", "compute_s", "accuracy")):
        key = (int(_num(r, "window", path)), r["stream"], r["config"])
        points.setdefault(key, []).append((_num(r, "compute_s", path),
                                           _num(r, "accuracy", path)))
    curves = {k: Curve(tuple(c for c, _ in sorted(v)), tuple(a for _, a in sorted(v)))
              for k, v in points.items()}
    dpath = d / "drift.csv"
    retained = {(int(_num(r, "window", dpath)), r["stream"]): _num(r, "retained", dpath)
                for r in _rows(dpath, ("window", "stream", "retained"))}
    ipath = d / "inference.csv"
    irows = sorted(_rows(ipath, ("subsampling",)), key=lambda r: -_num(r, "subsampling", ipath))
    return Trace(
        streams,
        {r["stream"]: _num(r, "initial_accuracy", d / "streams.csv") for r in srows},
        {r["stream"]: _num(r, "demand", d / "streams.csv") for r in srows},
        1 + max((k[0] for k in curves), default=-1),
        tuple(sorted({k[2] for k in curves})), curves, retained,
        tuple(_num(r, "subsampling", ipath) for r in irows),
        {s: tuple(_num(r, s, ipath) for r in irows) for s in streams if irows and s in irows[0]})


def write_trace(trace: Trace, directory: str | Path) -> Path:
    """Write ``trace`` as the four CSV files under ``directory`` (created if needed)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    with (d / "streams.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["stream", "initial_accuracy", "demand"])
        w.writerows([s, f"{trace.initial_accuracy[s]:.6g}", f"{trace.demand[s]:.6g}"]
                    for s in trace.streams)
    with (d / "retrain.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["window", "stream", "config", "compute_s", "accuracy"])
        for (win, s, c), curve in sorted(trace.curves.items()):
            w.writerows([win, s, c, f"{t:.6g}", f"{a:.6g}"]
                        for t, a in zip(curve.compute_s, curve.accuracy, strict=True))
    with (d / "drift.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["window", "stream", "retained"])
        w.writerows([win, s, f"{r:.6g}"] for (win, s), r in sorted(trace.retained.items()))
    with (d / "inference.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["subsampling", *trace.streams])
        for i, rate in enumerate(trace.subsampling):
            w.writerow([f"{rate:.6g}", *(f"{trace.inference_factor[s][i]:.6g}"
                                         for s in trace.streams)])
    return d
