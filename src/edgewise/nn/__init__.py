"""The DNN side: small trainable models and datasets derived from scikit-learn's digits."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgewise.nn.data import Dataset, digits_split, shard_indices
    from edgewise.nn.models import DigitsCNN, build_model

# Imported when first used (PEP 562), so that the numpy-only modules of this package
# (data, the workload's spec and sources) load without torch.
_WHERE = {"Dataset": "edgewise.nn.data", "digits_split": "edgewise.nn.data",
          "shard_indices": "edgewise.nn.data", "DigitsCNN": "edgewise.nn.models",
          "build_model": "edgewise.nn.models"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Dataset", "DigitsCNN", "build_model", "digits_split", "shard_indices"]
