"""A checkpoint given the BatchNorm statistics an evaluation measured with: only the
buffers change, and a mismatched layout is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgewise.runtime.evaluate import statistics_frame
from edgewise.runtime.pscheckpoint import checkpoint_frame, with_statistics
from edgewise.runtime.trainstate import FlatState
from edgewise.wire.frames import decode, encode


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8),
                               torch.nn.Linear(8, 2))


def _checkpoint(model: torch.nn.Module) -> bytes:
    flat = FlatState(model)
    params = flat.optimizer_parameters()  # as the server steps them
    opt = torch.optim.Adam(params.values(), lr=0.01)
    for p in params.values():
        p.grad = torch.ones_like(p)
    opt.step()  # one step: Adam has moments to keep
    model(torch.randn(16, 4))  # and BatchNorm running statistics of the training's own
    return checkpoint_frame(flat, params, opt, "lz4", {"epoch": 3, "updates": 7})


def test_only_the_statistics_change() -> None:
    model = _net()
    frame = _checkpoint(model)
    measured = _net()
    measured[1].running_mean.fill_(0.5)
    measured[1].running_var.fill_(2.0)
    out = decode(with_statistics(frame, statistics_frame(measured), "lz4"))
    before = decode(frame)
    assert out.meta == before.meta == {"epoch": 3, "updates": 7}
    assert set(out.arrays) == set(before.arrays)
    for name, array in out.arrays.items():
        if name in ("w.1.running_mean", "w.1.running_var"):
            value = 0.5 if name.endswith("mean") else 2.0
            assert np.array_equal(array, np.full(8, value, np.float32))
        else:  # weights, num_batches_tracked, the optimiser's state: as they were
            assert np.array_equal(array, before.arrays[name]), name


def test_statistics_of_another_layout_are_refused() -> None:
    frame = _checkpoint(_net())
    other = encode({"w.1.running_mean": torch.zeros(5)})
    with pytest.raises(ValueError, match="layout"):
        with_statistics(frame, other, "lz4")
    with pytest.raises(ValueError, match="layout"):
        with_statistics(frame, encode({"w.9.running_mean": torch.zeros(8)}), "none")
