"""The API under a real uvicorn on 127.0.0.1: the token, slow and malformed clients, the
connection cap, and logs that a flood of bad requests cannot grow without bound."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from edgewise.service import JobManager, create_app, make_server
from edgewise.service.app import Limits
from edgewise.service.connections import Unproven
from edgewise.service.guards import RateLimitFilter

TOKEN = "test-token-0123456789abcdef"
LIMITS = Limits(body_timeout_s=1.0, header_timeout_s=1.0, first_head_timeout_s=1.0,
                max_connections=40, max_unproven=12, max_unproven_per_address=6)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def url(backend: JobManager) -> Iterator[str]:
    port = _free_port()
    server = make_server(create_app(backend, TOKEN, limits=LIMITS), port=port, limits=LIMITS,
                         log_level="warning")
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # generous: it ends as soon as the server is up
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=60)  # generous: a loaded host slows the shutdown, not its outcome
    assert not thread.is_alive()


def _raw(url: str, data: bytes, wait_s: float = 60.0) -> bytes:
    """Send ``data`` on a fresh connection and read until the server closes it (a server
    that never does fails the test after ``wait_s`` of silence)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=wait_s) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_the_real_server_requires_the_token(url: str) -> None:
    health = f"{url}/api/v1/health"
    ok = httpx.get(health, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    assert ok.status_code == 200 and ok.json() == {"status": "ok"}
    assert "server" not in ok.headers
    assert httpx.get(health, timeout=30).status_code == 401
    big = (b" " * 1024 for _ in range(100))  # chunked, no Content-Length, over 64 KiB
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.post(f"{url}/api/v1/jobs", content=big, headers=auth,
                      timeout=30).status_code == 413


# The head and body deadlines are 1 s. A loaded host only delays the close: closed after
# 1.00 s idle, after at most 1.5 s on 2 cores at load average 25. So the bounds: not before
# the deadline (0.8 s leaves the clocks' slack), and 10 s, over 5x what was measured.
DEADLINE_BOUNDS_S = (0.8, 10.0)


def test_a_half_sent_request_head_is_closed_after_the_deadline(url: str) -> None:
    started = time.monotonic()
    answer = _raw(url, b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n")  # no blank line
    low, high = DEADLINE_BOUNDS_S
    assert answer == b"" and low < time.monotonic() - started < high


def test_a_body_that_does_not_arrive_gets_a_408(url: str) -> None:
    head = (f"POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"kind\"")
    started = time.monotonic()
    answer = _raw(url, head.encode())
    low, high = DEADLINE_BOUNDS_S
    assert answer.startswith(b"HTTP/1.1 408") and low < time.monotonic() - started < high
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1]) == {
        "detail": "request body not received within 1 s"}


@pytest.mark.parametrize("length", [b"abc", b"-1", b"1e3", b"99999999999999999999999"])
def test_a_malformed_content_length_gets_json(url: str, length: bytes) -> None:
    answer = _raw(url, b"POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: " + length
                  + b"\r\n\r\n{}")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") or head.startswith(b"HTTP/1.1 413"), head
    assert b"content-type: application/json" in head.lower()
    assert "detail" in json.loads(body)


@pytest.mark.parametrize("request_bytes", [b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n",
                                           b"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n"])
def test_a_malformed_request_gets_a_json_400_and_a_close(url: str, request_bytes: bytes) -> None:
    answer = _raw(url, request_bytes)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), head
    assert b"content-type: application/json" in head.lower() and b"connection: close" in head
    assert json.loads(body) == {"detail": "malformed HTTP request"}


