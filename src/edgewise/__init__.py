"""edgewise: decide where and how deep-learning work runs on edge devices, then run it."""

__version__ = "0.1.0"
__all__ = ["__version__"]
