"""Each default of the Ekya bench is pinned to the source docs/ekya.md gives for it, and to
what the shipped trace and configuration sets actually are."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from edgewise.continual.defaults import DEFAULTS, SOURCES, BenchDefaults, default_rows
from edgewise.continual.problem import default_inference_configs, default_retrain_configs
from edgewise.continual.traces import default_trace, default_trace_source

DOCS = Path(__file__).resolve().parents[2] / "docs" / "ekya.md"


def _docs_table() -> dict[str, tuple[object, str]]:
    """name → (value, source) from the defaults table of docs/ekya.md."""
    rows = {}
    for line in DOCS.read_text().splitlines():
        m = re.match(r"^\| `(\w+)` \| `(.+)` \| (.+) \|$", line)
        if m and m.group(1) in SOURCES:
            rows[m.group(1)] = (json.loads(m.group(2)), m.group(3))
    return rows


def _plain(value: object) -> object:
    return json.loads(json.dumps(value))  # tuples as lists, as the docs write them


def test_every_default_has_a_source_and_a_docs_row() -> None:
    names = [f.name for f in fields(BenchDefaults)]
    assert sorted(SOURCES) == sorted(names)
    table = _docs_table()
    assert sorted(table) == sorted(names), "docs/ekya.md's defaults table is incomplete"
    for name, value, source in default_rows():
        assert table[name] == (_plain(value), source), name


def test_defaults_say_where_they_come_from() -> None:
    for name, source in SOURCES.items():
        assert source.startswith(("paper ", "ours")), name  # the paper's text or our choice


def test_defaults_match_what_the_bench_replays() -> None:
    trace = default_trace()
    assert default_trace_source() == DEFAULTS.trace
    assert len(default_retrain_configs()) == DEFAULTS.retrain_configs == len(trace.configs)
    rates = tuple(c.sampling_rate for c in default_inference_configs())
    assert rates == DEFAULTS.sampling_rates == trace.subsampling
    assert len(trace.streams) - DEFAULTS.holdout_streams == DEFAULTS.stressed_streams
    assert max(DEFAULTS.stream_counts) == DEFAULTS.stressed_streams
    assert DEFAULTS.saving_reference_accelerators in DEFAULTS.accelerator_grid
    assert DEFAULTS.delta in DEFAULTS.delta_grid
    # the recording's stretch: the median over streams of each stream's costliest
    # configuration is costliest_config_windows windows at one accelerator
    costliest = [max(c.cost_s for (_, s, _), c in trace.curves.items() if s == name)
                 for name in trace.streams]
    assert float(np.median(costliest)) == pytest.approx(
        DEFAULTS.costliest_config_windows * DEFAULTS.window_s, rel=1e-3)
