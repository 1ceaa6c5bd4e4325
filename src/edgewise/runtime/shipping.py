"""An epoch's checkpoint on its way from the parameter server to the driver while the next
epoch trains.

The checkpoint (weights, buffers and the optimiser's state: three times the model) used to
ride in the reply to the epoch's last call, so every epoch waited for it to cross the
server's link: 4.9 MB of MobileNetV2 ×0.35 with Adam is 39 ms of device time on one of the
Deep-Edge testbed's 1 Gbit/s links by the rate alone, and the call took 44-50 device ms of
an epoch of about 0.55 s (docs/runtime.md, at each epoch's end).
Now the server keeps it (``ParameterServer.finish_epoch(keep_checkpoint=True)``) and a
thread of the driver fetches it (``kept_checkpoint``) while the next epoch runs, as
asynchronous checkpointing does (PyTorch's ``torch.distributed.checkpoint.async_save``).

What it costs: an epoch counts as done once its checkpoint has landed. A server lost before
its checkpoint left it takes that epoch with it: the engine drops the epoch's record and
the next attempt runs it again from the checkpoint before, exactly as if the server had
been lost during that epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from edgewise.runtime.pscheckpoint import merge_checkpoints
from edgewise.wire.frames import Codec

__all__ = ["Landed", "Shipment", "ship"]

_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="checkpoint")


Landed = tuple[bytes, Path | None]
"""A checkpoint that has landed: its frame, and the file it was saved to (None: not saved)."""


@dataclass(frozen=True, slots=True)
class Shipment:
    """The checkpoint of ``epoch`` (0-based) being fetched: ``ref`` the servers' calls,
    ``fetched`` the checkpoint once it has landed and been saved."""

    epoch: int
    ref: Any
    fetched: Future[Landed]

    def landed(self, timeout_s: float | None = None) -> Landed:
        """The checkpoint and its file, once here; the call's RayError if it cannot land
        (the server was lost first), TimeoutError after ``timeout_s``."""
        return self.fetched.result(timeout_s)


def ship(servers: list[Any], epoch: int, save: Callable[[int, bytes], Path | None],
         compression: Codec = "lz4") -> Shipment:
    """Start fetching the checkpoint the server kept for ``epoch`` (of each of its shards,
    put together into one server's: ``pscheckpoint.merge_checkpoints``); ``save(epoch,
    frame)`` stores it the moment it lands (a manager killed meanwhile resumes from it)."""
    ref = [server.kept_checkpoint.remote(epoch) for server in servers]

    def fetch() -> Landed:
        frame = merge_checkpoints(ray.get(ref), compression)
        return frame, save(epoch, frame)

    return Shipment(epoch, ref, _POOL.submit(fetch))
