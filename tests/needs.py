"""The one way a test says it needs something the host may lack: a skip with the reason on
a developer's machine, a failure in CI (``CI`` set to true or 1), where ``make test``
installs every tool and the host can run everything."""

from __future__ import annotations

import os
import shutil

import pytest

__all__ = ["in_ci", "require", "require_tool"]


def in_ci() -> bool:
    """Whether this run is CI's (``CI=true``, as GitHub, GitLab and our .ci/run set it)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def require(available: bool, reason: str) -> None:
    """Go on if ``available``; else skip saying ``reason``, or fail in CI."""
    if available:
        return
    if in_ci():
        pytest.fail(f"CI must run this test, but {reason}", pytrace=False)
    pytest.skip(reason)


def require_tool(name: str, install: str) -> str:
    """The path of command ``name``; skip (fail in CI) where it is missing, saying how to
    ``install`` it."""
    found = shutil.which(name)
    require(found is not None, f"{name} is not installed ({install})")
    assert found is not None
    return found
