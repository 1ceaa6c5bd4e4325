"""The parameter server's data plane (runtime.psplane): frames in, frames out, over loopback;
a stranger, an oversized request and a failing method each get a clear answer, and nothing
of theirs reaches the server's methods."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import numpy as np
import pytest

from edgewise.runtime import psplane
from edgewise.runtime.ps import push_bound
from edgewise.runtime.psplane import (
    LEAVE,
    MAGIC,
    MAX_NAME_BYTES,
    PULL,
    PUSH_ASYNC,
    PUSH_SYNC,
    PlaneClient,
    RemoteFailure,
)
from edgewise.runtime.psserve import PlaneServer


class Recorder:
    """A server that answers each push with its bytes reversed, and records every call; a
    synchronous push is answered once the test releases its step."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int, bytes]] = []
        self.waiting: list[tuple[int, Future[bytes]]] = []

    def pull(self, worker: str = "") -> bytes:
        self.calls.append(("pull", worker, -1, b""))
        return b"weights"

    def push_async_later(self, frame: Any, worker: str = "") -> Any:
        data = bytes(frame)
        self.calls.append(("push_async", worker, -1, data))
        if data == b"fail":
            raise ValueError("a frame that fails")
        return np.frombuffer(data[::-1], np.uint8)

    def push_sync_later(self, worker: str, step: int, frame: Any) -> Future[bytes]:
        self.calls.append(("push_sync", worker, step, bytes(frame)))
        reply: Future[bytes] = Future()
        self.waiting.append((step, reply))
        return reply

    def release(self) -> None:
        for step, reply in self.waiting:
            reply.set_result(b"step %d" % step)

    def leave(self, worker: str) -> None:
        self.calls.append(("leave", worker, -1, b""))


@pytest.fixture
def served() -> Iterator[tuple[Recorder, PlaneServer]]:
    handler = Recorder()
    server = PlaneServer(handler, "127.0.0.1", max_request_bytes=1 << 20)
    yield handler, server
    server.close()


def test_pushes_and_pulls_travel_both_ways(served: tuple[Recorder, PlaneServer]) -> None:
    handler, server = served
    client = PlaneClient(server.endpoint, "nano-0")
    payload = np.random.default_rng(0).integers(0, 256, 300_000, dtype=np.uint8)
    assert client.call(PULL).tobytes() == b"weights"
    assert client.call(PUSH_ASYNC, 0, payload).tobytes() == payload.tobytes()[::-1]
    assert client.call(LEAVE).size == 0
    assert [(c[0], c[1]) for c in handler.calls] == [
        ("pull", "nano-0"), ("push_async", "nano-0"), ("leave", "nano-0")]
    assert handler.calls[1][3] == payload.tobytes()
    client.close()


def test_a_synchronous_step_waits_for_its_peers(served: tuple[Recorder, PlaneServer]) -> None:
    """Two pushes of a step wait together, answered once the step is taken; meanwhile the
    server's one thread serves other connections."""
    handler, server = served
    clients = [PlaneClient(server.endpoint, f"nano-{i}") for i in range(2)]
    for client in clients:
        client.send(PUSH_SYNC, 7, b"g")
    while len(handler.calls) < 2:
        threading.Event().wait(0.01)
    assert PlaneClient(server.endpoint, "pi5").call(PULL).tobytes() == b"weights"
    handler.release()
    assert [c.receive().tobytes() for c in clients] == [b"step 7", b"step 7"]
    assert sorted((c[1], c[2]) for c in handler.calls if c[0] == "push_sync") == [
        ("nano-0", 7), ("nano-1", 7)]


def test_a_failing_method_is_named_and_the_connection_goes_on(
        served: tuple[Recorder, PlaneServer]) -> None:
    _, server = served
    client = PlaneClient(server.endpoint, "nano-0")
    with pytest.raises(RemoteFailure, match="ValueError: a frame that fails"):
        client.call(PUSH_ASYNC, 0, b"fail")
    assert client.call(PULL).tobytes() == b"weights"


def _hung_up(conn: socket.socket) -> bool:
    """Whether the peer closed ``conn`` with nothing more to say (a reset: it closed with
    bytes of ours unread)."""
    try:
        return conn.recv(64) == b""
    except ConnectionResetError:
        return True


def _raw(server: PlaneServer, header: bytes) -> tuple[bytes, bool]:
    """Our hello and ``header`` on a bare socket: what came back, and whether the server then
    hung up."""
    endpoint = server.endpoint
    with socket.create_connection((endpoint.host, endpoint.port), timeout=10) as conn:
        conn.sendall(MAGIC + b"\x01" + endpoint.token + header)
        status, length = struct.unpack("<BI", conn.recv(5, socket.MSG_WAITALL))
        body = conn.recv(length, socket.MSG_WAITALL)
        return bytes([status]) + body, _hung_up(conn)


