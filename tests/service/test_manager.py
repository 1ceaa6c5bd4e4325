"""The job manager's life cycle, stops and recovery, with a small kind of job that counts
steps (checkpointing each one to its work directory) instead of training."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic import BaseModel, ConfigDict, Field

from edgewise.cluster.model import Cluster
from edgewise.errors import ConfigError, InfeasibleError
from edgewise.jobs import JobContext, JobKind, Planned
from edgewise.service import JobManager, Store

RUNTIME: Any = object()  # a stand-in: these kinds never touch Ray


class CountSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    steps: int = Field(default=3, ge=1, le=1000)
    step_s: float = Field(default=0.01, ge=0, le=5)
    fail_at: int | None = None


def _plan(spec: CountSpec, ctx: JobContext) -> Planned:
    return Planned({"steps": spec.steps, "tables": []}, spec.steps)


def _execute(spec: CountSpec, planned: Planned, ctx: JobContext) -> Mapping[str, Any]:
    """Count to ``steps``, one checkpoint file per step; resume from the last one."""
    mark = ctx.work_dir / "done"
    done = int(mark.read_text()) if ctx.resumed and mark.exists() else 0
    if ctx.resumed:
        ctx.event("resumed", f"from step {done}")
    for step in range(done + 1, spec.steps + 1):
        ctx.check_stop()
        if step == spec.fail_at:
            raise InfeasibleError(f"no plan fits step {step}")
        time.sleep(spec.step_s)
        ctx.metric("epoch", step, step=step)
        ctx.progress(step / spec.steps, epoch=step)
        mark.write_text(str(step))
    return {"epoch": spec.steps}


def _check(spec: CountSpec, cluster: Cluster) -> None:
    if spec.steps == 13:
        raise ConfigError("13 steps is unlucky", field="steps")


def _kinds() -> dict[str, JobKind]:
    common: dict[str, Any] = {"spec": CountSpec, "example": lambda c: {"steps": 2},
                              "plan": _plan, "execute": _execute, "check": _check}
    return {"count": JobKind(name="count", resumable=True, **common),
            "once": JobKind(name="once", **common)}


@pytest.fixture
def make(cluster: Cluster, tmp_path: Path) -> Iterator[Callable[..., JobManager]]:
    made: list[JobManager] = []

    def factory(**options: Any) -> JobManager:
        manager = JobManager(Store(tmp_path / "manager.db"), _kinds(), cluster,
                             state_dir=tmp_path, runtime=cast(Any, options.pop("runtime", RUNTIME)),
                             **options)
        made.append(manager)
        return manager

    yield factory
    for manager in made:
        manager.close()


def _wait(manager: JobManager, job_id: str, states: set[str], timeout_s: float = 120.0) -> str:
    """Poll until the job is in one of ``states``: a generous bound (it returns at once
    when the state comes), since a loaded host slows the job threads and their writes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = manager.job(job_id)
        assert found is not None
        if found.state in states:
            return found.state
        time.sleep(0.02)
    pytest.fail(f"{job_id} not in {states} within {timeout_s} s")


def test_a_job_runs_its_life_cycle_and_keeps_its_history(make: Callable[..., JobManager]) -> None:
    manager = make()
    job = manager.submit("count", {"steps": 3})
    assert job.state in ("pending", "planning", "running", "succeeded") and job.kind == "count"
    assert _wait(manager, job.id, {"succeeded"}) == "succeeded"
    done = manager.job(job.id)
    assert done is not None and done.progress == 1.0 and done.summary["epoch"] == 3
    assert done.attempts == 1 and done.started_at is not None and done.finished_at is not None
    states = [e["message"] for e in manager.store.events(job.id) if e["kind"] == "state"]
    assert states == ["planning", "running", "succeeded"]
    assert manager.plan(job.id) == {"steps": 3, "tables": []}
    assert [r[1] for r in manager.store.metrics(job.id)["epoch"]] == [1.0, 2.0, 3.0]


def test_bad_specs_and_unknown_kinds_are_refused_before_storing(
        make: Callable[..., JobManager]) -> None:
    manager = make()
    with pytest.raises(ConfigError, match="kind"):
        manager.submit("nope", {})
    with pytest.raises(ConfigError, match="steps"):
        manager.submit("count", {"steps": 0})
    with pytest.raises(ConfigError, match="unlucky"):
        manager.submit("count", {"steps": 13})
    assert manager.jobs() == []


def test_a_failing_job_ends_failed_with_its_reason(make: Callable[..., JobManager]) -> None:
    manager = make()
    job = manager.submit("count", {"steps": 5, "fail_at": 2})
    assert _wait(manager, job.id, {"failed"}) == "failed"
    found = manager.job(job.id)
    assert found is not None and found.reason == "no plan fits step 2"


