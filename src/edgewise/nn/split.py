"""Splitting an ``nn.Sequential`` into contiguous partitions at child boundaries."""

from __future__ import annotations

import itertools

from torch import nn

from edgewise.errors import ConfigError

__all__ = ["split_sequential"]


def split_sequential(model: nn.Module, cuts: tuple[int, ...] | list[int]) -> list[nn.Module]:
    """Split an ``nn.Sequential`` at child boundaries into contiguous partitions.

    Parameters
    ----------
    model : nn.Module
        An ``nn.Sequential``; its children are the segments of the chain.
    cuts : sequence of int
        Boundaries as in :class:`~edgewise.pipeline.problem.PipelinePlan`: partition ``k``
        runs children ``cuts[k] .. cuts[k + 1] - 1``; ``cuts[0] == 0`` and ``cuts[-1]`` is the
        number of children, strictly increasing.

    Returns
    -------
    list of nn.Module
        One ``nn.Sequential`` per partition, sharing the model's parameters (not copies).

    Raises
    ------
    ConfigError
        The model is not an ``nn.Sequential`` or the cuts are not valid boundaries.
    """
    if not isinstance(model, nn.Sequential):
        raise ConfigError(f"{type(model).__name__} is not an nn.Sequential; split it with "
                          "torch.fx first", field="model")
    children = list(model.children())
    bounds = list(cuts)
    ok = len(bounds) >= 2 and bounds[0] == 0 and bounds[-1] == len(children)
    if not ok or any(b <= a for a, b in itertools.pairwise(bounds)):
        raise ConfigError(f"cuts {bounds} must rise strictly from 0 to {len(children)}",
                          field="cuts")
    return [nn.Sequential(*children[a:b]) for a, b in itertools.pairwise(bounds)]
