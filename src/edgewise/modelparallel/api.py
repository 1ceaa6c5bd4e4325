"""The manager's modelparallel endpoints (mounted under ``/api/v1/modelparallel``)."""

from __future__ import annotations

from fastapi import APIRouter

from edgewise.runtime.jobs import ApiContext, ProblemApi

__all__ = ["API", "router"]


def router(context: ApiContext) -> APIRouter:
    """The modelparallel router; its planning and job endpoints come with the manager service."""
    return APIRouter(prefix="/modelparallel", tags=["modelparallel"])


API = ProblemApi("modelparallel", router)
