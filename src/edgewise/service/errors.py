"""How the manager answers errors, always as JSON that its OpenAPI document declares: 422
as a list of problems (never echoing the rejected input), 413 for planning limits, 405
with every allowed method."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route, compile_path

from edgewise.errors import EdgewiseError
from edgewise.jobs import PlanningBusyError, PlanningLimitError

__all__ = ["ERROR_RESPONSES", "ErrorMessage", "ValidationProblem", "ValidationProblems",
           "add_error_handlers", "clean_text", "index_routes"]

_log = logging.getLogger(__name__)


class ErrorMessage(BaseModel):
    """An error with one message."""

    detail: str


class ValidationProblem(BaseModel):
    """One problem with a request: where (``loc``), what (``msg``), its ``type``."""

    loc: list[str | int]
    msg: str
    type: str


class ValidationProblems(BaseModel):
    """Every problem found with a request (422)."""

    detail: list[ValidationProblem]


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorMessage, "description": "malformed request (Content-Length)"},
    401: {"model": ErrorMessage, "description": "missing or invalid bearer token"},
    404: {"model": ErrorMessage, "description": "no such resource"},
    405: {"model": ErrorMessage, "description": "method not allowed (see Allow)"},
    408: {"model": ErrorMessage, "description": "the body did not arrive in time"},
    409: {"model": ErrorMessage, "description": "conflicts with the resource's state"},
    413: {"model": ErrorMessage, "description": "body or problem larger than a limit"},
    422: {"model": ValidationProblems, "description": "invalid request"},
    429: {"model": ErrorMessage, "description": "every planning slot and queue place is "
          "taken; try again after Retry-After seconds"},
    503: {"model": ErrorMessage, "description": "more requests at once than the server runs"},
}
"""Declared on every route: what any of them may answer besides success."""


def clean_text(text: object) -> str:
    """``text`` as a string that encodes to UTF-8 (lone surrogates escaped)."""
    return str(text).encode("utf-8", "backslashreplace").decode("utf-8")


def _loc(parts: Any) -> list[str | int]:
    return [p if isinstance(p, int) else clean_text(p) for p in parts]


def problems(loc: list[str | int], msg: str, kind: str = "value_error") -> dict[str, Any]:
    """A 422 body with one problem."""
    return {"detail": [{"loc": loc, "msg": clean_text(msg), "type": kind}]}


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 without the rejected input (which may be NaN, ±Infinity or a lone
    surrogate, none of which JSON can carry) and without context objects."""
    assert isinstance(exc, RequestValidationError)
    found = [{"loc": _loc(e.get("loc", ())), "msg": clean_text(e.get("msg", "")),
              "type": clean_text(e.get("type", "value_error"))} for e in exc.errors()]
    return JSONResponse({"detail": found}, status_code=422)


async def _edgewise_error(request: Request, exc: Exception) -> JSONResponse:
    """A user-caused error: 413 for a planning limit, 429 (with Retry-After) when planning
    is full, else 422 naming the field."""
    if isinstance(exc, PlanningBusyError):
        return JSONResponse({"detail": clean_text(exc)}, status_code=429,
                            headers={"Retry-After": str(exc.retry_after_s)})
    if isinstance(exc, PlanningLimitError):
        return JSONResponse({"detail": clean_text(exc)}, status_code=413)
    field = getattr(exc, "field", None)
    loc: list[str | int] = ["body", *str(field).split(".")] if field else ["body"]
    return JSONResponse(problems(loc, str(exc)), status_code=422)


def index_routes(app: FastAPI, routers: Sequence[tuple[str, APIRouter]]) -> None:
    """Remember which methods each path of ``app`` allows (its own routes and those of the
    ``(prefix, router)`` pairs it includes), for the Allow header of a 405."""
    index: list[tuple[re.Pattern[str], set[str]]] = []
    for prefix, router in routers:
        for route in router.routes:
            if isinstance(route, Route):
                index.append((compile_path(prefix + route.path)[0], set(route.methods or ())))
    for route in app.router.routes:
        if isinstance(route, Route):
            index.append((route.path_regex, set(route.methods or ())))
    app.state.allowed_methods = index


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route accepts at the request's path."""
    path = request.url.path
    allowed: set[str] = set()
    for regex, methods in getattr(request.app.state, "allowed_methods", []):
        if regex.match(path):
            allowed |= methods
    return sorted(allowed)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    """HTTP errors as JSON; a 422 with a string becomes the list form; a 405 lists every
    method the path allows."""
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(_allowed_methods(request))
    if exc.status_code == 422 and isinstance(exc.detail, str):
        return JSONResponse(problems(["body"], exc.detail), status_code=422, headers=headers)
    detail = exc.detail if isinstance(exc.detail, str) else clean_text(exc.detail)
    return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=headers)


def add_error_handlers(app: FastAPI) -> None:
    """Install the manager's error handlers on ``app``."""
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(EdgewiseError, _edgewise_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
