"""The parameter server's data plane: a worker's pushes and pulls over a TCP connection of its
own, instead of a Ray actor call each.

Ray stays the control plane (placement, the epoch's calls, faults, the evaluator's weights);
only the per-batch traffic moves. A Ray actor call costs its callee about 1.3 ms of CPU for a
140 KB argument and a 140 KB reply, 20 times what the same exchange costs over a socket
(0.07 ms; three callers, this host; docs/runtime.md, "The data plane"), and the server's own
work for a push of the digits CNN is about 0.5 ms. On a device whose share of a core is small
(the testbed's Raspberry Pi holds a fifth of one) the calls, not the optimiser, capped how
many pushes a second the server could take.

The protocol (little-endian; nothing received is unpickled, every length is bounded):

- hello, client to server: ``b"EWPS"``, version (1 byte), the server's 16-byte token, which
  the worker learns over Ray (the cluster's authenticated channel). A wrong hello closes the
  connection before anything is read or run.
- request: op (1 byte: :data:`PULL`, :data:`PUSH_ASYNC`, :data:`PUSH_SYNC`, :data:`LEAVE`),
  step (int32), name length (uint16, at most :data:`MAX_NAME_BYTES`), payload length
  (uint32, at most the server's ``max_request_bytes``), then the worker's name (UTF-8) and
  the payload (a gradients frame, or nothing).
- reply: status (1 byte: 0 ok, 1 the method raised), length (uint32), then the weights frame
  (or nothing), or the error's text.

A request out of bounds is answered with an error and the connection closed: a peer that
sent a bad length cannot be trusted to be at a message boundary. One thread serves each
connection, so a synchronous step's pushes wait for each other as Ray's threaded calls did.
"""

from __future__ import annotations

import contextlib
import hmac
import secrets
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

import numpy as np
from numpy.typing import NDArray

__all__ = ["HELLO_TIMEOUT_S", "LEAVE", "MAX_NAME_BYTES", "PULL", "PUSH_ASYNC", "PUSH_SYNC",
           "Endpoint", "Handler", "PlaneClient", "PlaneServer", "RemoteFailure"]

PULL: Final = 1
PUSH_ASYNC: Final = 2
PUSH_SYNC: Final = 3
LEAVE: Final = 4
OPS: Final = frozenset((PULL, PUSH_ASYNC, PUSH_SYNC, LEAVE))
MAGIC: Final = b"EWPS"
VERSION: Final = 1
TOKEN_BYTES: Final = 16
MAX_NAME_BYTES: Final = 256
_HELLO: Final = struct.Struct(f"<4sB{TOKEN_BYTES}s")
_REQUEST: Final = struct.Struct("<BiHI")
_REPLY: Final = struct.Struct("<BI")
_OK, _FAILED = 0, 1
_ACCEPT_POLL_S: Final = 1.0
HELLO_TIMEOUT_S: Final = 30.0
"""How long a connection may take to say hello before it is closed unheard."""

Payload = bytes | bytearray | memoryview | NDArray[np.uint8]


class RemoteFailure(RuntimeError):
    """The parameter server's method raised; the message is its error's text."""


