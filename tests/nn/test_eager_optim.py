"""The eager optimisers step as PyTorch's own do, bit for bit, and import no TorchDynamo."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch

from edgewise.nn.eager_optim import EagerAdam, EagerSGD
from edgewise.nn.models import make_optimizer


def _params(seed: int) -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(shape, generator=gen)) for shape in ((7, 5), (5,), (3,))]


def _train(opt: torch.optim.Optimizer, params: list[torch.nn.Parameter], steps: int) -> None:
    for step in range(steps):
        for p in params:
            p.grad = torch.sin(p.detach() * (step + 1)) + 0.1 * step
        opt.step()
        opt.zero_grad()


@pytest.mark.parametrize(("eager", "plain", "options"), [
    (EagerAdam, torch.optim.Adam, {"lr": 0.01, "fused": True}),
    (EagerAdam, torch.optim.Adam, {"lr": 0.01, "weight_decay": 0.1}),
    (EagerSGD, torch.optim.SGD, {"lr": 0.05, "momentum": 0.9, "fused": True}),
    (EagerSGD, torch.optim.SGD, {"lr": 0.05}),
])
def test_the_weights_and_the_state_are_pytorchs_bit_for_bit(
        eager: type[torch.optim.Optimizer], plain: type[torch.optim.Optimizer],
        options: dict[str, float | bool]) -> None:
    ours, theirs = _params(0), _params(0)
    opt_ours, opt_theirs = eager(ours, **options), plain(theirs, **options)
    _train(opt_ours, ours, 6)
    _train(opt_theirs, theirs, 6)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))
    mine, other = opt_ours.state_dict(), opt_theirs.state_dict()
    assert mine["param_groups"] == other["param_groups"]
    for key, state in other["state"].items():
        assert set(mine["state"][key]) == set(state)
        assert all(torch.equal(mine["state"][key][k], v) for k, v in state.items())
    assert isinstance(opt_ours, plain)  # what reads an Adam's moments reads these too


def test_a_checkpoint_moves_between_the_eager_and_the_plain_optimiser() -> None:
    ours, theirs = _params(1), _params(1)
    opt_ours = EagerAdam(ours, lr=0.02, fused=True)
    _train(opt_ours, ours, 3)
    with torch.no_grad():
        for a, b in zip(theirs, ours, strict=True):
            a.copy_(b)
    opt_theirs = torch.optim.Adam(theirs, lr=0.02, fused=True)
    # a checkpoint is a copy (a state dict holds the optimiser's own tensors)
    opt_theirs.load_state_dict(copy.deepcopy(opt_ours.state_dict()))
    resumed = EagerAdam(_params(2), lr=0.02, fused=True)
    resumed.load_state_dict(copy.deepcopy(opt_theirs.state_dict()))
    assert resumed.state_dict()["state"][0]["step"] == 3
    _train(opt_ours, ours, 2)
    _train(opt_theirs, theirs, 2)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))


def test_building_and_stepping_one_imports_no_torchdynamo() -> None:
    """In a fresh process, as a worker's: PyTorch's own optimiser imports the compiler (the
    0.8 CPU-seconds this module saves); ours does not."""
    script = """
import sys, torch
from edgewise.nn.models import make_optimizer
model = torch.nn.Linear(4, 2)
for name in ("adam", "sgd"):
    opt = make_optimizer(name, model, 0.01, 0.9)
    model(torch.ones(3, 4)).sum().backward()
    opt.step(); opt.zero_grad(); opt.load_state_dict(opt.state_dict())
print("torch._dynamo" in sys.modules)
torch.optim.Adam(model.parameters(), lr=0.01)
print("torch._dynamo" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.split() == ["False", "True"]


def test_make_optimizer_gives_the_eager_classes() -> None:
    model = torch.nn.Linear(3, 1)
    assert type(make_optimizer("adam", model, 0.01)) is EagerAdam
    assert type(make_optimizer("sgd", model, 0.01, 0.9)) is EagerSGD
