"""The manager: one job model for every problem's kind of work, a SQLite job store, the
HTTP API with bearer-token auth, Prometheus metrics and the web dashboard."""

from edgewise.service.app import create_app, make_server
from edgewise.service.auth import load_or_create_token
from edgewise.service.manager import JobManager
from edgewise.service.store import Store

__all__ = ["JobManager", "Store", "create_app", "load_or_create_token", "make_server"]
