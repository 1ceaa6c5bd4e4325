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
sent a bad length cannot be trusted to be at a message boundary. One thread serves every
connection (the server's side is :mod:`edgewise.runtime.psserve`); a synchronous step's
push is answered once its peers pushed, and the other connections are served meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

__all__ = ["HELLO_TIMEOUT_S", "HELLO_WIRE", "LEAVE", "MAX_NAME_BYTES", "OPS", "PULL",
           "PUSH_ASYNC", "PUSH_SYNC", "REPLY_WIRE", "REQUEST_WIRE", "STATUS_FAILED", "STATUS_OK",
           "Endpoint", "Payload", "PlaneClient", "RemoteFailure", "connect", "nodelay", "view_of"]

PULL: Final = 1
PUSH_ASYNC: Final = 2
PUSH_SYNC: Final = 3
LEAVE: Final = 4
OPS: Final = frozenset((PULL, PUSH_ASYNC, PUSH_SYNC, LEAVE))
MAGIC: Final = b"EWPS"
VERSION: Final = 1
TOKEN_BYTES: Final = 16
MAX_NAME_BYTES: Final = 256
HELLO_WIRE: Final = struct.Struct(f"<4sB{TOKEN_BYTES}s")
REQUEST_WIRE: Final = struct.Struct("<BiHI")
REPLY_WIRE: Final = struct.Struct("<BI")
STATUS_OK, STATUS_FAILED = 0, 1
HELLO_TIMEOUT_S: Final = 30.0
"""How long a connection may take to say hello before it is closed unheard."""
_log = logging.getLogger(__name__)

Payload = bytes | bytearray | memoryview | NDArray[np.uint8]
class RemoteFailure(RuntimeError):
    """The parameter server's method raised; the message is its error's text."""


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


def view_of(payload: Payload) -> memoryview:
    """``payload``'s bytes, without a copy."""
    view = payload.data if isinstance(payload, np.ndarray) else memoryview(payload)
    return view.cast("B")


def _send(conn: socket.socket, *parts: Payload) -> None:
    """Send ``parts`` back to back without joining them (scatter-gather)."""
    views = [v for v in map(view_of, parts) if len(v)]
    while views:
        sent = conn.sendmsg(views)
        while views and sent >= len(views[0]):
            sent -= len(views[0])
            views.pop(0)
        if views and sent:
            views[0] = views[0][sent:]


def nodelay(conn: socket.socket) -> socket.socket:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


class PlaneClient:
    """A worker's connection to its server's data plane; one call at a time."""

    def __init__(self, endpoint: Endpoint, name: str, connect_timeout_s: float = 30.0) -> None:
        self.endpoint, self.name = endpoint, name.encode()
        if len(self.name) > MAX_NAME_BYTES:
            raise ValueError(f"a worker's name is at most {MAX_NAME_BYTES} bytes")
        conn = socket.create_connection((endpoint.host, endpoint.port),
                                        timeout=connect_timeout_s)
        conn.settimeout(None)
        self.conn = nodelay(conn)
        _send(self.conn, HELLO_WIRE.pack(MAGIC, VERSION, endpoint.token))

    def send(self, op: int, step: int = 0, payload: Payload = b"") -> None:
        """Send one request (its reply is read by :meth:`receive`); ValueError for one
        larger than the server reads, ConnectionError if the server cannot be reached."""
        size = len(view_of(payload))
        if size > self.endpoint.max_request_bytes:
            raise ValueError(f"a request is at most {self.endpoint.max_request_bytes} bytes, "
                             f"got {size}")
        try:
            _send(self.conn, REQUEST_WIRE.pack(op, step, len(self.name), size), self.name,
                  payload)
        except OSError as exc:
            raise ConnectionError(f"the parameter server at {self.endpoint.host}:"
                                  f"{self.endpoint.port} is unreachable ({exc})") from None

    def receive(self) -> NDArray[np.uint8]:
        """The reply to the request sent last: the frame (empty for a leave); RemoteFailure
        if the server's method raised, ConnectionError if the server went away."""
        where = f"the parameter server at {self.endpoint.host}:{self.endpoint.port}"
        try:
            status, length = REPLY_WIRE.unpack(_read_exact(self.conn, REPLY_WIRE.size))
            body = _read_exact(self.conn, length)
        except OSError as exc:
            raise ConnectionError(f"{where} closed the connection ({exc})") from None
        if status != STATUS_OK:
            raise RemoteFailure(f"{where}: {body.decode(errors='replace')}")
        return np.frombuffer(body, np.uint8)

    def call(self, op: int, step: int = 0, payload: Payload = b"") -> NDArray[np.uint8]:
        """:meth:`send`, then :meth:`receive`."""
        self.send(op, step, payload)
        return self.receive()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.close()


def connect(endpoint: Endpoint | None, name: str, who: str) -> PlaneClient | None:
    """A client of the server's data plane at ``endpoint`` (the server's
    ``plane_endpoint``) called ``name``; None where the server opened none or ``who``
    cannot reach it: the caller then pushes as Ray calls (a firewall that lets only Ray's
    ports through slows training down, it does not stop it)."""
    if endpoint is None:
        return None
    try:
        return PlaneClient(endpoint, name)
    except OSError as exc:
        _log.warning("%s: the parameter server's data plane at %s:%d is unreachable (%s); "
                     "pushing as Ray calls", who, endpoint.host, endpoint.port, exc)
        return None
