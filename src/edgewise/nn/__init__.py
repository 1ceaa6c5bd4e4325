"""The DNN side: small trainable models and datasets derived from scikit-learn's digits."""

from edgewise.nn.data import Dataset, digits_split, shard_indices
from edgewise.nn.models import DigitsCNN, build_model

__all__ = ["Dataset", "DigitsCNN", "build_model", "digits_split", "shard_indices"]
