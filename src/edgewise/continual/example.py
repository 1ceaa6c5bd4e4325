"""The worked example of Ekya §3.2 (Table 1, Figure 4) as a trace: streams A and B, 3 GPUs."""

from __future__ import annotations

from edgewise.continual.profiles import Curve, Trace

__all__ = ["EXAMPLE_ACCELERATORS", "EXAMPLE_A_MIN", "EXAMPLE_WINDOW_S", "table1_trace"]

EXAMPLE_ACCELERATORS = 3.0
EXAMPLE_WINDOW_S = 120.0
EXAMPLE_A_MIN = 0.4

# Table 1: (end accuracy, GPU seconds) of Cfg1 and Cfg2 per stream and retraining window.
_TABLE1 = {
    0: {"A": ((0.75, 85.0), (0.70, 65.0)), "B": ((0.90, 80.0), (0.85, 50.0))},
    1: {"A": ((0.95, 90.0), (0.90, 40.0)), "B": ((0.98, 80.0), (0.90, 70.0))},
}
_RATES = (1.0, 0.75, 0.5, 0.25, 0.1)


def table1_trace() -> Trace:
    """Table 1 as a two-window trace. A starts at 65% and B at 50%; a model keeps its accuracy
    into window 2 (no drift is stated); full-rate inference needs one GPU per stream and
    accuracy falls in proportion to the frames analysed (Figure 4c: 65% → 49% and
    50% → 37.5% with 3/4 of a GPU)."""
    start = {(0, "A"): 0.65, (0, "B"): 0.50, (1, "A"): 0.70, (1, "B"): 0.85}  # curves' t = 0
    curves = {(w, s, f"Cfg{i + 1}"): Curve((0.0, cost), (start[(w, s)], acc))
              for w, per in _TABLE1.items() for s, cfgs in per.items()
              for i, (acc, cost) in enumerate(cfgs)}
    return Trace(("A", "B"), {"A": 0.65, "B": 0.50}, {"A": 1.0, "B": 1.0}, 2, ("Cfg1", "Cfg2"),
                 curves, {}, _RATES, {"A": _RATES, "B": _RATES})
