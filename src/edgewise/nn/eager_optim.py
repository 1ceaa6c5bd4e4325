"""PyTorch's Adam and SGD, stepping exactly as they do, without importing TorchDynamo.

Every ``torch.optim.Optimizer`` imports ``torch._dynamo`` on its first ``add_param_group``
(which its constructor calls), ``state_dict``, ``zero_grad`` or ``step``: those methods are
wrapped to keep ``torch.compile`` from tracing them, and the wrappers import the compiler
on first use. On this project's 2-core host that import took 0.80 CPU-seconds in a process
that had already imported PyTorch, and it was the largest avoidable cost of starting a
parameter server or a shard in a fresh Ray worker process: 7.9 % of the samples of a whole
profiled run of the suite's non-testbed part (py-spy over every process, 2026-12-07;
docs/testing.md).
PyTorch has removed the eager import from ``import torch`` itself for the same reason
(pytorch/pytorch#162595); the optimizers still do it.

``EagerAdam`` and ``EagerSGD`` are ``torch.optim.Adam`` and ``torch.optim.SGD`` (same class
hierarchy, state, ``state_dict`` and checkpoints) whose wrapped methods call PyTorch's own
undecorated functions, with ``step`` under ``torch.no_grad()`` as the wrapper runs it for a
non-differentiable optimizer. The arithmetic is PyTorch's: a test checks the weights and
moments bit for bit against the plain classes. What is given up is only what the wrappers
are for: these optimizers are not meant to run inside ``torch.compile``, which edgewise
never uses."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch.optim import Optimizer

__all__ = ["EagerAdam", "EagerSGD"]


def _undecorated(method: Callable[..., Any]) -> Callable[..., Any]:
    """The function under PyTorch's decorators (``functools.wraps`` keeps it)."""
    found: Callable[..., Any] = inspect.unwrap(method)
    return found


_ADD_PARAM_GROUP = _undecorated(Optimizer.add_param_group)
_STATE_DICT = _undecorated(Optimizer.state_dict)
_LOAD_STATE_DICT = _undecorated(Optimizer.load_state_dict)
_ZERO_GRAD = _undecorated(Optimizer.zero_grad)
_ADAM_STEP = _undecorated(torch.optim.Adam.step)
_SGD_STEP = _undecorated(torch.optim.SGD.step)


class _Eager(Optimizer):
    """The base class's wrapped methods, called undecorated."""

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        _ADD_PARAM_GROUP(self, param_group)

    def state_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = _STATE_DICT(self)
        return found

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _LOAD_STATE_DICT(self, state_dict)

    def zero_grad(self, set_to_none: bool = True) -> None:
        _ZERO_GRAD(self, set_to_none)


class EagerAdam(_Eager, torch.optim.Adam):
    """``torch.optim.Adam`` without the TorchDynamo import (module docstring)."""

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss: float | None = _ADAM_STEP(self, closure)
        return loss


class EagerSGD(_Eager, torch.optim.SGD):
    """``torch.optim.SGD`` without the TorchDynamo import (module docstring)."""

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss: float | None = _SGD_STEP(self, closure)
        return loss
