"""Request and response bodies of the SROLE endpoint and the ``modelparallel`` job spec
(pydantic, at the edge), every size bounded."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from edgewise.jobs.workload import HttpWorkload

__all__ = ["JobPlacement", "Method", "ModelParallelJobSpec", "PlaceRequest", "PlaceResponse"]

Method = Literal["rl", "marl", "srole-c", "srole-d"]
DeviceName = Annotated[str, StringConstraints(min_length=1, max_length=128)]
_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class PlaceRequest(BaseModel):
    """One round of placements (3 jobs per 5-node cluster) on a random Table I network,
    decided by ``method``'s agents after ``rounds`` of offline pre-training (§V-A)."""

    model_config = _STRICT
    method: Method = "srole-c"
    model: Literal["vgg-16", "googlenet", "rnn"] = "vgg-16"
    edges: int = Field(default=10, ge=5, le=50, description="edge nodes, a multiple of 5")
    workload: float = Field(default=100.0, ge=50.0, le=100.0, description="PageRank load, %")
    rounds: int = Field(default=100, ge=1, le=1000, description="pre-training rounds")
    partitions: int | None = Field(default=None, ge=1, le=16,
                                   description="group each model's levels into this many")
    seed: int = Field(default=0, ge=0, le=2**31 - 1)

    @model_validator(mode="after")
    def _multiple_of_five(self) -> PlaceRequest:
        if self.edges % 5:
            raise ValueError("edges must be a multiple of 5 (clusters of 5 nodes)")
        return self


class JobPlacement(BaseModel):
    """A job's partitions: where its agent proposed them, where the shield executed them,
    and its job completion time (None: the job failed, out of memory)."""

    job: str
    origin: int
    proposed: list[int]
    executed: list[int]
    jct_s: float | None
    failed: bool = False


class PlaceResponse(BaseModel):
    method: str
    jobs: list[JobPlacement]
    collisions: int
    collisions_after_shield: int
    shield_corrections: int
    decided_in_s: float


class ModelParallelJobSpec(BaseModel):
    """Model-parallel training (SROLE) for real: the digits CNN's levels (or those of the
    ``workload``'s model) placed on the cluster's devices by ``method``'s agents (pre-trained
    ``rounds`` rounds), then trained stage to stage for ``iterations`` batches; devices
    offer at most ``memory_cap_mb``."""

    model_config = _STRICT
    method: Method = "srole-c"
    origin: DeviceName | None = Field(
        default=None, description="where the batches come from; default: the first worker")
    memory_cap_mb: float | None = Field(default=None, gt=1.0, le=1e6)
    batch_size: int = Field(default=64, ge=8, le=512)
    iterations: int = Field(default=50, ge=1, le=5000)
    rounds: int = Field(default=100, ge=1, le=1000)
    learning_rate: float = Field(default=0.005, gt=0, le=1.0)
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    workload: HttpWorkload | None = Field(
        default=None,
        description="the user's model and data, checked by a dry run at submission: the "
                    "model is split into its levels by graph analysis (as `edgewise "
                    "modelparallel place --workload-file`), placed and trained on the data; "
                    "default: the digits CNN on the digits")
