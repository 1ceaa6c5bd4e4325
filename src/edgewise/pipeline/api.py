"""The manager's pipeline endpoints (mounted under ``/api/v1/pipeline``)."""

from __future__ import annotations

from fastapi import APIRouter

from edgewise.runtime.jobs import ApiContext, ProblemApi

__all__ = ["API", "router"]


def router(context: ApiContext) -> APIRouter:
    """The pipeline router; its planning and job endpoints come with the manager service."""
    return APIRouter(prefix="/pipeline", tags=["pipeline"])


API = ProblemApi("pipeline", router)