def test_a_request_past_the_bound_is_refused_unread(served: tuple[Recorder, PlaneServer]) -> None:
    """The server answers a declared length past its bound without reading a byte of it,
    then hangs up; a client of ours refuses to send such a request at all."""
    handler, server = served
    bound = server.endpoint.max_request_bytes
    reply, hung_up = _raw(server, struct.pack("<BiHI", PUSH_ASYNC, 0, 0, bound + 1))
    assert reply == b"\x01" + f"a request is at most {bound} bytes, got {bound + 1}".encode()
    assert hung_up  # no message boundary is left to trust
    client = PlaneClient(server.endpoint, "nano-0")
    with pytest.raises(ValueError, match=f"at most {bound} bytes"):
        client.call(PUSH_ASYNC, 0, bytes(bound + 1))
    assert handler.calls == []
    assert client.call(PULL).tobytes() == b"weights"  # nothing was sent: the client goes on


def test_a_name_past_the_bound_is_refused_by_both_ends(
        served: tuple[Recorder, PlaneServer]) -> None:
    handler, server = served
    with pytest.raises(ValueError, match=f"at most {MAX_NAME_BYTES} bytes"):
        PlaneClient(server.endpoint, "n" * (MAX_NAME_BYTES + 1))
    client = PlaneClient(server.endpoint, "nano-0")
    client.name = b"n" * (MAX_NAME_BYTES + 1)  # a client that does not check
    with pytest.raises(RemoteFailure, match="name is at most"):
        client.call(PULL)
    assert handler.calls == []


def test_a_stranger_is_hung_up_on_before_anything_runs(
        served: tuple[Recorder, PlaneServer]) -> None:
    handler, server = served
    host, port = server.endpoint.host, server.endpoint.port
    for hello in (MAGIC + b"\x01" + bytes(16),  # the wrong token
                  b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"):  # not our protocol at all
        with socket.create_connection((host, port), timeout=10) as conn:
            conn.sendall(hello + bytes(64))
            assert _hung_up(conn)  # nothing answered
    assert handler.calls == []


def test_a_silent_connection_is_closed_unheard(served: tuple[Recorder, PlaneServer],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection that never says hello is not held open for good."""
    monkeypatch.setattr(psplane, "HELLO_TIMEOUT_S", 0.2)
    handler, server = served
    with socket.create_connection((server.endpoint.host, server.endpoint.port),
                                  timeout=60) as conn:
        assert _hung_up(conn)
    assert handler.calls == []
    client = PlaneClient(server.endpoint, "nano-0")  # a worker's connection lives on
    threading.Event().wait(0.5)
    assert client.call(PULL).tobytes() == b"weights"


def test_an_unknown_operation_is_refused(served: tuple[Recorder, PlaneServer]) -> None:
    handler, server = served
    client = PlaneClient(server.endpoint, "nano-0")
    with pytest.raises(RemoteFailure, match="unknown operation 9"):
        client.call(9)
    assert handler.calls == []


def test_a_closed_server_is_a_connection_error(served: tuple[Recorder, PlaneServer]) -> None:
    """What a worker sees when its server's process dies or its run is torn down."""
    handler, server = served
    client = PlaneClient(server.endpoint, "nano-0")
    client.send(PUSH_SYNC, 1, b"g")  # waiting for a step that will not come
    while not handler.calls:
        threading.Event().wait(0.01)
    server.close()
    with pytest.raises(ConnectionError, match="closed the connection"):
        client.receive()
    handler.release()  # a reply resolved after the close goes nowhere, and breaks nothing
    with pytest.raises(ConnectionError):
        PlaneClient(server.endpoint, "nano-1", connect_timeout_s=5)


def test_the_push_bound_holds_a_push_of_the_model_and_its_ids() -> None:
    model_bytes = 38_282 * 4
    assert push_bound(model_bytes) >= int(model_bytes * 1.004) + 1024 * 8 + 4096


def test_a_worker_that_cannot_reach_the_data_plane_pushes_as_ray_calls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A firewall that lets only Ray's ports through slows training, it does not stop it; a
    worker that reaches one shard's data plane and not another's (``runtime.shards``)
    closes the one it reached and sends all its requests as Ray calls."""
    from types import SimpleNamespace

    from edgewise.cluster.model import Link
    from edgewise.runtime import psclient
    from edgewise.runtime.psplane import Endpoint

    gone = socket.create_server(("127.0.0.1", 0))
    port = gone.getsockname()[1]
    gone.close()  # nothing listens there now
    endpoint = Endpoint("127.0.0.1", port, bytes(16), 1 << 20)
    monkeypatch.setattr(psclient, "ray", SimpleNamespace(get=lambda ref, **_: ref))

    def server(at: Endpoint) -> SimpleNamespace:
        return SimpleNamespace(plane_endpoint=SimpleNamespace(remote=lambda: at))

    link = Link("nano-0", "pi", 1000.0, 1.0)
    servers = psclient.Servers([server(endpoint)], [link], "nano-0", "w", "socket", False)
    assert servers._planes() is None
    assert servers.transport == "ray"  # and it does not try again every batch
    listening = socket.create_server(("127.0.0.1", 0))
    reached = Endpoint("127.0.0.1", listening.getsockname()[1], bytes(16), 1 << 20)
    both = psclient.Servers([server(reached), server(endpoint)], [link, link], "nano-0", "w",
                            "socket", True)
    assert both._planes() is None and both.transport == "ray"
    conn, _ = listening.accept()
    conn.settimeout(5.0)
    conn.recv(1 << 10)  # the hello
    assert conn.recv(1 << 10) == b""  # then closed
    conn.close()
    listening.close()
