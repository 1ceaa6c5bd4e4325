"""The manager's HTTP app (FastAPI): its own routes, every problem's router, Prometheus
metrics and the dashboard, behind the token gate; and the hardened uvicorn server."""

from __future__ import annotations

import ipaddress
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from edgewise.errors import ConfigError
from edgewise.jobs import ApiContext, Limiter, ProblemApi, run_inline
from edgewise.service.auth import bearer_dependency
from edgewise.service.connections import ConnectionLimits
from edgewise.service.dashboard import PUBLIC_PATHS, PUBLIC_PREFIX, add_dashboard
from edgewise.service.errors import ERROR_RESPONSES, add_error_handlers, index_routes
from edgewise.service.guards import (
    DEFAULT_MAX_BODY_BYTES,
    BodyGuard,
    ConcurrencyGuard,
    RateLimitFilter,
    TokenGate,
    guarded_protocol,
    token_check,
)
from edgewise.service.manager import JobManager
from edgewise.service.routes import core_router
from edgewise.service.telemetry import CONTENT_TYPE, Telemetry

__all__ = ["API_PREFIX", "Limits", "check_bind", "create_app", "make_server"]

API_PREFIX = "/api/v1"
METRICS_PATH = "/metrics"


@dataclass(frozen=True, slots=True)
class Limits:
    """How much the server takes from any one client, and from all of them."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    body_timeout_s: float = 10.0
    header_timeout_s: float = 10.0
    first_head_timeout_s: float = 5.0
    keep_alive_s: float = 5.0
    max_connections: int = 512
    max_unproven: int = 128
    max_unproven_per_address: int = 32
    max_concurrency: int = 256

    def connections(self) -> ConnectionLimits:
        """The limits the HTTP protocol applies to connections."""
        return ConnectionLimits(self.max_connections, self.max_unproven,
                                self.max_unproven_per_address, self.first_head_timeout_s,
                                self.header_timeout_s)


def _add_meta_routes(app: FastAPI, telemetry: Telemetry) -> None:
    """OpenAPI and Swagger UI (behind the token), and ``/metrics`` (token or scrape token)."""

    @app.get("/openapi.json", include_in_schema=False)
    def openapi() -> JSONResponse:
        return JSONResponse(exact_integers(app.openapi()))

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} docs")

    async def metrics(request: Request) -> Response:
        # a fresh body straight from the loop; a stale one rendered in the thread pool
        body = telemetry.fresh() or await run_in_threadpool(telemetry.render)
        return Response(body, media_type=CONTENT_TYPE)

    app.add_route(METRICS_PATH, metrics, methods=["GET"], include_in_schema=False)


BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def exact_integers(doc: Any, where: str = "") -> Any:
    """``doc`` (an OpenAPI document) with the bounds of integer schemas as JSON integers:
    FastAPI's OpenAPI model holds every bound as a float, so that ``le=2**31 - 1`` was
    published as ``2147483647.0`` and ``2**63 - 1`` as ``9.223372036854776e+18``, which is
    2**63 and so admits a seed the server refuses. A bound that a double cannot hold
    exactly (beyond 2**53) is a ValueError naming where it is: such a bound must change."""
    if isinstance(doc, list):
        return [exact_integers(v, f"{where}[{k}]") for k, v in enumerate(doc)]
    if not isinstance(doc, dict):
        return doc
    out = {k: exact_integers(v, f"{where}/{k}") for k, v in doc.items()}
    if out.get("type") == "integer":
        for key in BOUNDS:
            value = out.get(key)
            if isinstance(value, float):
                if not value.is_integer() or abs(value) > 2**53:
                    raise ValueError(f"{where}/{key}: {value!r} is not an exact integer bound")
                out[key] = int(value)
    return out


def _query_names(dependant: Dependant) -> set[str]:
    """The query parameters a route and its dependencies take."""
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


async def known_query_only(request: Request) -> None:
    """A 422 for a query parameter the route does not take: a typo (``?limt=5``) is not
    silently ignored, and the OpenAPI document's parameter lists are the whole contract.
    (``async``: FastAPI runs a plain ``def`` dependency in its thread pool, and the thread
    hop cost more CPU per request than the check itself.)"""
    dependant = getattr(request.scope.get("route"), "dependant", None)
    if dependant is None:
        return
    known = _query_names(dependant)
    extra = [k for k in dict.fromkeys(request.query_params) if k not in known]
    if extra:
        raise RequestValidationError([{"loc": ("query", k), "msg": "unknown query parameter",
                                       "type": "extra_forbidden"} for k in extra])


def create_app(
    manager: JobManager,
    token: str,
    *,
    scrape_token: str | None = None,
    limiter: Limiter = run_inline,
    limits: Limits = Limits(),
    problems: Sequence[ProblemApi] | None = None,
    routers: Sequence[APIRouter] = (),
    models_dir: Path | None = None,
) -> FastAPI:
    """The manager's app. Every route needs the bearer ``token`` except the dashboard's
    files (``/``, ``/ui/...``) and ``/metrics``, which also takes ``scrape_token``. The
    routers of ``problems`` (default: every problem installed) are built with an
    ApiContext holding ``limiter`` and the manager's live jobs, and mounted under
    ``/api/v1`` with the extra ``routers``."""
    from edgewise.service.problems import discover_problems

    if limits.max_body_bytes < 0:
        raise ConfigError("must be >= 0", field="max_body_bytes")
    app = FastAPI(title="edgewise manager API", version="1", docs_url=None, redoc_url=None,
                  openapi_url=None, responses=ERROR_RESPONSES)
    app.state.backend = manager
    add_error_handlers(app)
    context = ApiContext(state_dir=manager.state_dir,
                         models_dir=models_dir or manager.state_dir / "models",
                         limited=limiter, live=manager.live, cluster=manager.cluster)
    offered = discover_problems() if problems is None else problems
    # the bearer dependency declares the scheme in the OpenAPI document
    auth = [Depends(bearer_dependency(token)), Depends(known_query_only)]
    included = [core_router(list(manager.kinds.values())),
                *(p.router(context) for p in offered), *routers]
    for extra in included:
        app.include_router(extra, prefix=API_PREFIX, dependencies=auth)
    _add_meta_routes(app, Telemetry(manager))
    add_dashboard(app)
    index_routes(app, [(API_PREFIX, r) for r in included])
    app.add_middleware(BodyGuard, max_bytes=limits.max_body_bytes,
                       timeout_s=limits.body_timeout_s)
    app.add_middleware(ConcurrencyGuard, limit=limits.max_concurrency)
    app.state.carries_token = token_check(token, scrape_token)
    app.add_middleware(TokenGate, token=token, scrape_token=scrape_token,
                       public=PUBLIC_PATHS, public_prefixes=(PUBLIC_PREFIX,),
                       scrape_paths=(METRICS_PATH,))
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


def make_server(app: FastAPI, *, host: str = "127.0.0.1", port: int = 8765,
                allow_remote: bool = False, limits: Limits = Limits(),
                log_level: str = "info") -> uvicorn.Server:
    """A uvicorn server for ``app`` with header and body deadlines, a connection cap with
    room kept for connections that carry the token, and rate-limited logs (the app of
    :func:`create_app` adds the concurrency limit, 503 beyond it); ConfigError for a host
    it must not bind."""
    check_bind(host, port, allow_remote)
    proves = getattr(app.state, "carries_token", lambda headers: False)
    config = uvicorn.Config(
        app, host=host, port=port, server_header=False, proxy_headers=False,
        log_level=log_level, timeout_keep_alive=int(max(1, limits.keep_alive_s)),
        backlog=1024, loop="auto",
        http=guarded_protocol(limits.connections(), proves),  # type: ignore[arg-type]
    )
    for name in ("uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).addFilter(RateLimitFilter())
    return uvicorn.Server(config)


def announce(host: str, port: int, token_source: str) -> None:
    """Say where the manager listens and where its token comes from (never the token)."""
    print(f"edgewise: manager on http://{host}:{port}/ (API {API_PREFIX}, bearer token from "
          f"{token_source})", file=sys.stderr)
