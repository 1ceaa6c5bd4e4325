"""The manager's HTTP API: FastAPI app, bearer-token auth and the job backend it drives."""

from edgewise.runtime.jobs import JobBackend, JobStatus, TrainJobSpec
from edgewise.service.app import create_app, get_backend, serve
from edgewise.service.auth import load_or_create_token
from edgewise.service.backend import InMemoryBackend

__all__ = [
    "InMemoryBackend",
    "JobBackend",
    "JobStatus",
    "TrainJobSpec",
    "create_app",
    "get_backend",
    "load_or_create_token",
    "serve",
]
