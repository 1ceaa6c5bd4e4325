"""BatchNorm's re-estimation before a reading (``runtime.evaluate.recalibrate_bn``): the
cumulative mean that ``torch.optim.swa_utils.update_bn`` computes, with dropout off and so
no random number drawn, and the trained-batch counters kept."""

from __future__ import annotations

import copy

import torch
from torch import nn

from edgewise.runtime.evaluate import EVAL_BATCH, recalibrate_bn


def _net(dropout: float) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(dropout),
                         nn.Linear(16, 16), nn.BatchNorm1d(16), nn.Linear(16, 3))


def test_it_is_torch_update_bn_without_dropout_and_draws_no_random_numbers() -> None:
    calib = torch.randn(300, 8, generator=torch.Generator().manual_seed(1))
    ours, oracle = _net(0.0), _net(0.0)
    for m in (ours, oracle):  # statistics a run left behind, and a counter of trained batches
        m[1].running_mean.fill_(3.0)
        m[1].num_batches_tracked.fill_(41)
    torch.optim.swa_utils.update_bn([calib[i : i + EVAL_BATCH] for i in range(0, 300, EVAL_BATCH)],
                                    oracle)
    assert recalibrate_bn(ours, calib)
    for a, b in zip(ours[1].state_dict().values(), oracle[1].state_dict().values(), strict=True):
        if a.is_floating_point():
            assert torch.allclose(a, b, atol=1e-6)
    assert int(ours[1].num_batches_tracked) == 41 and ours.training
    assert ours[1].momentum == 0.1  # the layer's own again
    dropped = _net(0.5)
    state = torch.get_rng_state()
    assert recalibrate_bn(dropped, calib)
    assert torch.equal(torch.get_rng_state(), state)
    plain = copy.deepcopy(_net(0.5))
    recalibrate_bn(plain, calib)
    assert torch.equal(dropped[5].running_var, plain[5].running_var)  # no mask: repeatable
