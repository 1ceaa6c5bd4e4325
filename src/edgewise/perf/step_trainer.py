"""The profiled task, one training step at a time: DigitsCNN on digits (or a user's
workload), its compute and its update (push, server step, pull) timed apart (Deep-Edge
§IV-B1)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from edgewise.nn.data import digits_split
from edgewise.nn.models import DigitsCNN, make_optimizer
from edgewise.nn.workload import Workload, build_model, loss, open_data
from edgewise.wire.state import decode_state_dict, encode_state_dict

__all__ = ["MAX_PROFILE_SAMPLES", "StepTrainer", "Update"]

MAX_PROFILE_SAMPLES = 2048
"""The most training samples of a workload a profiler decodes (steps draw batches from them)."""

Update = Callable[[nn.Module, np.ndarray], None]
"""Push the model's gradients (and the ids of the batch's samples) to a parameter server
and load the weights it returns into the model."""


class StepTrainer:
    """DigitsCNN training steps on digits, one thread: forward + backward timed as compute;
    push + update + pull timed as ``update`` (a parameter server elsewhere, e.g. the one a
    run uses) or, by default, as gradients encoded and decoded with the project transport,
    an Adam step, then the weights encoded and decoded and loaded (the update is local, so
    the parameter server is this host and no network is crossed)."""

    def __init__(self, seed: int, update: Update | None = None,
                 workload: Workload | None = None) -> None:
        """``workload`` (resolved: its task's classes and input shape filled in) replaces
        DigitsCNN on digits; at most MAX_PROFILE_SAMPLES of its training split are read."""
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        self.workload = workload
        self.rng = np.random.default_rng(seed)
        if workload is None:
            train, _ = digits_split(seed=seed)
            self.model: nn.Module = DigitsCNN()
        else:
            source = open_data(workload, seed)
            n = source.size("train")
            chosen = np.sort(self.rng.choice(n, size=min(n, MAX_PROFILE_SAMPLES), replace=False))
            train = source.read("train", chosen.astype(np.int64))
            self.model = build_model(workload, seed=seed)
        self.x, self.y = torch.from_numpy(train.x), torch.from_numpy(train.y)
        self.ids = train.ids
        self.opt = make_optimizer("adam", self.model, 0.003)
        self.update = update

    def _loss(self, idx: torch.Tensor) -> torch.Tensor:
        out = self.model(self.x[idx])
        if self.workload is None:
            return nn.functional.cross_entropy(out, self.y[idx])
        return loss(self.workload.task, out, self.y[idx])

    def step(self, batch: int) -> tuple[float, float]:
        """One step; (compute seconds, update seconds)."""
        chosen = self.rng.choice(len(self.y), size=min(batch, len(self.y)), replace=False)
        idx = torch.from_numpy(chosen)
        t0 = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        self._loss(idx).backward()  # type: ignore[no-untyped-call]
        t1 = time.perf_counter()
        if self.update is not None:
            self.update(self.model, self.ids[chosen].astype(np.int64))
            return t1 - t0, time.perf_counter() - t1
        params = dict(self.model.named_parameters())
        grads = {n: p.grad for n, p in params.items() if p.grad is not None}
        pushed = decode_state_dict(encode_state_dict(grads))
        for name, grad in pushed.items():
            params[name].grad = grad
        self.opt.step()
        pulled = decode_state_dict(
            encode_state_dict(self.model.state_dict()))
        self.model.load_state_dict(pulled)
        return t1 - t0, time.perf_counter() - t1