def test_slow_clients_cannot_starve_the_server_or_flood_the_log(url: str) -> None:
    """Twice the connection cap of half-sent requests: the excess is refused at once, the
    rest closed at the head deadline, and a client with the token is then served; the log
    says so a bounded number of times."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("uvicorn.error")
    started = time.monotonic()
    logger.addHandler(handler)
    host, port = url.removeprefix("http://").split(":")
    slow = []
    try:
        for _ in range(2 * LIMITS.max_connections):
            sock = socket.create_connection((host, int(port)), timeout=30)
            sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n")
            slow.append(sock)
        time.sleep(LIMITS.header_timeout_s + 1.5)
        ok = httpx.get(f"{url}/api/v1/health", headers={"Authorization": f"Bearer {TOKEN}"},
                       timeout=30)
        assert ok.status_code == 200
        closed = 0
        for sock in slow:
            sock.settimeout(2)
            try:
                closed += sock.recv(1) == b""
            except (ConnectionResetError, TimeoutError):
                closed += 1
        assert closed == len(slow)
    finally:
        logger.removeHandler(handler)
        elapsed = time.monotonic() - started
        for sock in slow:
            sock.close()
    # The filter's burst and its refill over the time the records were caught (which a
    # loaded host lengthens), not one line per bad client: 20 lines in 2.5 s idle, and in
    # 2.7 s at load average 25, of 80 bad clients.
    rate = RateLimitFilter()
    assert 0 < len(records) <= rate.burst + rate.per_second * elapsed


def _closed(sock: socket.socket, wait_s: float = 2.0) -> bool:
    sock.settimeout(wait_s)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return True


def test_half_open_connections_without_the_token_leave_room_for_it(url: str) -> None:
    """Four times the connection cap of half-open connections from this address (none sends
    a byte) while a client with the token connects afresh for each request: every request
    is answered, and at most the ceiling of the crowd is still open."""
    host, port = url.removeprefix("http://").split(":")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    crowd: list[socket.socket] = []
    answers = []
    try:
        for k in range(4 * LIMITS.max_connections):
            crowd.append(socket.create_connection((host, int(port)), timeout=30))
            if k % 20 == 19:
                with httpx.Client(timeout=30) as fresh:
                    answers.append(fresh.get(f"{url}/api/v1/health", headers=auth).status_code)
        assert answers == [200] * (4 * LIMITS.max_connections // 20)
        still_open = len(crowd) - sum(_closed(sock, 0.5) for sock in crowd)
        assert still_open <= 2 * LIMITS.max_unproven  # the ceiling of young ones
    finally:
        for sock in crowd:
            sock.close()


def test_the_oldest_unproven_connections_make_way_once_past_their_grace() -> None:
    crowd = Unproven(total=4, per_address=2, grace_s=1.0, ceiling=6)
    assert crowd.admit("a1", "A", now=0.0) == [] and crowd.admit("a2", "A", now=0.1) == []
    assert crowd.admit("a3", "A", now=0.5) == []  # a1 is within its grace: over the cap
    assert crowd.admit("a4", "A", now=1.2) == ["a1", "a2"]  # past it: the oldest go
    assert crowd.count("A") == 2
    for k, at in enumerate((1.3, 1.3, 1.3, 1.3)):
        crowd.admit(f"b{k}", "B", now=at)  # another address, young: up to the ceiling
    assert len(crowd) == 6 and crowd.count("B") == 4
    # beyond the ceiling the oldest goes, young or not; never the newcomer (it may be a
    # client with the token that has not sent it yet)
    assert crowd.admit("c", "C", now=1.35) == ["a3"] and "c" in crowd
    crowd.prove("b0")
    crowd.forget("b1")
    assert "b0" not in crowd and crowd.count("B") == 2 and len(crowd) == 4
    assert crowd.admit("d", "D", now=2.6) == ["a4"]  # the total cap: the oldest goes


def test_connections_that_prove_the_token_are_not_evicted(url: str) -> None:
    """A keep-alive connection that sent the token stays open through a crowd of twice the
    unproven cap of half-open connections, and is served again on the same socket."""
    host, port = url.removeprefix("http://").split(":")
    request = (f"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}"
               "\r\n\r\n").encode()
    with socket.create_connection((host, int(port)), timeout=30) as kept:
        kept.sendall(request)
        assert kept.recv(65536).startswith(b"HTTP/1.1 200")
        crowd = [socket.create_connection((host, int(port)), timeout=30)
                 for _ in range(2 * LIMITS.max_unproven)]
        try:
            kept.sendall(request)
            assert kept.recv(65536).startswith(b"HTTP/1.1 200")
        finally:
            for sock in crowd:
                sock.close()


def test_the_rate_limit_filter_drops_a_flood_and_says_how_much() -> None:
    now = [0.0]
    limit = RateLimitFilter(per_second=1.0, burst=3, clock=lambda: now[0])
    record = logging.LogRecord("x", logging.WARNING, "", 0, "bad request", None, None)
    passed = [limit.filter(record) for _ in range(10)]
    assert passed == [True] * 3 + [False] * 7 and limit.dropped == 7
    now[0] = 2.0
    assert limit.filter(record) and "7 similar messages dropped" in str(record.msg)
