"""The task's loss and metric, and its classes checked against the data's."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from edgewise.errors import ConfigError
from edgewise.nn.workload.spec import TaskSpec

__all__ = ["check_classes", "loss", "metric_hits"]


def loss(task: TaskSpec, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The training loss of a batch (cross-entropy, optionally label-smoothed)."""
    return F.cross_entropy(logits, labels, label_smoothing=task.label_smoothing)


def metric_hits(task: TaskSpec, logits: torch.Tensor, labels: torch.Tensor) -> int:
    """How many samples of the batch the metric counts as right (top-1 or top-5)."""
    k = 1 if task.metric == "top1" else min(5, logits.shape[-1])
    top = logits.topk(k, dim=-1).indices
    return int((top == labels.unsqueeze(-1)).any(dim=-1).sum())


def check_classes(task: TaskSpec, data_classes: tuple[str, ...], named: bool) -> int:
    """The number of classes the model must output. ``data_classes`` are the data's classes
    (folder names when ``named``, else ``0..K-1`` from the largest label).

    Raises
    ------
    ConfigError
        Field ``task.classes``: the task's classes disagree with the data's.
    """
    found = len(data_classes)
    if task.classes is not None:
        if named and set(task.classes) != set(data_classes):
            missing = sorted(set(task.classes) - set(data_classes))
            extra = sorted(set(data_classes) - set(task.classes))
            raise ConfigError(f"the data's classes differ: no folder for {missing or 'none'}, "
                              f"folders not in the task: {extra or 'none'}",
                              field="task.classes")
        want = len(task.classes)
    else:
        want = task.num_classes if task.num_classes is not None else found
    if named and want != found:
        raise ConfigError(f"the task has {want} classes, the data {found}",
                          field="task.classes")
    if want < found:
        raise ConfigError(f"the task has {want} classes but the data's labels go up to "
                          f"{found - 1}", field="task.classes")
    return want
