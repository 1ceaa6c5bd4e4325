"""A worker's side of its parameter server: one server, or the shards of one
(``runtime.shards``), each reached over its data plane (``runtime.psplane``) or as Ray calls.

Each request goes to every server before any reply is read, so the shards work on it
together; the replies come back in the servers' order (a shard's weights are its range).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import ray

from edgewise.cluster.model import Link
from edgewise.runtime.psplane import LEAVE, PULL, PUSH_ASYNC, PUSH_SYNC, PlaneClient, connect
from edgewise.runtime.shaping import ShapedLink
from edgewise.runtime.trainstate import Frame

__all__ = ["Servers"]


class Servers:
    """The servers ``handles`` (actor handles, in shard order) of the worker ``name`` on
    ``device``, over ``links`` (one each, as the transport emulates them); ``transport``
    ``"socket"`` or ``"ray"``; ``sync``: pushes are a synchronous step's."""

    def __init__(self, handles: Sequence[Any], links: Sequence[Link], device: str, name: str,
                 transport: str, sync: bool) -> None:
        if len(handles) != len(links) or not handles:
            raise ValueError("a worker needs one link to each of its servers")
        self.handles, self.device, self.name = list(handles), device, name
        self.links = [ShapedLink(link) for link in links]
        self.peers = [link.b if link.a == device else link.a for link in links]
        self.transport, self.sync = transport, sync
        self.planes: list[PlaneClient] | None = None

    @property
    def count(self) -> int:
        return len(self.handles)

    def _planes(self) -> list[PlaneClient] | None:
        """The connections to the servers' data planes, made on first use; None where the
        requests go as Ray calls (``transport="ray"``, a server that opened no port, or one
        this worker cannot reach: a firewall that lets only Ray's ports through slows
        training down, it does not stop it)."""
        if self.planes is None and self.transport == "socket":
            endpoints = ray.get([h.plane_endpoint.remote() for h in self.handles])
            planes = [connect(e, self.device, self.name) for e in endpoints]
            if all(p is not None for p in planes):
                self.planes = [p for p in planes if p is not None]
            else:
                for plane in planes:
                    if plane is not None:
                        plane.close()
                self.transport = "ray"
        return self.planes

    def pull(self) -> list[Frame]:
        """Every server's weights (a shard's: its range)."""
        planes = self._planes()
        if planes is None:
            return list(ray.get([h.pull.remote(self.device) for h in self.handles]))
        for plane in planes:
            plane.send(PULL)
        return [plane.receive() for plane in planes]

    def leave(self) -> None:
        """Tell every server this worker has no batches left this epoch."""
        planes = self._planes()
        if planes is None:
            ray.get([h.leave.remote(self.device) for h in self.handles])
            return
        for plane in planes:
            plane.send(LEAVE)
        for plane in planes:
            plane.receive()

    def push(self, step: int, frames: Sequence[Frame]) -> list[Any] | None:
        """Send each server its gradients frame; the Ray calls' refs (None over the data
        planes, whose replies :meth:`replies` reads)."""
        planes = self._planes()
        if planes is not None:
            for plane, frame in zip(planes, frames, strict=True):
                plane.send(PUSH_SYNC if self.sync else PUSH_ASYNC, step, frame)
            return None
        if self.sync:
            return [h.push_sync.remote(self.device, step, f)
                    for h, f in zip(self.handles, frames, strict=True)]
        return [h.push_async.remote(f, self.device)
                for h, f in zip(self.handles, frames, strict=True)]

    def replies(self, sent: list[Any] | None) -> list[Frame]:
        """The replies to the push just sent, in the servers' order."""
        planes = self._planes()
        if planes is not None:
            return [plane.receive() for plane in planes]
        return list(ray.get(sent or []))

    def weights(self) -> list[Any]:
        """Refs of every server's weights at float32 (an evaluation's)."""
        return [h.weights.remote() for h in self.handles]

    def obey(self, cut: Collection[tuple[str, str]]) -> None:
        """Cut the links to servers on the far side of a cut pair; restore the others."""
        for link, peer in zip(self.links, self.peers, strict=True):
            if (self.device, peer) in cut or (peer, self.device) in cut:
                link.cut()
            else:
                link.restore()

    def close(self) -> None:
        for plane in self.planes or []:
            plane.close()
