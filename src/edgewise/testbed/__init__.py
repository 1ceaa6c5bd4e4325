"""A cluster file made real on one Linux host: a Ray node per device in its own network
namespace, cgroup CPU and memory limits, tc-shaped links, node-level faults.

The modules are imported on use (``edgewise.testbed.lifecycle``, ``.session``, ``.measure``)
so that the probes in ``edgewise.testbed.probes`` start in milliseconds inside a namespace.
"""

__all__: list[str] = []