class Handler(Protocol):
    """What the data plane calls: the parameter server's per-batch methods."""

    def pull(self, worker: str = "") -> Payload: ...

    def push_async(self, frame: NDArray[np.uint8], worker: str = "") -> Payload: ...

    def push_sync(self, worker: str, step: int, frame: NDArray[np.uint8]) -> Payload: ...

    def leave(self, worker: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a server's data plane listens, the token its hello must carry and the largest
    request it reads."""

    host: str
    port: int
    token: bytes
    max_request_bytes: int


def _read_exact(conn: socket.socket, n: int) -> bytearray:
    """``n`` bytes from ``conn`` (none for ``n == 0``); ConnectionError if the peer closes
    first."""
    buffer = bytearray(n)
    view, got = memoryview(buffer), 0
    while got < n:
        k = conn.recv_into(view[got:])
        if k == 0:
            raise ConnectionError(f"the peer closed the connection after {got} of {n} bytes")
        got += k
    return buffer


def _read_message(conn: socket.socket, n: int) -> bytearray | None:
    """The first ``n`` bytes of a message, or None if the peer closed cleanly between
    messages."""
    first = conn.recv(n)
    if not first:
        return None
    return bytearray(first) + _read_exact(conn, n - len(first))


def _view(payload: Payload) -> memoryview:
    """``payload``'s bytes, without a copy."""
    view = payload.data if isinstance(payload, np.ndarray) else memoryview(payload)
    return view.cast("B")


def _send(conn: socket.socket, *parts: Payload) -> None:
    """Send ``parts`` back to back without joining them (scatter-gather)."""
    views = [v for v in map(_view, parts) if len(v)]
    while views:
        sent = conn.sendmsg(views)
        while views and sent >= len(views[0]):
            sent -= len(views[0])
            views.pop(0)
        if views and sent:
            views[0] = views[0][sent:]


def _nodelay(conn: socket.socket) -> socket.socket:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


class PlaneServer:
    """Serves ``handler``'s per-batch methods on ``host`` (an ephemeral port), one thread per
    connection, until :meth:`close`."""

    def __init__(self, handler: Handler, host: str, max_request_bytes: int) -> None:
        self.handler, self.max_request_bytes = handler, max_request_bytes
        self.token = secrets.token_bytes(TOKEN_BYTES)
        self.listener = socket.create_server((host, 0))
        self.listener.settimeout(_ACCEPT_POLL_S)
        self.endpoint = Endpoint(host, self.listener.getsockname()[1], self.token,
                                 max_request_bytes)
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._ops: dict[int, Callable[[str, int, NDArray[np.uint8]], Payload | None]] = {
            PULL: lambda name, step, payload: handler.pull(name),
            PUSH_ASYNC: lambda name, step, payload: handler.push_async(payload, name),
            PUSH_SYNC: lambda name, step, payload: handler.push_sync(name, step, payload),
            LEAVE: lambda name, step, payload: handler.leave(name),
        }
        self._acceptor = threading.Thread(target=self._accept, daemon=True,
                                          name="ps-plane-accept")
        self._acceptor.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            with self._lock:
                if self._closed.is_set():
                    conn.close()
                    return
                self._conns.add(conn)
            conn.settimeout(HELLO_TIMEOUT_S)
            threading.Thread(target=self._serve, args=(_nodelay(conn),), daemon=True,
                             name="ps-plane-conn").start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            hello = _read_message(conn, _HELLO.size)
            if hello is None:
                return
            magic, version, token = _HELLO.unpack(hello)
            if magic != MAGIC or version != VERSION or not hmac.compare_digest(token, self.token):
                return  # not our worker: nothing is read or run for it
            conn.settimeout(None)  # a synchronous step may wait long for its slowest peer
            while self._one(conn):
                pass
        except OSError:
            return  # the peer went away, or close() shut the connection
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    def _refuse(self, conn: socket.socket, why: str) -> bool:
        _send(conn, _REPLY.pack(_FAILED, len(why.encode())), why.encode())
        return False

    def _one(self, conn: socket.socket) -> bool:
        """Serve one request; False when the connection is to close."""
        header = _read_message(conn, _REQUEST.size)
        if header is None:
            return False
        op, step, name_len, payload_len = _REQUEST.unpack(header)
        if op not in OPS:
            return self._refuse(conn, f"unknown operation {op}")
        if name_len > MAX_NAME_BYTES:
            return self._refuse(conn, f"a worker's name is at most {MAX_NAME_BYTES} bytes, "
                                      f"got {name_len}")
        if payload_len > self.max_request_bytes:
            return self._refuse(conn, f"a request is at most {self.max_request_bytes} bytes, "
                                      f"got {payload_len}")
        raw_name, payload = _read_exact(conn, name_len), _read_exact(conn, payload_len)
        try:
            name = raw_name.decode()
            result = self._ops[op](name, step, np.frombuffer(payload, np.uint8))
        except Exception as exc:  # the method's own error goes back to its caller
            text = f"{type(exc).__name__}: {exc}".encode()
            _send(conn, _REPLY.pack(_FAILED, len(text)), text)
            return True
        body = b"" if result is None else result
        _send(conn, _REPLY.pack(_OK, len(_view(body))), body)
        return True

    def close(self) -> None:
        """Stop accepting and end every connection (their threads then return)."""
        with self._lock:
            self._closed.set()
            conns = list(self._conns)
        with contextlib.suppress(OSError):  # shutdown wakes the accepting thread at once
            self.listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.listener.close()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class PlaneClient:
    """A worker's connection to its server's data plane; one call at a time."""

    def __init__(self, endpoint: Endpoint, name: str, connect_timeout_s: float = 30.0) -> None:
        self.endpoint, self.name = endpoint, name.encode()
        if len(self.name) > MAX_NAME_BYTES:
            raise ValueError(f"a worker's name is at most {MAX_NAME_BYTES} bytes")
        conn = socket.create_connection((endpoint.host, endpoint.port),
                                        timeout=connect_timeout_s)
        conn.settimeout(None)
        self.conn = _nodelay(conn)
        _send(self.conn, _HELLO.pack(MAGIC, VERSION, endpoint.token))

    def send(self, op: int, step: int = 0, payload: Payload = b"") -> None:
        """Send one request (its reply is read by :meth:`receive`); ValueError for one
        larger than the server reads."""
        size = len(_view(payload))
        if size > self.endpoint.max_request_bytes:
            raise ValueError(f"a request is at most {self.endpoint.max_request_bytes} bytes, "
                             f"got {size}")
        _send(self.conn, _REQUEST.pack(op, step, len(self.name), size), self.name, payload)

    def receive(self) -> NDArray[np.uint8]:
        """The reply to the request sent last: the frame (empty for a leave); RemoteFailure
        if the server's method raised, ConnectionError if the server went away."""
        where = f"the parameter server at {self.endpoint.host}:{self.endpoint.port}"
        try:
            status, length = _REPLY.unpack(_read_exact(self.conn, _REPLY.size))
            body = _read_exact(self.conn, length)
        except OSError as exc:
            raise ConnectionError(f"{where} closed the connection ({exc})") from None
        if status != _OK:
            raise RemoteFailure(f"{where}: {body.decode(errors='replace')}")
        return np.frombuffer(body, np.uint8)

    def call(self, op: int, step: int = 0, payload: Payload = b"") -> NDArray[np.uint8]:
        """:meth:`send`, then :meth:`receive`."""
        try:
            self.send(op, step, payload)
        except OSError as exc:
            raise ConnectionError(f"the parameter server at {self.endpoint.host}:"
                                  f"{self.endpoint.port} is unreachable ({exc})") from None
        return self.receive()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.close()
