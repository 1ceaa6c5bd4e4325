"""Request and response bodies of the pipeline endpoints and the ``pipeline`` job spec
(pydantic, at the edge), every size bounded."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from edgewise.jobs.workload import HttpWorkload

__all__ = ["EXACT_MAX_NODES", "INPUT_VALUES", "MAX_INFER_INPUTS", "InferRequest",
           "InferResponse", "PipelineJobSpec", "PipelinePlanRequest", "PipelinePlanResponse",
           "PolicyName", "StageView", "SwitchRequest"]

MAX_NODES = 64
EXACT_MAX_NODES = 6
"""The exact oracle enumerates placements: refused above 6 nodes."""
MAX_INFER_INPUTS = 64
INPUT_VALUES = 64
"""A request is one 8×8 grey image (the digits CNN's input), 64 values in row order."""

PolicyName = Literal["seifer", "bottleneck-search", "joint-greedy", "random", "exact"]
DeviceName = Annotated[str, StringConstraints(min_length=1, max_length=128)]
Pixel = Annotated[float, Field(ge=-1e3, le=1e3)]
_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class PipelineJobSpec(BaseModel):
    """A pipelined inference job (SEIFER): the digits CNN cut and placed on the cluster by
    ``policy``, a dispatcher streaming ``requests`` digits images through it (and serving
    ``POST /pipelines/{id}/infer`` meanwhile, then for ``serve_seconds`` more), optionally
    switching to a new model version after ``switch_after`` requests (nothing dropped).

    With ``workload``, the user's model instead, as `edgewise pipeline run --workload` runs
    it: cut at its traced points, placed over at least three devices where the cluster has
    them (or within ``memory_cap_mb``), ``requests`` samples of its data's validation split
    streamed through it and its outputs checked against the whole model's. Such a job
    takes no HTTP requests (``serve_seconds`` must be 0); its switch rebuilds the workload
    from ``seed + 1``: its weights file again when it names one, else new random weights."""

    model_config = _STRICT
    policy: PolicyName = "bottleneck-search"
    devices: list[DeviceName] | None = Field(
        default=None, min_length=1, max_length=MAX_NODES,
        description="devices the stages may use; default: every device but the dispatcher's")
    dispatcher: DeviceName | None = Field(
        default=None, description="the dispatcher's device; default: the manager's")
    memory_cap_mb: float | None = Field(
        default=None, gt=0.01, le=1e6,
        description="memory each device offers the pipeline, MB (small values force cuts)")
    requests: int = Field(default=200, ge=0, le=100_000, description="images to stream")
    serve_seconds: float = Field(default=0.0, ge=0, le=3600,
                                 description="serve /infer this long after the stream")
    switch_after: int | None = Field(default=None, ge=1, le=100_000,
                                     description="switch to a new model version after this "
                                                 "many requests (no request dropped)")
    window: int = Field(default=8, ge=1, le=64, description="requests in flight")
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    workload: HttpWorkload | None = Field(
        default=None, description="the user's model and data instead of the digits CNN: a "
        "built-in or hf:<ConfigClass> model, data in the manager's data folder (its "
        "validation split gives the requests)")

    @model_validator(mode="after")
    def _bounded(self) -> PipelineJobSpec:
        if self.devices is not None and len(set(self.devices)) != len(self.devices):
            raise ValueError("devices must be unique")
        if self.policy == "exact" and self.devices is not None and \
                len(self.devices) > EXACT_MAX_NODES:
            raise ValueError(f"the exact policy is limited to {EXACT_MAX_NODES} devices")
        return self


class PipelinePlanRequest(BaseModel):
    """Plan a zoo model's partition and placement (SEIFER §3): on this manager's cluster,
    or on a random SEIFER cluster (§6.1) of ``nodes`` nodes."""

    model_config = _STRICT
    model: Annotated[str, StringConstraints(pattern=r"^[a-z0-9-]{1,32}$")] = "digits-cnn"
    policy: PolicyName = "seifer"
    on: Literal["cluster", "random"] = "cluster"
    nodes: int = Field(default=10, ge=1, le=MAX_NODES, description="random cluster's size")
    memory_mb: float = Field(default=128.0, gt=0.01, le=1e6,
                             description="each node's memory (random), or its cap (cluster)")
    seed: int = Field(default=0, ge=0, le=2**31 - 1)

    @model_validator(mode="after")
    def _bounded(self) -> PipelinePlanRequest:
        if self.policy == "exact" and self.on == "random" and self.nodes > EXACT_MAX_NODES:
            raise ValueError(f"the exact policy is limited to {EXACT_MAX_NODES} nodes")
        return self


class StageView(BaseModel):
    """Partition ``stage``: segments ``first .. end - 1`` of the chain, on ``device``."""

    stage: int
    device: str
    first: int
    end: int
    memory_bytes: int
    output_bytes: int


class PipelinePlanResponse(BaseModel):
    model: str
    policy: str
    dispatcher: str
    segments: int
    stages: list[StageView]
    bottleneck_s: float | None = Field(description="None: unbounded (no transfer)")
    throughput_bound_rps: float | None
    decided_in_s: float


class InferRequest(BaseModel):
    """Images to classify, each 64 values (an 8×8 grey image in row order, 0..1)."""

    model_config = _STRICT
    inputs: list[Annotated[list[Pixel], Field(min_length=INPUT_VALUES,
                                              max_length=INPUT_VALUES)]] = Field(
        min_length=1, max_length=MAX_INFER_INPUTS)
    timeout_s: float = Field(default=30.0, gt=0, le=120)


class InferResponse(BaseModel):
    """Results in request order: class scores, the predicted class, the model version that
    answered and each request's latency through the pipeline."""

    outputs: list[list[float]]
    classes: list[int]
    versions: list[int]
    latency_s: list[float]


class SwitchRequest(BaseModel):
    """Switch the serving pipeline to the model version with these weights (``seed``)."""

    model_config = _STRICT
    seed: int = Field(ge=0, le=2**31 - 1)
