"""Schemathesis against the manager's OpenAPI document: every operation, valid and invalid
inputs (NaN and ±Infinity spliced into bodies too), a bounded number of cases each; no
server error, no response outside the document, invalid data rejected, auth enforced."""

from __future__ import annotations

import atexit
import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from edgewise.cluster.examples import example_path
from edgewise.cluster.schema import load_cluster
from edgewise.service import JobManager, Store, create_app
from edgewise.service.app import Limits
from edgewise.service.limits import ProcessLimiter
from edgewise.service.problems import discover_problems, job_kinds

TOKEN = "schemathesis-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CASES_PER_OPERATION = int(os.environ.get("EDGEWISE_SCHEMATHESIS_CASES", "10"))
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance, negative_data_rejection, unsupported_method,
          allow_header_conformance, ignored_auth]


def _app() -> Any:
    """A dry-run manager of the example cluster (jobs are checked and stored, never run),
    planning in child processes limited to 1.5 s and 1 GB. Its state folder goes when the
    process ends (the schema is read at collection, so the app outlives any fixture)."""
    state = Path(tempfile.mkdtemp(prefix="edgewise-schemathesis-"))
    atexit.register(shutil.rmtree, state, ignore_errors=True)
    problems = discover_problems()
    manager = JobManager(Store(state / "manager.db"), job_kinds(problems),
                         load_cluster(example_path("deep-edge-testbed.yaml")), state_dir=state)
    limiter = ProcessLimiter(seconds=1.5, memory_mb=1024,
                             preload=sorted({p.router.__module__ for p in problems}))
    return create_app(manager, TOKEN, limiter=limiter, problems=problems,
                      limits=Limits(max_body_bytes=64 * 1024))


REJECTED = ["400", "401", "404", "405", "408", "409", "413", "422"]
"""What invalid data may get: 413 too (a body or a problem larger than a limit)."""
CONFIG = schemathesis.Config.from_dict({
    "checks": {"negative_data_rejection": {"expected-statuses": REJECTED}},
    # The coverage phase sends every boundary case the schema defines, unbounded in number;
    # the fuzzing phase draws CASES_PER_OPERATION cases per operation, valid and invalid.
    "phases": {"coverage": {"enabled": False}},
})
schema = schemathesis.openapi.from_asgi("/openapi.json", _app(), headers=AUTH, config=CONFIG)

NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])


def _splice(body: Any, draw: st.DrawFn) -> Any:
    """``body`` with some of its numbers replaced by NaN or ±Infinity."""
    if isinstance(body, dict):
        return {k: _splice(v, draw) for k, v in body.items()}
    if isinstance(body, list):
        return [_splice(v, draw) for v in body]
    if isinstance(body, float | int) and not isinstance(body, bool) and draw(st.booleans()):
        return draw(NON_FINITE)
    return body


@schemathesis.serializer("application/json")
def _json_with_non_finite(ctx: schemathesis.SerializationContext, value: Any) -> bytes:
    """JSON as Python writes it: NaN, Infinity and -Infinity as bare tokens, as clients
    in the wild send them (the default serializer refuses them)."""
    if isinstance(value, bytes):  # a negative case's raw body: sent as it is
        return value
    return json.dumps(value, allow_nan=True, default=_as_text).encode()


def _as_text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


@schemathesis.hook
def flatmap_case(context: schemathesis.HookContext, case: schemathesis.Case) -> Any:
    """A third of the bodies carry non-finite numbers (JSON's NaN and Infinity tokens)."""

    @st.composite
    def spliced(draw: st.DrawFn) -> schemathesis.Case:
        if isinstance(case.body, dict | list) and draw(st.integers(0, 2)) == 0:
            case.body = _splice(case.body, draw)
        return case

    return spliced()


@schema.parametrize()
@settings(max_examples=CASES_PER_OPERATION, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_the_api_keeps_its_contract(case: schemathesis.Case) -> None:
    case.call_and_validate(headers=AUTH, checks=CHECKS)
