"""Every default of the SROLE environment is pinned to the source docs/srole.md gives for
it: the table "Defaults" there lists each one (an expression in its module), its value and
its source; the code must hold that value, and no default may leave the table."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "srole.md"
ROW = re.compile(r"^\| `(?P<expr>[^`]+)` \| (?P<value>[^|]+) \| (?P<source>[^|]+) \|$")
REQUIRED = {
    "problem.ALPHA", "rounds.RHO", "rounds.GAMMA", "rounds.KAPPA", "network.CLUSTER_SIZE",
    "jobs.JOBS_PER_CLUSTER", 'network.TABLE_I["container"]', "network.PRETRAIN_NODES",
    'network.PRETRAIN["cpu_ghz"]', 'network.PRETRAIN["memory_mb"]',
    'network.PRETRAIN["bandwidth_mbyteps"]', "jobs.pagerank_jobs(100.0)",
    'jobs.make_job("j", "rnn", 0).n_iterations', "benchfigs.protocol(False).edges",
    "rounds.Conditions().overload", "rounds.Conditions().intensity",
    "rounds.Conditions().drift", "jobs.DEMAND_DRIFT", "jobs.JOB_CPU", "problem.HOST_GFLOPS",
    "jobs.PAGERANK_CPU", "jobs.PAGERANK_MEMORY_MB", "jobs.PAGERANK_BANDWIDTH_MBPS",
    "jobs.PAGERANK_WORKERS", "network.HOST_GHZ", "sim.MAX_ATTEMPTS", "cq.CQ_SIGNIFICANCE",
    "cq.CQ_MIN_SAMPLES", "agents.CPU_DEMAND_MAX", "agents.MEM_DEMAND_MAX_MB",
}


def _rows() -> dict[str, tuple[str, str]]:
    text = DOCS.read_text()
    section = text.split("## Defaults", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = ROW.match(line.strip())
        if m:
            rows[m["expr"]] = (m["value"].strip(), m["source"].strip())
    return rows


def _evaluate(expr: str) -> object:
    module, _, rest = expr.partition(".")
    namespace = vars(importlib.import_module(f"edgewise.modelparallel.{module}"))
    return eval(rest, dict(namespace))


def test_every_default_is_in_the_table_with_a_source() -> None:
    rows = _rows()
    assert set(rows) >= REQUIRED, sorted(REQUIRED - set(rows))
    for expr, (_, source) in rows.items():
        assert len(source) > 8, expr
        assert re.search(r"§|Table|ours|\[", source), (expr, source)


@pytest.mark.parametrize("expr", sorted(REQUIRED))
def test_the_code_holds_the_documented_value(expr: str) -> None:
    value, _ = _rows()[expr]
    want = ast.literal_eval(value.replace("`", ""))
    got = _evaluate(expr)
    if isinstance(want, float | int) and not isinstance(want, bool):
        assert got == pytest.approx(want), expr
    else:
        assert tuple(got) == tuple(want) if isinstance(want, tuple | list) else got == want
