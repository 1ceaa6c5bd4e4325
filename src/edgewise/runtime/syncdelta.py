"""A synchronous run's replies on a narrowed wire as rounded changes, not rounded weights.

With ``wire_dtype`` ``bfloat16`` or ``float16`` a reply that carries the weights rounds
every weight (2⁻⁹ of its size for bfloat16), and the workers compute on that rounded copy.
A synchronous step moves every worker from the same version to the next one, so the server
can send the change instead: it keeps the weights every worker holds (the *shadow*, at
float32), and answers a step with the difference between its own weights and the shadow,
rounded, adding to the shadow exactly what it sent. A worker adds the change to its weights
and holds the shadow again. What the rounding of one change loses is in the next change
(the difference is taken from the shadow, not from the last weights), so the workers'
weights stay within one rounding of one step's change of the server's, instead of one
rounding of the weights; this is error feedback (Seide et al., 2014) on the reply, as
``FlatState._fed_back`` does on the push.

A pull (a worker's first of an epoch, a worker of a new attempt) gets the shadow itself at
float32: afterwards every worker holds the same weights, which the next change assumes.
The asynchronous loop answers each worker at its own version and keeps rounded weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from edgewise.runtime.narrowing import narrow, widen
from edgewise.runtime.trainstate import FlatState
from edgewise.wire.frames import Codec, TransportError

__all__ = ["DELTA_FROM", "SyncDeltas", "check_delta"]

DELTA_FROM = "delta_from"
"""The meta key of a change's frame: the version the change starts from."""


class SyncDeltas:
    """The shadow of a server's ``flat`` weights and the frames that keep workers on it."""

    def __init__(self, flat: FlatState, version: int) -> None:
        self.flat = flat
        # a shard's (runtime.shards) range alone: the workers hold the others' from them
        self.shadow = {k: flat.owned(k).clone() for k, v in flat.flats.items()
                       if k.startswith("p.") and v.dtype == torch.float32}
        self.version = version  # the server version the shadow stands for

    def full_frame(self, compression: Codec, meta: Mapping[str, Any]) -> bytes:
        """The shadow at float32 and the buffers as they are (what a pull returns)."""
        return self.flat.frame({**self.flat.flats, **self.shadow}, compression, meta,
                               narrow=False)

    def delta_frame(self, version: int, compression: Codec) -> bytes:
        """The server's weights (at ``version``) minus the shadow, in the wire dtype, with
        the buffers; the shadow takes the rounded change (what a synchronous reply returns)."""
        changes: dict[str, torch.Tensor] = {}
        for key, shadow in self.shadow.items():
            sent = narrow(key, self.flat.owned(key) - shadow, self.flat.wire)
            shadow.add_(widen(sent)[key])
            changes |= sent
        meta = {"updates": version, DELTA_FROM: self.version}
        self.version = version
        return self.flat.frame({**self.flat.flats, **changes}, compression, meta,
                               narrow=False)


def check_delta(meta: Mapping[str, Any], version: int) -> bool:
    """Whether a frame with ``meta`` is a change (and so is added, not copied); a change
    that does not start from ``version``, the weights' version the receiver holds, is
    refused: adding it would give other weights than the server's shadow."""
    start = meta.get(DELTA_FROM)
    if start is None:
        return False
    if int(start) != version:
        raise TransportError(f"a change from version {start} reached weights of version "
                             f"{version}")
    return True
