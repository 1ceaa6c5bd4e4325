"""The manager's HTTP API (FastAPI): cluster state, live device metrics and training jobs."""

from __future__ import annotations

import ipaddress
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import uvicorn
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request, status
from fastapi import Path as PathParam
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from edgewise.errors import ConfigError, EdgewiseError
from edgewise.runtime.jobs import (
    JOB_ID_PATTERN,
    ApiContext,
    JobBackend,
    JobStatus,
    ProblemApi,
    TrainJobSpec,
    get_backend,
)
from edgewise.service.auth import bearer_dependency, load_or_create_token, token_source
from edgewise.service.problems import discover_problems

__all__ = ["API_PREFIX", "BodySizeLimit", "check_bind", "create_app", "get_backend", "make_server",
           "serve"]

API_PREFIX = "/api/v1"
DEFAULT_MAX_BODY_BYTES = 64 * 1024

JobId = Annotated[str, PathParam(pattern=JOB_ID_PATTERN, description="a job id")]


class BodySizeLimit:
    """Pure ASGI middleware: 413 for a request body over ``max_bytes``.

    Checks Content-Length up front, then counts the bytes actually received (a chunked
    request has no Content-Length), buffering at most ``max_bytes`` before the app runs.
    """

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is None:
            await _reject(send, status.HTTP_400_BAD_REQUEST, "invalid Content-Length header")
            return
        if declared > self.max_bytes:
            await _reject(send, 413, self._too_large())
            return
        body = await self._read_body(receive)
        if body is None:
            await _reject(send, 413, self._too_large())
            return
        await self.app(scope, _replay(body, receive), send)

    def _too_large(self) -> str:
        return f"request body larger than {self.max_bytes} bytes"

    async def _read_body(self, receive: Receive) -> bytes | None:
        """The whole body, or None as soon as it exceeds the limit."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # client went away; let the app see it
                return b"".join(chunks)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _content_length(scope: Scope) -> int | None:
    """The declared body length, 0 if absent, None if malformed."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return 0


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive callable that yields the buffered body once, then defers to ``receive``."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _reject(send: Send, code: int, detail: str) -> None:
    payload = json.dumps({"detail": detail}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": code, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


Backend = Annotated[JobBackend, Depends(get_backend)]
router = APIRouter()


@router.get("/health", tags=["meta"])
def health() -> dict[str, str]:
    """Liveness probe (authenticated like everything else)."""
    return {"status": "ok"}


@router.get("/cluster", tags=["cluster"])
def cluster(backend: Backend) -> dict[str, Any]:
    """The cluster: devices with type, memory, speed and roles; links; sites."""
    return backend.cluster_summary()


@router.get("/devices/metrics", tags=["cluster"])
def device_metrics(backend: Backend) -> dict[str, dict[str, float]]:
    """Each device's latest metrics, with their age in seconds."""
    return backend.device_metrics()


@router.get("/jobs", tags=["jobs"])
def list_jobs(backend: Backend) -> list[JobStatus]:
    """Every job, oldest first."""
    return backend.list_jobs()


@router.post("/jobs", status_code=status.HTTP_201_CREATED, tags=["jobs"])
def start_job(spec: TrainJobSpec, backend: Backend) -> JobStatus:
    """Start a training job; 422 if the spec is invalid or names unknown devices."""
    job_id = backend.start_job(spec)
    return _status_or_404(backend, job_id)


@router.get("/jobs/{job_id}", tags=["jobs"])
def job_status(job_id: JobId, backend: Backend) -> JobStatus:
    """One job's status; 404 if there is no such job."""
    return _status_or_404(backend, job_id)


@router.post("/jobs/{job_id}/stop", tags=["jobs"])
def stop_job(job_id: JobId, backend: Backend) -> JobStatus:
    """Stop a job (a no-op for a finished one) and return its status; 404 if unknown."""
    if not backend.stop_job(job_id):
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no job {job_id!r}")
    return _status_or_404(backend, job_id)


def _status_or_404(backend: JobBackend, job_id: str) -> JobStatus:
    found = backend.job_status(job_id)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"no job {job_id!r}")
    return found


async def _edgewise_error(request: Request, exc: Exception) -> JSONResponse:
    """A user-caused error (EdgewiseError) is the client's fault: 422 with its message."""
    return JSONResponse({"detail": str(exc)}, status_code=422)


def _add_openapi_routes(app: FastAPI) -> None:
    """Serve the OpenAPI document and Swagger UI behind the same auth as the API."""

    @app.get("/openapi.json", include_in_schema=False)
    def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} docs")


def create_app(
    backend: JobBackend,
    token: str,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    routers: Sequence[APIRouter] = (),
    problems: Sequence[ProblemApi] | None = None,
    context: ApiContext | None = None,
) -> FastAPI:
    """The API app; every route, OpenAPI and docs included, requires the bearer ``token``.

    Given a ``context``, the routers of ``problems`` (default: every problem installed,
    found by :func:`discover_problems`) are built with it and mounted under ``/api/v1``,
    as are the extra ``routers``, with the same auth; their routes reach the backend
    through the ``get_backend`` dependency.
    """
    if max_body_bytes < 0:
        raise ConfigError("must be >= 0", field="max_body_bytes")
    app = FastAPI(
        title="edgewise manager API",
        version="1",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        dependencies=[Depends(bearer_dependency(token))],
    )
    app.state.backend = backend
    app.add_exception_handler(EdgewiseError, _edgewise_error)
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)
    built = [] if context is None else [
        p.router(context) for p in (discover_problems() if problems is None else problems)]
    for extra in (router, *built, *routers):
        app.include_router(extra, prefix=API_PREFIX)
    _add_openapi_routes(app)
    return app


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, port: int, allow_remote: bool) -> None:
    """ConfigError unless ``host`` is a loopback address (or ``allow_remote``) and ``port``
    a TCP port: the manager is not exposed by accident."""
    if not _is_loopback(host) and not allow_remote:
        raise ConfigError(
            f"{host!r} is not a loopback address; pass --allow-remote (allow_remote=True) to "
            "expose the API", field="host")
    if not 0 <= port <= 65535:
        raise ConfigError(f"{port} is not a TCP port", field="port")


def make_server(
    backend: JobBackend,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token_path: Path | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    allow_remote: bool = False,
    routers: Sequence[APIRouter] = (),
    context: ApiContext | None = None,
) -> uvicorn.Server:
    """A configured uvicorn server for the API (plus ``routers``, as in :func:`create_app`);
    ConfigError for a host it must not bind."""
    check_bind(host, port, allow_remote)
    token = load_or_create_token(token_path)
    app = create_app(backend, token, max_body_bytes=max_body_bytes, routers=routers,
                     context=context)
    config = uvicorn.Config(
        app, host=host, port=port, server_header=False, proxy_headers=False, log_level="info"
    )
    return uvicorn.Server(config)


def serve(
    backend: JobBackend,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token_path: Path | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    allow_remote: bool = False,
    routers: Sequence[APIRouter] = (),
    context: ApiContext | None = None,
) -> None:
    """Run the API until interrupted; prints where the token is kept, never the token."""
    server = make_server(
        backend,
        host=host,
        port=port,
        token_path=token_path,
        max_body_bytes=max_body_bytes,
        allow_remote=allow_remote,
        routers=routers,
        context=context,
    )
    print(
        f"edgewise: API on http://{host}:{port}{API_PREFIX} "
        f"(bearer token from {token_source(token_path)})",
        file=sys.stderr,
    )
    server.run()
