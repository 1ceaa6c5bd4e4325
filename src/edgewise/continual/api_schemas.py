"""Request and response bodies of the Ekya endpoints and the ``continual`` job spec
(pydantic, at the edge), every size bounded."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from edgewise.jobs.workload import HttpWorkload

__all__ = ["MAX_EXACT_STEPS", "MAX_STEPS", "ContinualJobSpec", "ContinualPlanRequest",
           "ContinualPlanResponse", "DecisionView", "InferenceOptionSpec", "RetrainOptionSpec",
           "StreamSpec"]

MAX_STREAMS = 64
MAX_OPTIONS = 64
MAX_STEPS = 2000
"""Allocation quanta (accelerators / Δ) a plan may split: the thief's work grows with them."""
MAX_EXACT_STEPS = 100
"""The exact oracle's table grows as (accelerators / Δ)²: 6 GB at 2e4 quanta."""
EXACT_MAX_STREAMS = 4

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.+-]{1,64}$")]
DeviceName = Annotated[str, StringConstraints(min_length=1, max_length=128)]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]
_STRICT = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class RetrainOptionSpec(BaseModel):
    """A micro-profiled retraining configuration: accuracy after it, cost at a whole
    accelerator in seconds."""

    model_config = _STRICT
    config: Name
    accuracy: Unit
    cost_s: float = Field(gt=0.0, le=1e7)


class InferenceOptionSpec(BaseModel):
    """An inference configuration: accuracy factor it keeps and share it needs."""

    model_config = _STRICT
    config: Name
    accuracy_factor: Unit
    demand: float = Field(gt=0.0, le=1e4)


class StreamSpec(BaseModel):
    model_config = _STRICT
    name: Name
    accuracy: Unit
    retrain: list[RetrainOptionSpec] = Field(default_factory=list, max_length=MAX_OPTIONS)
    inference: list[InferenceOptionSpec] = Field(min_length=1, max_length=MAX_OPTIONS)


def _check_steps(accelerators: float, delta: float, policy: str, streams: int) -> None:
    """The problem's size, bounded before any work: quanta and, for exact, streams."""
    steps = accelerators / delta
    limit = MAX_EXACT_STEPS if policy == "exact" else MAX_STEPS
    if not math.isfinite(steps) or steps > limit:
        raise ValueError(f"accelerators / delta must be at most {limit} for {policy} "
                         f"(the problem's size), got {steps:.3g}")
    if policy == "exact" and streams > EXACT_MAX_STREAMS:
        raise ValueError(f"the exact policy is limited to {EXACT_MAX_STREAMS} streams")


class ContinualPlanRequest(BaseModel):
    """Algorithm 1's inputs (§4.1): streams, accelerators G, window ‖T‖, Δ and a_MIN."""

    model_config = _STRICT
    streams: list[StreamSpec] = Field(min_length=1, max_length=MAX_STREAMS)
    accelerators: float = Field(gt=0.0, le=1024.0)
    window_s: float = Field(gt=0.0, le=86_400.0)
    delta: float = Field(default=0.1, ge=1e-3, le=1024.0)
    a_min: Unit = 0.0
    policy: Literal["thief", "uniform", "exact"] = "thief"
    seed: int = Field(default=0, ge=0, le=2**31)

    @model_validator(mode="after")
    def _bounded(self) -> ContinualPlanRequest:
        _check_steps(self.accelerators, self.delta, self.policy, len(self.streams))
        return self


class DecisionView(BaseModel):
    stream: str
    retrain: str | None
    inference: str
    retrain_share: float
    inference_share: float


class ContinualPlanResponse(BaseModel):
    id: str
    policy: str
    accuracy: float
    violations: int
    decisions: list[DecisionView]
    decided_in_s: float


class ContinualJobSpec(BaseModel):
    """Continuous learning (Ekya) for real: ``streams`` drifting digits cameras on one
    device of the cluster, each window micro-profiled and planned by ``policy``, then
    inference and retraining run at the planned shares; accuracy measured per window.
    ``workload`` and ``golden_workload`` are the student and the golden model of
    ``edgewise continual run --student/--golden`` (default: the built-in digits CNNs)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
    streams: int = Field(default=2, ge=1, le=8)
    windows: int = Field(default=2, ge=1, le=20)
    window_s: float = Field(default=3.0, ge=0.5, le=600.0)
    policy: Literal["thief", "uniform", "exact"] = "thief"
    a_min: Unit = 0.0
    delta: float = Field(default=0.1, ge=0.01, le=1.0)
    device: DeviceName | None = Field(
        default=None, description="the shared device; default: the first with an accelerator")
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    workload: HttpWorkload | None = Field(
        default=None, description="the student, the deployed model each stream retrains: a "
        "built-in or hf:<ConfigClass> model, its weights in the manager's data folder (else a "
        "seeded random initialisation); data: digits, the frames of the drifting streams. "
        "Default: the built-in digits CNN, pre-trained on clean digits")
    golden_workload: HttpWorkload | None = Field(
        default=None, description="the golden model that labels the retraining frames, given "
        "as workload; it must output the student's classes. Default: the built-in teacher")

    @model_validator(mode="after")
    def _bounded(self) -> ContinualJobSpec:
        _check_steps(1.0, self.delta, self.policy, self.streams)
        return self
