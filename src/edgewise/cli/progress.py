"""Progress bars for a model update: epochs, samples of the current epoch, faults."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from edgewise.cli.common import err
from edgewise.cli.stages import plain_progress

__all__ = ["TrainingProgress"]

Hook = Callable[[str, dict[str, Any]], None]


class TrainingProgress:
    """An events callback for ``engine.train`` that draws two bars on stderr and chains to
    further hooks (e.g. a fault injector)."""

    def __init__(self, epochs: int, n_samples: int, *hooks: Hook) -> None:
        self.hooks = hooks
        self.bars = Progress(TextColumn("{task.description}"), BarColumn(),
                             MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                             transient=False)
        self.epoch_task = self.bars.add_task("epochs", total=epochs)
        self.sample_task = self.bars.add_task("samples", total=n_samples)
        self.n_samples, self.epoch = n_samples, 0
        # off a terminal the bars draw nothing: plain lines instead, one per little while
        self.plain = None if err.is_terminal else plain_progress("training")

    def __enter__(self) -> TrainingProgress:
        self.bars.start()
        if self.plain is not None:
            self.plain("starting the parameter server and the workers", 0.0)
        return self

    def __exit__(self, *exc: object) -> None:
        self.bars.stop()

    @property
    def progress_poll_s(self) -> float | None:
        """The shortest progress period a chained hook asks for (a fault waiting for its
        moment, ``runtime.faults.KillMidEpoch``), if any."""
        from edgewise.runtime.faults import progress_poll_s  # Ray: not at the CLI's start

        return progress_poll_s(*self.hooks)

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "epoch_start":
            self.epoch = data["epoch"]
            self.bars.reset(self.sample_task, description=f"epoch {data['epoch']} samples")
        elif kind == "progress":
            self.bars.update(self.sample_task, completed=data["samples"])
            if self.plain is not None:
                self.plain(f"epoch {self.epoch}, {data['samples']} of {self.n_samples} samples",
                           data["samples"] / max(1, self.n_samples))
        elif kind == "epoch_end":
            record = data["record"]
            self.bars.update(self.sample_task, completed=len(record.applied_ids))
            self.bars.advance(self.epoch_task)
            self.bars.console.print(f"epoch {record.epoch}: validation accuracy "
                                    f"{record.val_accuracy:.3f} in {record.wall_seconds:.2f} s")
        elif kind == "epoch_lost":
            self.bars.console.print(f"[yellow]epoch {data['epoch']}'s checkpoint was lost with "
                                    "its server[/]: the epoch runs again")
        elif kind == "interrupted":
            lost = data["interruption"]
            self.bars.console.print(f"[red]lost {lost.member} on {lost.device}[/]: {lost.reason} "
                                    f"(strike {lost.strikes} of 3)")
        elif kind == "restart":
            plan = data["plan"]
            self.bars.console.print(f"[yellow]re-triggered from the last checkpoint[/] with "
                                    f"workers {', '.join(plan.workers)}")
        for hook in self.hooks:
            hook(kind, data)
