"""Ctrl-C during and after the race's DDP arm (``suites.tta_ddp.fit_keeping_ctrl_c``).

Ray Train V2's ``fit()`` installs a SIGINT handler of its own and never restores the
caller's. After a DDP arm, Ctrl-C then went to Ray Train's stale handler: one did nothing
(measured on the testbed, 2026-12-06), and by Ray Train's code the third exits the bench with
no JSON (as far as its log tells, how a 58-minute protocol run was lost).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from edgewise.suites import tta_ddp
from edgewise.suites.tta_ddp import fit_keeping_ctrl_c


class _Controller:
    """Stands for Ray Train's controller actor: counts the aborts asked of it."""

    def __init__(self) -> None:
        self.aborts = 0
        self.abort = self

    def remote(self) -> str:
        self.aborts += 1
        return "abort-ref"


class _Trainer:
    """A ``fit()`` that does what Ray Train V2's does to SIGINT, then ``outcome``."""

    def __init__(self, outcome: BaseException | None) -> None:
        self.outcome = outcome
        self.controller = _Controller()

    def fit(self) -> None:
        signal.signal(signal.SIGINT, lambda *_: sys.exit(0))  # Ray Train's, never undone
        if self.outcome is not None:
            raise self.outcome


def _foreign(*_: Any) -> None:
    """A caller's handler, to tell apart from Python's default."""


@pytest.mark.parametrize("outcome", [None, RuntimeError("a rank died")])
def test_the_callers_sigint_handler_is_back_after_fit(outcome: BaseException | None) -> None:
    previous = signal.signal(signal.SIGINT, _foreign)
    try:
        trainer = _Trainer(outcome)
        if outcome is None:
            fit_keeping_ctrl_c(trainer)
        else:
            with pytest.raises(RuntimeError, match="a rank died"):
                fit_keeping_ctrl_c(trainer)
        assert signal.getsignal(signal.SIGINT) is _foreign
        assert trainer.controller.aborts == 0  # only Ctrl-C aborts the run
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_in_fit_aborts_the_run_and_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    asked: list[tuple[object, float | None]] = []
    monkeypatch.setattr(ray, "get", lambda ref, timeout=None: asked.append((ref, timeout)))
    previous = signal.signal(signal.SIGINT, _foreign)
    try:
        trainer = _Trainer(KeyboardInterrupt())
        with pytest.raises(KeyboardInterrupt):
            fit_keeping_ctrl_c(trainer)
        assert trainer.controller.aborts == 1
        assert asked == [("abort-ref", tta_ddp.ABORT_S)]
        assert signal.getsignal(signal.SIGINT) is _foreign
    finally:
        signal.signal(signal.SIGINT, previous)


def test_off_the_main_thread_fit_runs_and_no_handler_is_touched() -> None:
    """A fit called from a thread of a service: nothing to restore, and no ValueError from
    setting a handler off the main thread."""
    import threading

    class Plain:
        ran = False

        def fit(self) -> None:
            self.ran = True

    trainer, errors = Plain(), []

    def run() -> None:
        try:
            fit_keeping_ctrl_c(trainer)
        except Exception as exc:  # the test reports whatever escaped
            errors.append(exc)

    before = signal.getsignal(signal.SIGINT)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join(10)
    assert trainer.ran and errors == []
    assert signal.getsignal(signal.SIGINT) is before


def test_the_trainer_keeps_its_controller_instead_of_a_handler() -> None:
    """The override names a method Ray Train's trainer has at the pinned version: were it
    renamed, Ray's handler would be back (the restore above would still hold)."""
    from ray.train.torch import TorchTrainer

    assert hasattr(TorchTrainer, "_register_sigint_handler")
    cls = tta_ddp._trainer_class()
    trainer = cls.__new__(cls)
    before = signal.getsignal(signal.SIGINT)
    trainer._register_sigint_handler("the controller")
    assert trainer.controller == "the controller"
    assert signal.getsignal(signal.SIGINT) is before


_SCRIPT = """
import signal, sys, time
# a child of a runner that ignores SIGINT (a script's background job, as `make test` may be)
# inherits the ignoring; Ctrl-C's KeyboardInterrupt is what this child is here to show
signal.signal(signal.SIGINT, signal.default_int_handler)
from pathlib import Path
import ray
from ray.train import RunConfig, ScalingConfig
from edgewise.suites.tta_ddp import _trainer_class, fit_keeping_ctrl_c

started = Path(sys.argv[1])

def loop() -> None:
    started.write_text("training")
    time.sleep(600)

ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
trainer = _trainer_class()(loop, scaling_config=ScalingConfig(num_workers=1),
                           run_config=RunConfig(storage_path=sys.argv[2], name="ctrl-c"))
try:
    fit_keeping_ctrl_c(trainer)
except KeyboardInterrupt:
    print("interrupted", signal.getsignal(signal.SIGINT) is signal.default_int_handler,
          flush=True)
    sys.exit(130)
print("fit returned", flush=True)
"""


@pytest.mark.ray
@pytest.mark.system
@pytest.mark.slow
def test_a_real_ctrl_c_stops_a_real_ray_train_run(tmp_path: Path) -> None:
    """A Ray instance and a Ray Train run of their own, in a child; SIGINT once the
    run's worker trains: the child sees KeyboardInterrupt with its own handler back."""
    started = tmp_path / "started"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    child = subprocess.Popen([sys.executable, "-c", _SCRIPT, str(started), str(tmp_path)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env)
    try:
        deadline = time.monotonic() + 240
        while not started.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert started.exists(), child.communicate(timeout=30)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err[-2000:]
    assert out.strip() == "interrupted True"
