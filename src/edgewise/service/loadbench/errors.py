"""Server errors under bad input: a list of hand-made bad requests, then a seeded
Schemathesis run (valid and invalid cases of every operation) against the served manager.
A 5xx, or no answer within the timeout, is a server error."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx

from edgewise.errors import ConfigError
from edgewise.service.loadbench.served import TOKEN, ServedManager

__all__ = ["bad_requests", "schemathesis_errors", "server_errors"]

_UPDATE = "/api/v1/jobs"
_SPECS: tuple[Any, ...] = (
    {"epochs": 1e400}, {"epochs": -1}, {"epochs": 2**64}, {"epochs": "3"}, {"epochs": None},
    {"seed": 2**53}, {"seed": -1}, {"learning_rate": "NaN"}, {"workers": ["ghost"]},
    {"workers": ["tx2-0"] * 2000}, {"shards": {"tx2-0": 10**12}}, {"batch_sizes": {"x": 0}},
    {"workload": {"model": "py:os:system"}}, {"workload": {"model": "export:/etc/passwd"}},
    {"workload": {"model": "hf:NoSuchConfig"}}, {"workload": {"data": "images:../../etc"}},
    {"workload": {"model": "hf:ViTConfig", "model_args": {"hidden_size": 2**40}}},
    {"workload": {"model": "hf:ViTConfig", "model_args": {"hidden_size": -5}}},
    {"workload": {"model": "hf:ViTConfig", "model_args": {f"k{i}": 1 for i in range(40)}}},
    {"workload": {"model": "digits-cnn", "weights": "/etc/shadow"}}, [], "x", 7, None)


def bad_requests() -> Iterator[tuple[str, str, dict[str, str], bytes]]:
    """(method, path, headers, body) of requests a careless or hostile client sends; every
    one carries the token (without it every request is a 401 before routing)."""
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    for spec in _SPECS:
        for kind in ("update", "pipeline", "continual", "sites", "modelparallel", "nope"):
            yield "POST", _UPDATE, auth, json.dumps({"kind": kind, "spec": spec}).encode()
    for body in (b"", b"{", b"[" * 5000 + b"]" * 5000, b'{"kind": "update", "spec": {}}' * 3,
                 b"\xff\xfe", b'{"kind": "\\ud800", "spec": {}}', b"x" * 70_000,
                 b'{"kind": "update", "spec": {"epochs": NaN}}',
                 b'{"kind": "update", "spec": {"epochs": Infinity}}'):
        for path in (_UPDATE, "/api/v1/update/solve", "/api/v1/pipeline/plan",
                     "/api/v1/continual/plan", "/api/v1/sites/simulate",
                     "/api/v1/modelparallel/place", "/api/v1/faults"):
            yield "POST", path, auth, body
    for path in ("/api/v1/jobs/../../etc/passwd", "/api/v1/jobs/%00", "/api/v1/jobs/" + "x" * 5000,
                 "/api/v1/jobs?limit=-1", "/api/v1/jobs?limit=99999999999999999999",
                 "/api/v1/jobs?cursor=abc", "/api/v1/jobs?state=%ff", "/api/v1/events?after=-5",
                 "/api/v1/jobs/job-0001/events?after=1e9", "/api/v1/no/such/route",
                 "/api/v1/update/tasks/%2e%2e", "/api/v1/pipelines/x/infer", "/metrics?x=1"):
        for method in ("GET", "POST", "PUT", "DELETE"):
            yield method, path, auth, b""


def _raw_garbage(port: int) -> Iterator[bytes]:
    """Malformed HTTP on raw sockets: the status line of each answer."""
    for data in (b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"GET /\x00 HTTP/1.1\r\n\r\n",
                 b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
                 b"POST /api/v1/jobs HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
                sock.sendall(data)
                yield sock.recv(64).split(b"\r\n")[0]
        except OSError:
            yield b"no answer"


def server_errors(manager: ServedManager, cases: int, seed: int) -> dict[str, Any]:
    """5xx answers (and hangs) over the bad requests and a Schemathesis run."""
    failures: list[str] = []
    sent = 0
    with manager.client(timeout=30) as client:
        for method, path, headers, body in bad_requests():
            sent += 1
            try:
                status = client.request(method, path, headers=headers, content=body).status_code
            except httpx.TimeoutException:
                status = 0
            if status == 0 or status >= 500:
                failures.append(f"{method} {path}: {status or 'no answer in 30 s'}")
    for line in _raw_garbage(manager.port):
        sent += 1
        if not line.startswith(b"HTTP/1.1 4"):
            failures.append(f"raw: {line!r}")
    fuzzed = schemathesis_errors(manager, cases, seed)
    return {"server_errors": len(failures) + fuzzed["server_errors"],
            "bad_requests": sent, "schemathesis_cases": fuzzed["cases"],
            "failures": (failures + fuzzed["failures"])[:20]}


def schemathesis_errors(manager: ServedManager, cases: int, seed: int) -> dict[str, Any]:
    """``cases`` valid and ``cases`` invalid cases of every operation of the manager's own
    OpenAPI document, drawn by a derandomized Hypothesis (the same cases for a seed)."""
    try:
        import requests
        import schemathesis
        from hypothesis import HealthCheck, given, settings
        from hypothesis import seed as hseed
        from schemathesis import GenerationMode
    except ImportError:
        raise ConfigError("the manager bench needs schemathesis: pip install -e '.[dev]'",
                          field="schemathesis") from None
    schema = schemathesis.openapi.from_url(f"{manager.url}/openapi.json",
                                           headers=manager.headers)
    failures: list[str] = []
    count = [0]
    with requests.Session() as session:
        def send(case: Any) -> None:
            count[0] += 1
            try:
                status = case.call(base_url=manager.url, session=session,
                                   headers=manager.headers, timeout=30).status_code
            except requests.Timeout:
                status = 0
            if status == 0 or status >= 500:
                failures.append(f"{case.method} {case.formatted_path}: {status or 'hang'}")

        for result in schema.get_all_operations():
            operation = result.ok()  # type: ignore[union-attr]  # the document is our own
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                run = given(operation.as_strategy(generation_mode=mode))(send)
                run = settings(max_examples=cases, deadline=None, database=None,
                               suppress_health_check=list(HealthCheck))(run)
                hseed(seed)(run)()
    return {"server_errors": len(failures), "cases": count[0], "failures": failures}
