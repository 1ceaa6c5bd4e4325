"""The API's bearer token: where it lives, how it is created, how requests prove it."""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated

from fastapi import Depends, HTTPException, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from edgewise.errors import ConfigError

__all__ = [
    "SCRAPE_TOKEN_ENV",
    "TOKEN_ENV",
    "TOKEN_FILE_ENV",
    "bearer_dependency",
    "load_or_create_token",
    "load_scrape_token",
    "token_path",
    "token_source",
]

TOKEN_ENV = "EDGEWISE_TOKEN"
TOKEN_FILE_ENV = "EDGEWISE_TOKEN_FILE"
_DEFAULT_FILE = Path("~/.config/edgewise/token")
# auto_error=False: a missing or non-Bearer header becomes our own uniform 401.
_SCHEME = HTTPBearer(auto_error=False, description="the token from the manager's token file")
_Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_SCHEME)]


def token_path(path: Path | None = None) -> Path:
    """The token file: ``path``, else ``$EDGEWISE_TOKEN_FILE``, else ~/.config/edgewise/token."""
    if path is None:
        path = Path(os.environ.get(TOKEN_FILE_ENV) or _DEFAULT_FILE)
    return path.expanduser()


def token_source(path: Path | None = None) -> str:
    """Where ``load_or_create_token`` takes the token from, for messages (never the token)."""
    if os.environ.get(TOKEN_ENV) is not None:
        return f"the {TOKEN_ENV} environment variable"
    return str(token_path(path))


def load_or_create_token(path: Path | None = None) -> str:
    """The API token: ``$EDGEWISE_TOKEN`` if set, else the token file, created if missing.

    A new file gets ``secrets.token_urlsafe(32)`` and mode 0600 from the moment it exists.
    An existing file that other users could read (or that another user owns) is refused:
    its token must be treated as leaked.
    """
    from_env = os.environ.get(TOKEN_ENV)
    if from_env is not None:
        return _checked(from_env, TOKEN_ENV)
    file = token_path(path)
    try:
        try:
            return _read_private(file)
        except FileNotFoundError:
            pass
        try:
            return _create(file)
        except FileExistsError:  # another process created it between our read and create
            return _read_private(file)
    except OSError as exc:
        raise ConfigError(f"cannot use the token file: {exc.strerror}", source=str(file)) from None


def _checked(token: str, source: str) -> str:
    token = token.strip()
    if not token or any(ch.isspace() for ch in token) or not token.isascii():
        raise ConfigError(
            "the token must be non-empty printable ASCII without spaces", source=source
        )
    return token


def _read_private(file: Path) -> str:
    """Read a token file after checking it is a regular file only its owner can read."""
    fd = os.open(file, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, encoding="ascii", errors="replace") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError("the token file is not a regular file", source=str(file))
        if info.st_mode & 0o077:
            mode = oct(stat.S_IMODE(info.st_mode))
            raise ConfigError(
                f"the token file is accessible to other users (mode {mode}); "
                f"replace the token and run: chmod 600 {file}",
                source=str(file),
            )
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise ConfigError("the token file belongs to another user", source=str(file))
        return _checked(handle.read(), str(file))


def _create(file: Path) -> str:
    """Write a fresh token to a new file that is never readable by anyone but its owner."""
    file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(file, flags, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(token + "\n")
    return token


def bearer_dependency(token: str) -> Callable[..., Awaitable[None]]:
    """A FastAPI dependency that admits only requests with ``Authorization: Bearer <token>``.

    The comparison is constant-time; every failure is the same 401 with
    ``WWW-Authenticate: Bearer``, whatever was wrong with the header.
    """
    expected = _checked(token, "token").encode()

    async def require_token(credentials: _Credentials) -> None:
        given = credentials.credentials.encode("utf-8", "replace") if credentials else b""
        if not secrets.compare_digest(given, expected):
            raise HTTPException(
                status_code=status.HTTP_401_UNAUTHORIZED,
                detail="missing or invalid bearer token",
                headers={"WWW-Authenticate": "Bearer"},
            )

    return require_token


SCRAPE_TOKEN_ENV = "EDGEWISE_SCRAPE_TOKEN"


def load_scrape_token() -> str | None:
    """The token Prometheus may use for ``/metrics`` only (``$EDGEWISE_SCRAPE_TOKEN``), or
    None: then ``/metrics`` takes the API token."""
    found = os.environ.get(SCRAPE_TOKEN_ENV)
    return None if found is None else _checked(found, SCRAPE_TOKEN_ENV)
