"""The Deep-Edge Manager's endpoints (§IV-B): Solver, Launcher, Resource Monitor, Profiler."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends, HTTPException, status
from fastapi import Path as PathParam

from edgewise.errors import EdgewiseError
from edgewise.jobs import (
    ACTIVE_STATES,
    JOB_ID_PATTERN,
    ApiContext,
    JobBackend,
    JobView,
    Limiter,
    ProblemApi,
    get_backend,
    run_inline,
)
from edgewise.perf.schema import PerfModel
from edgewise.update.api_jobs import UPDATE_KIND
from edgewise.update.api_schemas import (
    NAME_PATTERN,
    LaunchRequest,
    MonitorView,
    ProfileRequest,
    ProfileStatus,
    SolveRequest,
    SolveResponse,
    TrainJobSpec,
)
from edgewise.update.models import load_models
from edgewise.update.policies import get_policy
from edgewise.update.problem import AppLimit, UpdateProblem, WorkerState

__all__ = ["API", "ProfileRegistry", "load_models", "monitor_view", "solve", "update_router"]

MAX_KEPT_PROFILES = 32

_log = logging.getLogger(__name__)

Backend = Annotated[JobBackend, Depends(get_backend)]
JobId = Annotated[str, PathParam(pattern=JOB_ID_PATTERN, description="a job id")]
ProfileId = Annotated[str, PathParam(pattern=NAME_PATTERN, description="a profile run id")]


def _problem(request: SolveRequest, models: dict[str, PerfModel]) -> UpdateProblem:
    """The request as Algorithm 1's inputs (UpdateProblem checks the batch bounds)."""
    workers = tuple(
        WorkerState(
            w.device,
            w.device_type,
            w.state.as_tuple(),
            tuple(
                AppLimit(
                    a.name,
                    a.kind,
                    a.deadline_ms if a.threshold_ms is None else a.threshold_ms,
                    a.deadline_ms,
                )
                for a in w.apps
            ),
        )
        for w in request.workers
    )
    return UpdateProblem(
        workers,
        request.ps_state.as_tuple(),
        request.n_samples,
        models,
        b_min=request.b_min,
        b_max=request.b_max,
        epsilon=request.epsilon,
        tau=request.tau,
        user_batch=request.user_batch,
        noise_scale=request.noise_scale,
    )


def solve(request: SolveRequest, models_dir: Path) -> SolveResponse:
    """The Solver: the request's policy on its problem; InfeasibleError/ConfigError pass up."""
    policy = get_policy(request.policy)
    models = load_models(models_dir, request.models, (w.device_type for w in request.workers))
    problem = _problem(request, models)
    started = time.perf_counter()
    plan = policy(problem, np.random.default_rng(request.seed))
    elapsed = time.perf_counter() - started
    return SolveResponse(
        shards=dict(plan.shards),
        batch_sizes=dict(plan.batch_sizes),
        workers=list(plan.workers),
        predicted_epoch_s=plan.predicted_epoch_s,
        predicted_exec_ms=dict(plan.predicted_exec_ms),
        policy=plan.policy,
        iterations=plan.iterations,
        solver_seconds=elapsed,
    )


def _job_spec(request: LaunchRequest) -> TrainJobSpec:
    """The Launcher's DL arguments as a job spec; the workers are the devices with a shard."""
    return TrainJobSpec(
        mode=request.mode,
        wire_dtype=request.wire_dtype,
        ps_shards=request.ps_shards,
        evaluation=request.evaluation,
        epochs=request.epochs,
        workers=list(request.shards),
        shards=dict(request.shards),
        batch_sizes=None if request.batch_sizes is None else dict(request.batch_sizes),
        learning_rate=request.learning_rate,
        lr_reference_batch=request.lr_reference_batch,
        seed=request.seed,
        target_accuracy=request.target_accuracy,
        workload=request.workload,
    )


def monitor_view(backend: JobBackend) -> MonitorView:
    """The Resource Monitor's view: the strike ledger, live metrics, unfinished updates."""
    counts, limit = backend.strikes()
    return MonitorView(
        strikes=counts,
        struck_out=sorted(d for d, n in counts.items() if n >= limit),
        strike_limit=limit,
        metrics=backend.device_metrics(),
        active_jobs=[j.id for j in backend.jobs("update") if j.state in ACTIVE_STATES],
    )


def _job_or_404(backend: JobBackend, job_id: str) -> JobView:
    found = backend.job(job_id)
    if found is None or found.kind != "update":
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no update task {job_id!r}")
    return found


