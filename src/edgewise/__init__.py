"""edgewise: decide where and how deep-learning work runs on edge devices, then run it."""

import atexit
import gc

__version__ = "0.1.0"
__all__ = ["__version__"]

# A process that has imported PyTorch spends about 0.6 CPU-seconds of its exit in the
# cyclic garbage collector: the interpreter's finalisation collects several times over the
# ~200,000 objects that PyTorch's modules hold (`python -c "import torch"`: 2.04-2.25 user
# CPU-seconds; with `gc.freeze` registered at exit 1.42-1.67, 2026-12-02). Every Ray worker
# that hosts a member, every command-line run and every served manager imports edgewise, so
# each exits without that walk. Freezing moves what is alive into the collector's permanent
# generation; reference counting still frees it, so nothing is lost but the walk.
atexit.register(gc.freeze)
