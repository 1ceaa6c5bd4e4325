"""How the race's DDP and one-device arms read an epoch (``suites.tta_ddp._evaluate``): as
the engine measures (BatchNorm re-estimated on the calibration samples, on a copy), and
with the replica's own running statistics beside it; the replica is left as it was."""

from __future__ import annotations

import torch
from torch import nn

from edgewise.nn.workload import TaskSpec
from edgewise.runtime.evaluate import validation_metric
from edgewise.suites.tta_ddp import _evaluate


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(8, 6), nn.BatchNorm1d(6), nn.ReLU(),
                         nn.Linear(6, 2))


def test_both_readings_and_the_replica_untouched() -> None:
    task = TaskSpec(input_shape=(8,), num_classes=2)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(64, 8, generator=gen) * 3 + 2
    y = (x[:, 0] > 2).long()
    model = _model().train()
    for _ in range(3):  # a few steps: running statistics off their initial (0, 1)
        model(x)
    bn = model[2]
    assert isinstance(bn, nn.BatchNorm1d)
    bn.running_mean.fill_(50.0)  # far from the data's: running statistics read badly
    before = {k: v.clone() for k, v in model.state_dict().items()}

    measured, running, seconds = _evaluate(model, task, (x, y), x[:32], stretch=1.0)

    reference = _model()
    reference.load_state_dict(before)
    assert measured == validation_metric(reference, task, x, y, x[:32])
    reference.load_state_dict(before)
    with torch.no_grad():
        hits = int((reference.eval()(x).argmax(1) == y).sum())
    assert running == hits / len(y)
    assert measured != running  # the two readings differ on these statistics
    assert seconds >= 0
    assert model.training
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key
