"""The manager's HTTP API: FastAPI app, bearer-token auth and the job backend it drives."""

from edgewise.service.app import create_app, get_backend, serve
from edgewise.service.auth import load_or_create_token
from edgewise.service.backend import InMemoryBackend, JobBackend
from edgewise.service.schemas import JobStatus, TrainJobSpec

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