class ProfileRegistry:
    """Profile runs of this server, one at a time, each in a daemon thread.

    Parameters
    ----------
    state_dir
        Profiles are written to ``state_dir/profiles/<name>.csv`` (resumed if present).
    max_kept
        Finished runs remembered for status queries; the oldest are forgotten first.
    """

    def __init__(self, state_dir: Path, *, max_kept: int = MAX_KEPT_PROFILES) -> None:
        self._dir = state_dir / "profiles"
        self._max_kept = max_kept
        self._lock = threading.Lock()
        self._runs: dict[str, ProfileStatus] = {}

    def start(self, request: ProfileRequest) -> ProfileStatus | None:
        """Start a run and return its status; None if one is already running."""
        with self._lock:
            if any(r.state == "running" for r in self._runs.values()):
                return None
            self._forget_old()
            run = ProfileStatus(
                profile_id=uuid.uuid4().hex[:12], name=request.name, state="running"
            )
            self._runs[run.profile_id] = run
        thread = threading.Thread(
            target=self._run,
            args=(run.profile_id, request),
            name=f"edgewise-profile-{run.profile_id}",
            daemon=True,
        )
        thread.start()
        return run

    def get(self, profile_id: str) -> ProfileStatus | None:
        with self._lock:
            return self._runs.get(profile_id)

    def _forget_old(self) -> None:
        while len(self._runs) >= self._max_kept:
            del self._runs[next(iter(self._runs))]  # insertion order: oldest first

    def _update(self, profile_id: str, **changes: Any) -> None:
        with self._lock:
            self._runs[profile_id] = self._runs[profile_id].model_copy(update=changes)

    def _run(self, profile_id: str, request: ProfileRequest) -> None:
        """The run's thread: profile with the quick grid, then record how it ended."""
        from edgewise.perf import profiler  # torch: imported only when a profile runs

        def progress(done: int, total: int, key: str) -> None:
            self._update(profile_id, done=done, total=total, current=key)

        try:
            result = profiler.profile(
                self._dir / f"{request.name}.csv",
                profiler.quick_config(request.device_type),
                progress,
            )
        except Exception as exc:  # any failure ends the run, never the server
            if not isinstance(exc, EdgewiseError):
                _log.exception("profile %s failed", profile_id)
            self._update(profile_id, state="failed", errors=[str(exc) or type(exc).__name__])
        else:
            self._update(profile_id, state="succeeded", rows=len(result.samples))


def _add_solver(router: APIRouter, models_dir: Path, limited: Limiter) -> None:
    @router.post("/solve")
    def solve_route(request: SolveRequest) -> SolveResponse:
        """The Solver: workers, shards and batch sizes for a model update; 422 if infeasible,
        413 past the planning limits."""
        return limited(solve, request, models_dir)


def _add_launcher_and_monitor(router: APIRouter) -> None:
    @router.post("/launch", status_code=status.HTTP_201_CREATED)
    def launch(request: LaunchRequest, backend: Backend) -> JobView:
        """The Launcher: queue the model update a plan describes (an ``update`` job)."""
        return backend.submit("update", _job_spec(request).model_dump(mode="json"))

    @router.get("/tasks/{job_id}")
    def task(job_id: JobId, backend: Backend) -> JobView:
        """The Launcher's task info: an update job; 404 if unknown."""
        return _job_or_404(backend, job_id)

    @router.get("/monitor")
    def monitor(backend: Backend) -> MonitorView:
        """The Resource Monitor: strikes, struck-out devices, device metrics, active jobs."""
        return monitor_view(backend)


def _add_profiler(router: APIRouter, registry: ProfileRegistry) -> None:
    @router.post("/profile", status_code=status.HTTP_202_ACCEPTED)
    def start_profile(request: ProfileRequest) -> ProfileStatus:
        """The Profiler: start a quick profile run; 409 while another one runs."""
        run = registry.start(request)
        if run is None:
            raise HTTPException(status.HTTP_409_CONFLICT, detail="a profile run is in progress")
        return run

    @router.get("/profile/{profile_id}")
    def profile_status(profile_id: ProfileId) -> ProfileStatus:
        """A profile run's progress, state, rows and errors; 404 if unknown."""
        run = registry.get(profile_id)
        if run is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no profile {profile_id!r}")
        return run


def update_router(models_dir: Path, state_dir: Path, limited: Limiter = run_inline) -> APIRouter:
    """The Deep-Edge Manager's router. ``models_dir`` holds named learned-model directories
    for ``/update/solve`` (run through ``limited``); profiles go to ``state_dir/profiles``."""
    router = APIRouter(prefix="/update", tags=["deep-edge"])
    _add_solver(router, models_dir, limited)
    _add_launcher_and_monitor(router)
    _add_profiler(router, ProfileRegistry(state_dir))
    return router


def _router(context: ApiContext) -> APIRouter:
    return update_router(context.models_dir, context.state_dir, context.limited)


API = ProblemApi("update", _router, kinds=(UPDATE_KIND,))
"""Deep-Edge's offer to the manager (entry point ``edgewise.problems``)."""
