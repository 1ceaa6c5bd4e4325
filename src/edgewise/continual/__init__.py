"""Ekya: joint retraining and inference of video-analytics models on shared edge accelerators."""

from __future__ import annotations

from edgewise.continual.estimate import estimate_accuracy, pick_inference
from edgewise.continual.problem import (
    ContinualPlan,
    ContinualProblem,
    InferenceConfig,
    InferenceOption,
    RetrainConfig,
    RetrainOption,
    StreamDecision,
    StreamState,
    default_inference_configs,
    default_retrain_configs,
)

__all__ = [
    "ContinualPlan",
    "ContinualProblem",
    "InferenceConfig",
    "InferenceOption",
    "RetrainConfig",
    "RetrainOption",
    "StreamDecision",
    "StreamState",
    "default_inference_configs",
    "default_retrain_configs",
    "estimate_accuracy",
    "pick_inference",
]
