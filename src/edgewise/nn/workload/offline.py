"""Keep Hugging Face libraries offline: nothing in edgewise may download a model or a file."""

from __future__ import annotations

import os

__all__ = ["OFFLINE_ENV", "ensure_offline"]

#: The variables huggingface_hub and transformers read to never contact the Hub.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "HF_HUB_DISABLE_TELEMETRY": "1"}


def ensure_offline() -> None:
    """Set the offline variables (a defence in depth: no code path calls ``from_pretrained``;
    the spec refuses hub names before anything is imported)."""
    for key, value in OFFLINE_ENV.items():
        os.environ[key] = value
