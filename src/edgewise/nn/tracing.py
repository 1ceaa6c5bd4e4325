"""One lock for graph tracing and the forward passes that may run beside it in one process.

``torch.fx.symbolic_trace`` (and ``torch.export`` without strict mode) patch
``torch.nn.Module.__call__`` for the whole process while they trace: a model run by another
thread at that moment is taken into the trace and fails ("module is not installed as a
submodule"). The manager plans one job (a pipeline's cut points: a trace) while it validates
another (a workload's dry run: a forward pass), so both hold this lock.
"""

from __future__ import annotations

import threading

__all__ = ["TRACE_LOCK"]

TRACE_LOCK = threading.RLock()
