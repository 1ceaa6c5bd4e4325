"""The web dashboard: static files shipped in the package (no CDN, no build step), served
at ``/`` and ``/ui/``. The page holds no data: it asks the API with the token the user
types in, kept in the tab's session storage (never in a URL, so never in a log)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from starlette.requests import Request
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

__all__ = ["PUBLIC_PATHS", "PUBLIC_PREFIX", "STATIC_DIR", "add_dashboard"]

STATIC_DIR = Path(__file__).parent / "static"
PUBLIC_PATHS = ("/", "/favicon.ico")
PUBLIC_PREFIX = "/ui/"
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; "
                               "style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                               "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
                               "form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class _Static(StaticFiles):
    """Static files with the dashboard's security headers."""

    async def get_response(self, path: str, scope: dict) -> Response:  # type: ignore[type-arg, override]
        response = await super().get_response(path, scope)
        response.headers.update(SECURITY_HEADERS)
        return response


def add_dashboard(app: FastAPI) -> None:
    """Serve ``index.html`` at ``/`` and the other files under ``/ui/``."""

    def index(request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html",
                            headers=SECURITY_HEADERS)

    def favicon(request: Request) -> Response:
        return Response(status_code=204, headers=SECURITY_HEADERS)

    app.add_route("/", index, methods=["GET"], include_in_schema=False)
    app.add_route("/favicon.ico", favicon, methods=["GET"], include_in_schema=False)
    app.mount(PUBLIC_PREFIX.rstrip("/"), _Static(directory=STATIC_DIR), name="ui")
