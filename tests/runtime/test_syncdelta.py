"""A synchronous run's narrowed replies as changes (``runtime.syncdelta``): the workers hold
the server's shadow exactly, and it stays within one rounding of one change of the server's
weights, where rounded weights drift by a rounding of the weights."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from edgewise.runtime.narrowing import rounded
from edgewise.runtime.syncdelta import SyncDeltas, check_delta
from edgewise.runtime.trainstate import FlatState
from edgewise.wire.frames import TransportError, WireDtype, decode


def _model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 4))


def _load(worker: FlatState, frame: bytes, version: int) -> int:
    meta = decode(frame).meta
    worker.load_weights(frame, change=check_delta(meta, version))
    return int(meta["updates"])


@pytest.mark.parametrize("wire", ["bfloat16", "float16", "int8"])
def test_workers_hold_the_shadow_and_the_shadow_follows_the_weights(wire: WireDtype) -> None:
    server = FlatState(_model(0), wire)
    workers = [FlatState(_model(i + 1), wire) for i in range(2)]
    deltas = SyncDeltas(server, version=0)
    versions = [_load(w, deltas.full_frame("none", {"updates": 0}), -1) for w in workers]
    weights = server.flats["p.float32"]
    g = torch.Generator().manual_seed(3)
    for step in range(1, 60):
        with torch.no_grad():  # an optimiser's step: small changes to every weight
            weights.add_(1e-3 * torch.randn(weights.shape, generator=g))
            server.flats["b.float32"].add_(0.01)
        frame = deltas.delta_frame(step, "lz4")
        versions = [_load(w, frame, v) for w, v in zip(workers, versions, strict=True)]
    shadow = deltas.shadow["p.float32"]
    for worker in workers:  # exactly the shadow, and the server's buffers
        assert torch.equal(worker.flats["p.float32"], shadow)
        assert torch.equal(worker.flats["b.float32"], server.flats["b.float32"])
    assert versions == [59, 59]
    off = (shadow - weights).abs().max()
    weights_rounded = (rounded(weights, wire) - weights).abs().max()
    assert off < weights_rounded / 8
    assert off <= (1e-3 * 5) * 2.0**-7  # one rounding of one step's change, at most


def test_a_change_from_another_version_is_refused() -> None:
    server = FlatState(_model(0), "bfloat16")
    deltas = SyncDeltas(server, version=4)
    frame = deltas.delta_frame(5, "none")
    meta = decode(frame).meta
    assert check_delta(meta, 4)
    with pytest.raises(TransportError, match="from version 4 reached weights of version 3"):
        check_delta(meta, 3)
    assert not check_delta(decode(deltas.full_frame("none", {"updates": 5})).meta, 3)
