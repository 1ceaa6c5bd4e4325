"""The shipped profile trace, and recording a real one from the drifting digits streams.

``record_digits_trace`` retrains E1's edge model (``edgewise.nn.continual_models``) with
every retraining configuration on every window of ``edgewise.nn.streams.digits_streams``,
on golden-model labels, logging accuracy on the window's live frames (true labels) after
each epoch against the CPU time spent training (``time.thread_time``, evaluation excluded).
Host CPU seconds become accelerator-seconds through one ``stretch`` factor, applied alike to
retraining and to inference (see docs/ekya.md for the value shipped).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from edgewise.continual.problem import RetrainConfig, default_retrain_configs
from edgewise.continual.profiles import Curve, Trace, load_trace
from edgewise.continual.synthetic import synthetic_trace

if TYPE_CHECKING:
    from torch import nn

    from edgewise.nn.continual_models import Student
    from edgewise.nn.streams import DigitsStream, Window

__all__ = ["DATA_DIR", "default_trace", "default_trace_source", "record_digits_trace",
           "subsampled_accuracy"]

DATA_DIR = Path(__file__).parent / "data" / "digits-trace"
RATES = (1.0, 0.75, 0.5, 0.25, 0.1)


def default_trace_source() -> str:
    """Where ``default_trace`` comes from: the recorded digits trace, or the synthetic one."""
    return "recorded digits trace" if (DATA_DIR / "streams.csv").is_file() else "synthetic"


def default_trace() -> Trace:
    """The shipped trace (12 streams: 10 tested + 2 hold-out), or, if the CSV files are
    missing, the SYNTHETIC stand-in with the same shape."""
    if (DATA_DIR / "streams.csv").is_file():
        return load_trace(DATA_DIR)
    return synthetic_trace(12, 4, seed=0)


def subsampled_accuracy(pred: NDArray[np.int64], y: NDArray[np.int64], rate: float) -> float:
    """Accuracy when only a ``rate`` fraction of the frames is analysed, evenly spread (frame
    ⌊k/rate⌋ for k = 0, 1, ...), and every other frame reuses the last analysed frame's
    result (how a video pipeline subsamples frames)."""
    n = len(y)
    analysed = np.unique(np.floor(np.arange(math.ceil(n * rate)) / rate).astype(np.int64))
    analysed = analysed[analysed < n]
    idx = analysed[np.searchsorted(analysed, np.arange(n), side="right") - 1]
    return float((pred[idx] == y).mean())


def _train_curve(model: Student, window: Window, golden: nn.Module, config: RetrainConfig,
                 seed: int) -> tuple[Curve, Student]:
    from edgewise.nn.continual_models import accuracy, golden_label, retrain

    x, live_x, live_y = window.train_x, window.x, window.y
    labels = golden_label(golden, x)
    rng = np.random.default_rng([seed, 23])
    idx = rng.permutation(len(labels))[: max(1, round(config.data_fraction * len(labels)))]
    start_acc = accuracy(model, live_x, live_y)
    ts, accs, spent, t0 = [0.0], [start_acc], [0.0], [time.thread_time()]

    def on_epoch(epoch: int, student: Student) -> None:
        spent[0] += time.thread_time() - t0[0]
        ts.append(spent[0])
        accs.append(accuracy(student, live_x, live_y))
        t0[0] = time.thread_time()

    student = retrain(model, x[idx], labels[idx], epochs=config.epochs,
                      batch_size=config.batch_size, neurons=config.last_layer_neurons,
                      frozen_layers=config.layers_frozen, seed=seed, on_epoch=on_epoch)
    return Curve(tuple(ts), tuple(accs)), student


def record_digits_trace(n_streams: int = 12, seed: int = 0, *, fps: float = 30.0,
                        stretch: float | None = None, window_s: float = 200.0,
                        n_windows: int | None = None,
                        configs: tuple[RetrainConfig, ...] | None = None) -> Trace:
    """Record a trace from real retraining on the digits streams (see the module doc). With
    ``stretch`` None, it is set so that the median over streams of the most expensive
    configuration's cost is 2 × ``window_s`` accelerator-seconds (Figure 3's regime: the
    costliest configurations cannot finish in a window on one accelerator). ``n_windows``
    and ``configs`` record fewer windows or configurations (the shipped recording: the
    streams' 4 windows, the 18 default configurations)."""
    from edgewise.nn.continual_models import golden_model, predict, pretrained_edge
    from edgewise.nn.streams import digits_streams

    golden = golden_model(seed)
    configs = configs or default_retrain_configs()
    curves: dict[tuple[int, str, str], Curve] = {}
    retained: dict[tuple[int, str], float] = {}
    initial: dict[str, float] = {}
    infer_s: dict[str, float] = {}
    factors: dict[str, tuple[float, ...]] = {}
    streams = digits_streams(n_streams, seed=seed, **(
        {} if n_windows is None else {"n_windows": n_windows}))
    for st in streams:
        model: Student = pretrained_edge(seed)
        prev: float | None = None
        ratios: list[list[float]] = []
        for w, window in enumerate(st.windows()):
            acc_now = float((predict(model, window.x) == window.y).mean())
            if w == 0:
                initial[st.name] = acc_now
            elif prev is not None:
                retained[(w, st.name)] = acc_now / max(prev, 1e-6)
            t0 = time.thread_time()
            pred = predict(model, window.x)
            infer_s[st.name] = (time.thread_time() - t0) / len(window.x)
            full = max(subsampled_accuracy(pred, window.y, 1.0), 1e-6)
            ratios.append([subsampled_accuracy(pred, window.y, r) / full for r in RATES])
            best, best_acc = model, -1.0
            for k, c in enumerate(configs):
                curve, student = _train_curve(model, window, golden, c, seed * 1000 + k)
                curves[(w, st.name, c.name)] = curve
                if curve.final > best_acc:
                    best, best_acc = student, curve.final
            model, prev = best, float((predict(best, window.x) == window.y).mean())
        factors[st.name] = tuple(float(min(1.0, v)) for v in np.mean(ratios, axis=0))
    return _scaled(streams, configs, curves, retained, initial, infer_s, factors, fps,
                   stretch, window_s)


def _scaled(streams: list[DigitsStream], configs: tuple[RetrainConfig, ...],
            curves: dict[tuple[int, str, str], Curve], retained: dict[tuple[int, str], float],
            initial: dict[str, float], infer_s: dict[str, float],
            factors: dict[str, tuple[float, ...]], fps: float, stretch: float | None,
            window_s: float) -> Trace:
    names = tuple(s.name for s in streams)
    if stretch is None:
        top = [max(c.cost_s for k, c in curves.items() if k[1] == n) for n in names]
        stretch = 2.0 * window_s / float(np.median(top))
    scaled = {k: Curve(tuple(t * stretch for t in c.compute_s), c.accuracy)
              for k, c in curves.items()}
    demand = {n: infer_s[n] * fps * stretch for n in names}
    windows = 1 + max(k[0] for k in curves)
    return Trace(names, initial, demand, windows, tuple(c.name for c in configs), scaled,
                 retained, RATES, factors)


if __name__ == "__main__":  # pragma: no cover
    import sys

    from edgewise.continual.profiles import write_trace

    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DATA_DIR
    print(write_trace(record_digits_trace(), out))
