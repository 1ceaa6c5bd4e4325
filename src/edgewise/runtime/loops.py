"""The training loops' names and the default one, and when an epoch is read (standard
library only, so that the manager's request schemas can name them without importing the
engine or PyTorch)."""

from __future__ import annotations

from typing import Literal

__all__ = ["DEFAULT_EVALUATION", "DEFAULT_MODE", "MODES", "Evaluation", "Mode", "PsShards"]

#: The loops: ``async`` (asynchronous, with the staleness treatment ``TrainConfig.staleness``),
#: ``async-paper`` (Deep-Edge's own: push after every batch, pull before the next, every
#: gradient applied as it arrives), ``sync`` (load-balanced synchronous steps).
Mode = Literal["async", "async-paper", "sync"]
MODES: tuple[Mode, ...] = ("async", "async-paper", "sync")
#: The default loop: the one that reached the target first in ``bench time-to-accuracy``
#: (2026-11-28, two runs: ``fair/sync`` at 0.90 first, in 34.5 and 39.0 device seconds; the
#: best ``async`` arm in 145.6 and 110.9; docs/workloads.md).
DEFAULT_MODE: Mode = "sync"

#: When the engine reads each epoch's validation metric (``TrainConfig.evaluation``):
#: ``after`` the epoch, within its time, or ``beside`` the next one.
Evaluation = Literal["after", "beside"]
#: The default: ``beside``, at idle priority (``runtime.idle``), since it reached the target
#: first in ``bench time-to-accuracy`` (2026-12-06, testbed, ``fair/sync``, seeds 0-2, the
#: same accuracies seed by seed: 5.20, 5.54, 6.33 device seconds against 6.29, 6.79, 7.07
#: after; docs/runtime.md, "Evaluation beside the next epoch").
DEFAULT_EVALUATION: Evaluation = "beside"

#: Where a run's parameter server lives (``TrainConfig.ps_shards``): ``one`` device, the
#: plan's server device; ``workers``, cut into ranges, one on each worker's device (the
#: ``sync`` loop only: ``runtime.shards``); ``auto``, ``workers`` for the ``sync`` loop and
#: ``one`` for the others.
PsShards = Literal["auto", "one", "workers"]
