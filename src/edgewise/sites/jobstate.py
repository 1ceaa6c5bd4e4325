"""One Okita job on Ray between slots: its chunks, its live actors and its last checkpoint.

Its parameter server and workers are started by the runtime's launcher (runtime/launch.py),
the one the training engine uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import ray
from numpy.typing import NDArray

from edgewise.runtime.launch import MemberSpec, start_ps, start_worker
from edgewise.runtime.ray_cluster import RayRuntime
from edgewise.runtime.vessel_pool import release_members
from edgewise.sites.problem import Job
from edgewise.sites.sitemap import link_between

__all__ = ["JobState"]


@dataclass
class JobState:
    """Driver-side state of one job: the samples of each chunk, the chunks each site still
    holds untrained (M_i^r(t), Eq. 3), the live actors and the last slot-end checkpoint."""

    job: Job
    chunk_ids: list[NDArray[np.int64]]
    remaining: list[list[int]]
    ps: Any = None
    ps_device: str = ""
    workers: dict[str, Any] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    checkpoint: bytes | None = None
    checkpoint_device: str = ""
    last_sites: tuple[int, frozenset[int]] | None = None  # PS site, sites with workers
    epochs_done: int = 0
    accuracy: float = float("nan")
    param_bytes_inter_site: int = 0
    members: MemberSpec | None = None  # the job's own build (its workload); None: the run's
    validation: bytes | None = None  # the job's own validation frame; None: the run's

    @property
    def name(self) -> str:
        return self.job.name

    def take(self, site: int, n: int) -> list[int]:
        """The first ``n`` untrained chunks of ``site`` (they leave M_i^r)."""
        if n > len(self.remaining[site]):
            raise ValueError(f"{self.name}: site {site} has {len(self.remaining[site])} "
                             f"untrained chunks, the plan trains {n}")
        taken, self.remaining[site] = self.remaining[site][:n], self.remaining[site][n:]
        return taken

    def samples(self, chunks: list[int]) -> NDArray[np.int64]:
        parts = [self.chunk_ids[c] for c in chunks]
        return np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)

    def start_ps(self, runtime: RayRuntime, spec: MemberSpec, device: str, slot: int,
                 validation: bytes) -> None:
        """A parameter server on ``device``, restored from the last checkpoint if any."""
        name = f"ps-{self.name}-{slot}-{device}"
        self.ps = start_ps(runtime, spec, device, name, validation, self.checkpoint)
        self.ps_device = device

    def start_worker(self, runtime: RayRuntime, spec: MemberSpec, device: str, slot: int,
                     store_device: str, monitor: Any, batch_size: int) -> None:
        """A synchronous worker on ``device`` talking to this job's PS and its site's store."""
        name = f"worker-{self.name}-{slot}-{device}"
        self.names[device] = name
        self.workers[device] = start_worker(
            runtime, spec, device, name, ps=self.ps,
            ps_link=link_between(runtime, device, self.ps_device),
            store_link=link_between(runtime, device, store_device), batch_size=batch_size,
            monitor=monitor, sync=True)

    def stop_worker(self, device: str, monitor: Any, inter_site: bool) -> None:
        """Stop one worker; its bytes exchanged with the PS count if it was at another site."""
        handle = self.workers.pop(device)
        name = self.names.pop(device)
        sent = ray.get(handle.bytes_sent.remote())
        if inter_site:
            self.param_bytes_inter_site += int(sent["wire_bytes"])
        ray.get(handle.stop.remote())
        monitor.unregister.remote(name)
        release_members([handle])

    def stop_ps(self) -> None:
        if self.ps is not None:
            release_members([self.ps])
        self.ps, self.ps_device = None, ""