def test_stop_a_running_and_a_pending_job(make: Callable[..., JobManager]) -> None:
    manager = make(max_running=1)
    running = manager.submit("count", {"steps": 1000, "step_s": 0.05})  # 50 s unless stopped
    waiting = manager.submit("count", {"steps": 2})
    _wait(manager, running.id, {"running"})
    assert manager.job(waiting.id).state == "pending"  # type: ignore[union-attr]
    stopped = manager.stop(waiting.id)
    assert stopped is not None and stopped.state == "stopped"
    # stop waits up to 2 s for the job to unwind, which a loaded host may overrun: the job
    # is then still running, and ends stopped at its next step (not after its 50 s)
    assert manager.stop(running.id) is not None
    assert _wait(manager, running.id, {"stopped", "succeeded", "failed"}) == "stopped"
    assert manager.stop("job-9999") is None
    assert manager.stop(running.id).state == "stopped"  # type: ignore[union-attr]


def test_at_most_max_running_jobs_run_at_once(make: Callable[..., JobManager]) -> None:
    manager = make(max_running=2)
    jobs = [manager.submit("count", {"steps": 20, "step_s": 0.02}) for _ in range(5)]
    seen = 0
    while not all(manager.job(j.id).state == "succeeded" for j in jobs):  # type: ignore[union-attr]
        active = [j for j in manager.jobs() if j.state in ("planning", "running")]
        seen = max(seen, len(active))
        assert len(active) <= 2
        time.sleep(0.005)
    assert seen == 2


def test_a_dry_manager_stores_jobs_but_runs_none(make: Callable[..., JobManager]) -> None:
    manager = make(runtime=None)
    job = manager.submit("count", {"steps": 1})
    time.sleep(0.1)
    assert manager.job(job.id).state == "pending"  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="dry run"):
        manager.inject_fault("stall", "tx2", None, 1.0)


def _epoch(manager: JobManager, job_id: str) -> int:
    found = manager.job(job_id)
    assert found is not None
    return int(found.summary.get("epoch") or 0)


def _crash(manager: JobManager) -> None:
    """What ``kill -9`` leaves: the threads gone, the store as it was, nothing new started."""
    with manager._lock:
        manager._closed = True
        running = list(manager._running.values())
    for job in running:
        job.shutdown = True  # its end is not recorded, as after a crash
        job.context.stop_requested.set()
    for job in running:
        job.thread.join()


def test_after_a_restart_resumable_jobs_resume_and_the_others_are_interrupted(
        make: Callable[..., JobManager]) -> None:
    first = make(max_running=2)
    count = first.submit("count", {"steps": 40, "step_s": 0.02})
    once = first.submit("once", {"steps": 1000, "step_s": 0.02})  # still running at the crash
    waiting = first.submit("once", {"steps": 2})  # never starts before the "crash"
    deadline = time.monotonic() + 120  # generous: it ends the wait as soon as both ran
    while _epoch(first, count.id) < 5 or _epoch(first, once.id) < 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    _crash(first)
    assert [first.job(j.id).state for j in (count, once, waiting)] == [  # type: ignore[union-attr]
        "running", "running", "pending"]
    second = make(max_running=3)
    second.recover()
    assert _wait(second, count.id, {"succeeded"}) == "succeeded"
    assert _wait(second, waiting.id, {"succeeded"}) == "succeeded"
    interrupted = second.job(once.id)
    assert interrupted is not None and interrupted.state == "interrupted"
    assert interrupted.reason is not None and "once jobs cannot resume" in interrupted.reason
    resumed = second.job(count.id)
    assert resumed is not None and resumed.attempts == 2
    kinds = [e["kind"] for e in second.store.events(count.id)]
    assert "resumed" in kinds
    steps = [r[1] for r in second.store.metrics(count.id)["epoch"]]
    assert steps == [float(s) for s in range(1, 41)]  # every step once: none lost or doubled


def test_close_leaves_resumable_jobs_to_the_next_manager(make: Callable[..., JobManager]) -> None:
    manager = make(max_running=2)
    # 50 s each unless stopped: both still run at the close, however slow the host
    count = manager.submit("count", {"steps": 1000, "step_s": 0.05})
    once = manager.submit("once", {"steps": 1000, "step_s": 0.05})
    _wait(manager, count.id, {"running"})
    _wait(manager, once.id, {"running"})
    manager.close("SIGTERM")
    assert manager.job(count.id).state == "running"  # type: ignore[union-attr]
    gone = manager.job(once.id)
    assert gone is not None and gone.state == "interrupted" and gone.reason == "SIGTERM"
    with pytest.raises(ConfigError, match="shutting down"):
        manager.submit("count", {})


def test_concurrent_submissions_and_stops_keep_the_store_consistent(
        make: Callable[..., JobManager]) -> None:
    manager = make(max_running=4)
    ids: list[str] = []
    lock = threading.Lock()

    def client() -> None:
        for _ in range(10):
            job = manager.submit("count", {"steps": 3, "step_s": 0.005})
            with lock:
                ids.append(job.id)
            manager.stop(job.id) if len(ids) % 3 == 0 else None

    threads = [threading.Thread(target=client) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for job_id in ids:
        _wait(manager, job_id, {"succeeded", "stopped"})
    assert len(set(ids)) == 60 == len(manager.jobs())
