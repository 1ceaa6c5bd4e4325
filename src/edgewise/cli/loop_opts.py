"""The training loop's flags (``--mode``, ``--target-accuracy``, ``--wire-dtype``) and the
time-to-accuracy line that ``train`` and ``update run`` print after a run."""

from __future__ import annotations

import typer

from edgewise.errors import ConfigError
from edgewise.runtime.engine import TrainResult
from edgewise.runtime.loops import DEFAULT_MODE, MODES, Mode
from edgewise.runtime.plan import (
    DEFAULT_EVALUATION,
    MAX_REFERENCE_BATCH,
    Evaluation,
    PsShards,
    evaluation_named,
    ps_shards_named,
)
from edgewise.wire.frames import WireChoice, wire_dtype_named

__all__ = ["EvaluationOpt", "LrReferenceOpt", "ModeOpt", "ShardsOpt", "TargetOpt", "WireOpt",
           "checked_evaluation", "checked_mode", "checked_shards", "checked_wire",
           "reached_line"]

ModeOpt = typer.Option(
    DEFAULT_MODE, "--mode",
    help="the training loop: sync (load-balanced synchronous steps; the default, the fastest "
         "to accuracy in `bench time-to-accuracy`), async (asynchronous, stale gradients "
         "treated) or async-paper (Deep-Edge's own: push after every batch, pull before the "
         "next, no treatment)")
TargetOpt = typer.Option(0.0, "--target-accuracy", min=0.0, max=1.0,
                         help="stop once validation accuracy reaches this, and say when "
                              "(0: off)")

WireOpt = typer.Option(
    "auto", "--wire-dtype",
    help="what weights and gradients travel as between the parameter server and its "
         "workers: float32 (as they are), bfloat16 or float16 (half the bytes; the server "
         "keeps float32 weights), int8 (a quarter, a scale per 256 values; the sync loop "
         "only), or auto: bfloat16 for the sync loop (whose replies are "
         "rounded changes, with error feedback both ways), float32 for the others")


EvaluationOpt = typer.Option(
    DEFAULT_EVALUATION, "--evaluation",
    help="when each epoch's validation accuracy is read: after (the epoch waits for it) or "
         "beside (the evaluating worker reads it at idle priority while the next epoch "
         "trains; the time to accuracy counts a reading when it is known)")


ShardsOpt = typer.Option(
    "auto", "--ps-shards",
    help="where the parameter server lives: one (on the plan's server device), workers (cut "
         "into ranges, one on each worker's device: each port carries a share of every "
         "step, and the steps are the same; the sync loop only), or auto: workers for the "
         "sync loop, one for the others")


LrReferenceOpt = typer.Option(
    0, "--lr-reference-batch", min=0, max=MAX_REFERENCE_BATCH,
    help="the global batch the learning rate was set for: the sync loop scales the rate "
         "to its own global batch from it (square root for Adam, linearly for SGD) and warms "
         "a raised rate up from this batch's over 5/90 of the epochs (0: the plan's own "
         "global batch)")


def checked_shards(shards: str) -> PsShards:
    """``shards`` if it is auto, one or workers; ConfigError naming ``--ps-shards``."""
    return ps_shards_named(shards, "--ps-shards")


def checked_evaluation(evaluation: str) -> Evaluation:
    """``evaluation`` if it is after or beside; ConfigError naming ``--evaluation``."""
    return evaluation_named(evaluation, "--evaluation")


def checked_wire(wire: str) -> WireChoice:
    """``wire`` if it names a wire dtype; ConfigError naming ``--wire-dtype`` otherwise."""
    return wire_dtype_named(wire, "--wire-dtype")


def checked_mode(mode: str) -> Mode:
    """``mode`` if it names a loop; ConfigError naming ``--mode`` otherwise."""
    for known in MODES:
        if mode == known:
            return known
    raise ConfigError(f"must be one of {', '.join(MODES)}, got {mode!r}", field="--mode")


def reached_line(result: TrainResult, target: float) -> str:
    """When the run reached ``target`` (device seconds, epoch), or that it did not."""
    seconds = result.time_to_accuracy(target)
    if seconds is None:
        best = max((r.val_accuracy for r in result.epochs), default=float("nan"))
        return (f"target accuracy {target:.3f} not reached in {len(result.epochs)} epochs "
                f"(best {best:.3f})")
    epoch = next(r.epoch for r in result.epochs if r.val_accuracy >= target)
    stop = ""
    if result.stopped_early:  # read beside the next epoch: the run stopped after that one
        stop = ", stopped there" if result.epochs[-1].epoch == epoch else \
            ", stopped after the next epoch, which trained while it was read"
    return (f"target accuracy {target:.3f} reached after epoch {epoch} in {seconds:.1f} "
            f"device seconds (time to accuracy){stop}")
