"""The Grafana dashboard and docs/prometheus.md name only metric families the manager
exports, and the manager exports every family the doc lists."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from edgewise.service import JobManager, create_app

DOCS = Path(__file__).parents[2] / "docs"
SUFFIXES = ("_bucket", "_count", "_sum", "_total")


def _exported(backend: JobManager) -> set[str]:
    client = TestClient(create_app(backend, "t0ken"), headers={"Authorization": "Bearer t0ken"})
    text = client.get("/metrics").text
    names = {f.name for f in text_string_to_metric_families(text)}
    return names | {n + "_total" for n in names}


def _family(name: str) -> str:
    for suffix in SUFFIXES[:3]:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def test_the_grafana_dashboard_queries_exported_families(backend: JobManager) -> None:
    exported = _exported(backend)
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(queries) >= 15
    used = {_family(n) for q in queries for n in re.findall(r"edgewise_[a-z_]+", q)}
    assert used and used <= exported, used - exported


def test_the_doc_lists_the_exported_families(backend: JobManager) -> None:
    exported = _exported(backend)
    listed = set(re.findall(r"^\| `(edgewise_[a-z_]+)`", (DOCS / "prometheus.md").read_text(),
                            flags=re.MULTILINE))
    assert listed <= exported, listed - exported
    counters = {n.removesuffix("_total") for n in listed}  # a counter is listed as ..._total
    assert {n for n in exported if not n.endswith("_total")} - listed - counters == set()
