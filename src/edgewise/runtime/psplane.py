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
connection; a synchronous step's push is answered once its peers pushed, and the other
connections are served meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
import socket
import struct
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Final, Protocol, cast

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
_CLOSE_S: Final = 10.0
HELLO_TIMEOUT_S: Final = 30.0
"""How long a connection may take to say hello before it is closed unheard."""

Payload = bytes | bytearray | memoryview | NDArray[np.uint8]
Reply = Payload | None | Future[Any]
"""What a handler's method gives: the reply's body now, or a future resolved with it (a
:data:`Payload`) later."""


class RemoteFailure(RuntimeError):
    """The parameter server's method raised; the message is its error's text."""


class Handler(Protocol):
    """What the data plane calls: the parameter server's per-batch methods. They run in the
    plane's one thread and must not block: one that has to wait returns a future."""

    def pull(self, worker: str = "") -> Payload: ...

    def push_async_later(self, frame: NDArray[np.uint8], worker: str = "") -> Reply: ...

    def push_sync_later(self, worker: str, step: int, frame: NDArray[np.uint8]) -> Reply: ...

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


class _Connection(asyncio.BufferedProtocol):
    """One worker's connection, read straight into its message's buffer: the hello, then
    requests one at a time (reading pauses while a request's reply is pending)."""

    def __init__(self, server: PlaneServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buffer, self.got = bytearray(_HELLO.size), 0
        self.header: tuple[int, int, int, int] | None = None  # op, step, name and payload lengths
        self.greeted, self.paused = False, False
        self.silence: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            _nodelay(sock)
        self.server.conns.add(self)
        loop = asyncio.get_running_loop()
        self.silence = loop.call_later(HELLO_TIMEOUT_S, self.hang_up)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.conns.discard(self)
        if self.silence is not None:
            self.silence.cancel()

    def hang_up(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def get_buffer(self, sizehint: int) -> memoryview:
        return memoryview(self.buffer)[self.got :]

    def buffer_updated(self, nbytes: int) -> None:
        self.got += nbytes
        if self.got == len(self.buffer):
            message, self.buffer, self.got = self.buffer, bytearray(0), 0
            self._complete(message)

    def _expect(self, n: int) -> None:
        self.buffer, self.got = bytearray(n), 0

    def _complete(self, message: bytearray) -> None:
        if not self.greeted:
            self._hello(message)
        elif self.header is None:
            self._header(message)
        else:
            self._request(message)

    def _hello(self, message: bytearray) -> None:
        magic, version, token = _HELLO.unpack(message)
        if magic != MAGIC or version != VERSION or \
                not hmac.compare_digest(token, self.server.token):
            self.hang_up()  # not our worker: nothing is read or run for it
            return
        self.greeted = True
        if self.silence is not None:
            self.silence.cancel()  # a synchronous step may wait long for its slowest peer
        self._expect(_REQUEST.size)

    def _header(self, message: bytearray) -> None:
        op, step, name_len, payload_len = _REQUEST.unpack(message)
        why = None
        if op not in OPS:
            why = f"unknown operation {op}"
        elif name_len > MAX_NAME_BYTES:
            why = f"a worker's name is at most {MAX_NAME_BYTES} bytes, got {name_len}"
        elif payload_len > self.server.max_request_bytes:
            why = f"a request is at most {self.server.max_request_bytes} bytes, got {payload_len}"
        if why is not None:  # no message boundary is left to trust: answer, then hang up
            self._reply(_FAILED, why.encode())
            self.hang_up()
            return
        self.header = (op, step, name_len, payload_len)
        self._expect(name_len + payload_len)
        if name_len + payload_len == 0:
            self._complete(bytearray(0))

    def _request(self, message: bytearray) -> None:
        assert self.header is not None and self.transport is not None
        op, step, name_len, _ = self.header
        self.header = None
        try:
            name = bytes(message[:name_len]).decode()
            payload = np.frombuffer(message, np.uint8, offset=name_len)
            result = self.server.ops[op](name, step, payload)
        except Exception as exc:  # the method's own error goes back to its caller
            self._failed(exc)
            return
        if isinstance(result, Future):
            if result.done():
                self._answer(result)
            else:  # one request at a time, in order: read no more until this is answered
                self.transport.pause_reading()
                self.paused = True
                loop = asyncio.get_running_loop()
                result.add_done_callback(lambda f: _call_soon(loop, self._answer, f))
            return
        self._ok(result)

    def _answer(self, future: Future[Any]) -> None:
        error = future.exception()
        if error is not None:
            self._failed(error)
        else:
            self._ok(future.result())

    def _failed(self, error: BaseException) -> None:
        self._reply(_FAILED, f"{type(error).__name__}: {error}".encode())
        self._next()

    def _ok(self, result: Payload | None) -> None:
        self._reply(_OK, b"" if result is None else result)
        self._next()

    def _reply(self, status: int, body: Payload) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        view = _view(body)
        self.transport.write(_REPLY.pack(status, len(view)))
        if len(view):
            self.transport.write(view)

    def _next(self) -> None:
        self._expect(_REQUEST.size)
        if self.paused and self.transport is not None and not self.transport.is_closing():
            self.paused = False
            self.transport.resume_reading()


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[..., object],
               *args: object) -> None:
    """``callback(*args)`` on ``loop``'s thread, unless the loop has closed (the server's
    connections, and the reply, are gone with it)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback, *args)


class PlaneServer:
    """Serves ``handler``'s per-batch methods on ``host`` (an ephemeral port) until
    :meth:`close`: one thread runs an event loop for every connection, and the handler's
    methods in it, one request at a time.

    One thread, not one per connection: three connections' threads handing the GIL and the
    server's lock to each other at every operation cost the server 1.1-1.4 ms of CPU a push
    of the digits CNN; one thread (and the fused optimiser) 0.6-0.7 (docs/runtime.md, "One
    thread for the data plane"). A
    method that must wait (a synchronous step's push, until every peer pushed; a push under
    SSP, until the slowest worker is within the bound) returns a
    :class:`concurrent.futures.Future` instead, resolved by whichever call lets it go on;
    its connection is answered then, and the others are served meanwhile."""

    def __init__(self, handler: Handler, host: str, max_request_bytes: int) -> None:
        self.handler, self.max_request_bytes = handler, max_request_bytes
        self.token = secrets.token_bytes(TOKEN_BYTES)
        listener = socket.create_server((host, 0))
        self.endpoint = Endpoint(host, listener.getsockname()[1], self.token,
                                 max_request_bytes)
        self.conns: set[_Connection] = set()
        self.ops: dict[int, Callable[[str, int, NDArray[np.uint8]], Reply]] = {
            PULL: lambda name, step, payload: handler.pull(name),
            PUSH_ASYNC: lambda name, step, payload: handler.push_async_later(payload, name),
            PUSH_SYNC: lambda name, step, payload: handler.push_sync_later(name, step, payload),
            LEAVE: lambda name, step, payload: handler.leave(name),
        }
        # the standard library's loop, whatever the process's policy (Ray's workers install
        # uvloop's): the same loop on every host and in the tests
        self.loop = asyncio.SelectorEventLoop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                        name="ps-plane")
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            self.loop.create_server(lambda: _Connection(self), sock=listener),
            self.loop).result()
        self._closed = False

    async def _shut(self) -> None:
        self._server.close()
        for conn in list(self.conns):
            if conn.transport is not None:
                conn.transport.abort()  # the worker's next read sees the connection gone
        await self._server.wait_closed()

    def close(self) -> None:
        """Stop accepting and end every connection; the loop's thread then ends."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(RuntimeError, TimeoutError):
            asyncio.run_coroutine_threadsafe(self._shut(), self.loop).result(_CLOSE_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(_CLOSE_S)
        if not self._thread.is_alive():
            self.loop.close()


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
