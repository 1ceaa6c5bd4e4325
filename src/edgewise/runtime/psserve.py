"""The parameter server's side of its data plane (the protocol, the client and the bounds are
in :mod:`edgewise.runtime.psplane`): one thread runs an event loop for every worker's
connection and calls the server's per-batch methods in it."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Final, Protocol, cast

import numpy as np
from numpy.typing import NDArray

from edgewise.runtime import psplane as wire  # HELLO_TIMEOUT_S is read at each connection
from edgewise.runtime.psplane import (
    HELLO_WIRE,
    LEAVE,
    MAGIC,
    MAX_NAME_BYTES,
    OPS,
    PULL,
    PUSH_ASYNC,
    PUSH_SYNC,
    REPLY_WIRE,
    REQUEST_WIRE,
    STATUS_FAILED,
    STATUS_OK,
    TOKEN_BYTES,
    VERSION,
    Endpoint,
    Payload,
    nodelay,
    view_of,
)

__all__ = ["Handler", "PlaneServer", "Reply"]

_CLOSE_S: Final = 10.0

Reply = Payload | None | Future[Any]
"""What a handler's method gives: the reply's body now, or a future resolved with it (a
:data:`Payload`) later."""


class Handler(Protocol):
    """What the data plane calls: the parameter server's per-batch methods. They run in the
    plane's one thread and must not block: one that has to wait returns a future."""

    def pull(self, worker: str = "") -> Payload: ...

    def push_async_later(self, frame: NDArray[np.uint8], worker: str = "") -> Reply: ...

    def push_sync_later(self, worker: str, step: int, frame: NDArray[np.uint8]) -> Reply: ...

    def leave(self, worker: str) -> None: ...


class _Connection(asyncio.BufferedProtocol):
    """One worker's connection, read straight into its message's buffer: the hello, then
    requests one at a time (reading pauses while a request's reply is pending)."""

    def __init__(self, server: PlaneServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buffer, self.got = bytearray(HELLO_WIRE.size), 0
        self.header: tuple[int, int, int, int] | None = None  # op, step, name and payload lengths
        self.greeted, self.paused = False, False
        self.silence: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            nodelay(sock)
        self.server.conns.add(self)
        loop = asyncio.get_running_loop()
        self.silence = loop.call_later(wire.HELLO_TIMEOUT_S, self.hang_up)

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
        magic, version, token = HELLO_WIRE.unpack(message)
        if magic != MAGIC or version != VERSION or \
                not hmac.compare_digest(token, self.server.token):
            self.hang_up()  # not our worker: nothing is read or run for it
            return
        self.greeted = True
        if self.silence is not None:
            self.silence.cancel()  # a synchronous step may wait long for its slowest peer
        self._expect(REQUEST_WIRE.size)

    def _header(self, message: bytearray) -> None:
        op, step, name_len, payload_len = REQUEST_WIRE.unpack(message)
        why = None
        if op not in OPS:
            why = f"unknown operation {op}"
        elif name_len > MAX_NAME_BYTES:
            why = f"a worker's name is at most {MAX_NAME_BYTES} bytes, got {name_len}"
        elif payload_len > self.server.max_request_bytes:
            why = f"a request is at most {self.server.max_request_bytes} bytes, got {payload_len}"
        if why is not None:  # no message boundary is left to trust: answer, then hang up
            self._reply(STATUS_FAILED, why.encode())
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
        self._reply(STATUS_FAILED, f"{type(error).__name__}: {error}".encode())
        self._next()

    def _ok(self, result: Payload | None) -> None:
        self._reply(STATUS_OK, b"" if result is None else result)
        self._next()

    def _reply(self, status: int, body: Payload) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        view = view_of(body)
        self.transport.write(REPLY_WIRE.pack(status, len(view)))
        if len(view):
            self.transport.write(view)

    def _next(self) -> None:
        self._expect(REQUEST_WIRE.size)
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
        self.max_request_bytes = max_request_bytes
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
