"""One time slot of an Okita plan on Ray (Fig. 2): the data transmission phase, then each
scheduled job's placement (restored from its checkpoint where it moved) and training."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray

from edgewise.runtime.launch import MemberSpec
from edgewise.runtime.ray_cluster import RayRuntime
from edgewise.runtime.shaping import ByteCounter, ShapedLink
from edgewise.runtime.transport import carry
from edgewise.runtime.vessel_pool import release_members
from edgewise.sites.jobstate import JobState
from edgewise.sites.problem import JobSlot
from edgewise.sites.sitemap import JobDevices, SiteDevices, allocate_slot, link_between

__all__ = ["ChunkMove", "SlotRecord", "SlotRunner", "SlotSettings"]

Events = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class ChunkMove:
    """g_i^{rr'}(t) carried out: ``chunks`` of ``job`` shipped from ``src`` to ``dst`` over
    the emulated inter-site link as one frame of ``wire_bytes``, in ``seconds``."""

    job: str
    slot: int
    src: str
    dst: str
    chunks: int
    wire_bytes: int
    seconds: float


@dataclass(frozen=True, slots=True)
class SlotRecord:
    """One job in one slot: where it ran, what it trained, its accuracy at the slot's end,
    and whether it moved (``restored_accuracy``: the accuracy of the checkpoint restored on
    the new parameter server, measured before any training there)."""

    job: str
    slot: int
    ps_site: str
    workers: dict[str, int]
    ps_device: str
    worker_devices: tuple[str, ...]
    chunks: int
    samples: int
    epochs: int
    val_accuracy: float
    accuracy_before: float
    restored_accuracy: float | None
    migrated: bool
    ps_moved: bool
    wall_seconds: float


@dataclass(frozen=True, slots=True)
class SlotSettings:
    """How the slots train: every actor's build (``members``), the workers' batch size, the
    epochs per slot (None: each job's E_i) and the factor on every emulated transfer time."""

    members: MemberSpec
    batch_size: int
    epochs_per_slot: int | None
    time_scale: float


class SlotRunner:
    """Runs the slots of a plan; keeps every record, chunk move and checkpoint byte count."""

    def __init__(self, runtime: RayRuntime, sites: list[SiteDevices], stores: list[Any],
                 monitor: Any, validation: bytes, settings: SlotSettings,
                 events: Events) -> None:
        self.runtime, self.sites, self.stores, self.monitor = runtime, sites, stores, monitor
        self.validation, self.settings, self.events = validation, settings, events
        self.site_of = {d: r for r, s in enumerate(sites) for d in (s.store, *s.compute)}
        self.records: list[SlotRecord] = []
        self.moves: list[ChunkMove] = []
        self.checkpoint_bytes = 0
        self.counter = ByteCounter()

    def run_slot(self, slot: int, n_slots: int, entries: Sequence[JobSlot],
                 states: dict[str, JobState]) -> None:
        """Pause the jobs without an entry (their actors stop, the checkpoint stays), then
        run every entry of the slot concurrently."""
        self.events("slot_start", {"slot": slot, "n_slots": n_slots, "jobs": len(entries)})
        active = {e.job for e in entries}
        for state in states.values():
            if state.name not in active:
                self._stop_actors(state)
        previous = {s.name: JobDevices(s.ps_device, tuple(s.workers))
                    for s in states.values() if s.ps}
        assigned = allocate_slot(entries, self.sites, previous)
        with ThreadPoolExecutor(max_workers=max(1, len(entries))) as pool:
            list(pool.map(lambda e: self._run_entry(e, states[e.job], assigned[e.job]),
                          entries))
        self.events("slot_end", {"slot": slot, "n_slots": n_slots})

    def _run_entry(self, entry: JobSlot, state: JobState, assigned: JobDevices) -> None:
        t0 = time.perf_counter()
        trained = self._transfer(entry, state)
        restored = self._place(entry, state, assigned)
        before = state.accuracy
        samples = self._load_shards(entry, state, trained)
        epochs = self.settings.epochs_per_slot or state.job.epochs
        for _ in range(epochs):
            self._epoch(entry, state)
        ray.get([self.stores[r].drop.remote(state.name, c) for r, c in trained.items()])
        sites = (entry.ps_site, frozenset(r for r, y in enumerate(entry.workers) if y))
        moved = state.last_sites is not None and state.last_sites != sites
        ps_moved = state.last_sites is not None and state.last_sites[0] != entry.ps_site
        state.last_sites = sites
        record = SlotRecord(
            state.name, entry.slot, self.sites[entry.ps_site].site,
            {self.sites[r].site: y for r, y in enumerate(entry.workers) if y},
            assigned.ps, assigned.workers, sum(len(c) for c in trained.values()), samples,
            epochs, state.accuracy, before, restored, moved, ps_moved,
            time.perf_counter() - t0)
        self.records.append(record)
        self.events("job_slot", {"record": record})

    def _transfer(self, entry: JobSlot, state: JobState) -> dict[int, list[int]]:
        """The data transmission phase: the chunks each site trains, shipped there first."""
        trained: dict[int, list[int]] = defaultdict(list)
        for g in entry.transfers:
            chunks = state.take(g.src, g.chunks)
            trained[g.dst] += chunks
            if g.src == g.dst or not chunks:
                continue
            src, dst = self.sites[g.src], self.sites[g.dst]
            t0 = time.perf_counter()
            link = link_between(self.runtime, src.store, dst.store)
            size = ray.get(self.stores[g.src].ship.remote(state.name, chunks, link,
                                                         self.stores[g.dst]))
            move = ChunkMove(state.name, entry.slot, src.site, dst.site, len(chunks),
                             size, time.perf_counter() - t0)
            self.moves.append(move)
            self.events("transfer", {"move": move})
        return trained

    def _place(self, entry: JobSlot, state: JobState, assigned: JobDevices) -> float | None:
        """Start the PS (restoring the checkpoint, shipped over the inter-site link if it
        was taken at another site) unless it stays on its device; start and stop workers.
        Returns the restored model's accuracy when a checkpoint was restored."""
        ps_device, worker_devices = assigned.ps, assigned.workers
        restored = None
        if state.ps is None or state.ps_device != ps_device:
            self._stop_actors(state)
            self._ship_checkpoint(state, ps_device)
            state.start_ps(self.runtime, state.members or self.settings.members, ps_device,
                           entry.slot, state.validation or self.validation)
            if state.checkpoint is not None:
                restored = self._evaluate(state)
        for device in [d for d in state.workers if d not in worker_devices]:
            state.stop_worker(device, self.monitor, self._apart(device, ps_device))
        for device in worker_devices:
            if device not in state.workers:
                store = self.sites[self.site_of[device]].store
                state.start_worker(self.runtime, state.members or self.settings.members,
                                   device, entry.slot, store, self.monitor,
                                   self.settings.batch_size)
        return restored

    def _apart(self, a: str, b: str) -> bool:
        return self.site_of[a] != self.site_of[b]

    def _ship_checkpoint(self, state: JobState, ps_device: str) -> None:
        """Carry the checkpoint from the site it was taken at to the new PS's site."""
        if state.checkpoint is None or not self._apart(state.checkpoint_device, ps_device):
            return
        link = ShapedLink(link_between(self.runtime, state.checkpoint_device,
                                       ps_device), time_scale=self.settings.time_scale)
        carry(link, len(state.checkpoint), self.counter)
        self.checkpoint_bytes += len(state.checkpoint)
        state.checkpoint_device = ps_device

    def _evaluate(self, state: JobState) -> float:
        """Validation accuracy of the PS's model as it is (an epoch with no worker)."""
        ray.get(state.ps.begin_epoch.remote(-1, []))
        out = ray.get(state.ps.finish_epoch.remote())
        return float(out["val_accuracy"])

    def _load_shards(self, entry: JobSlot, state: JobState, trained: dict[int, list[int]]) -> int:
        """Split each site's chunks of this slot over the job's workers at that site."""
        loads = []
        for r in range(len(self.sites)):
            devices = [d for d in state.workers if self.site_of[d] == r]
            if not devices:
                continue
            ids = state.samples(trained.get(r, []))
            for device, part in zip(devices, np.array_split(ids, len(devices)), strict=True):
                ray.get(self.stores[r].expect.remote(state.names[device], state.name))
                loads.append(state.workers[device].load_shard.remote(self.stores[r], part))
        ray.get(loads)
        return sum(len(state.samples(c)) for c in trained.values())

    def _epoch(self, entry: JobSlot, state: JobState) -> None:
        """One synchronous epoch over the slot's data; its end is a checkpoint (§V-A)."""
        epoch = state.epochs_done
        ray.get(state.ps.begin_epoch.remote(epoch, list(state.workers)))
        ray.get([w.run_epoch.remote(epoch) for w in state.workers.values()])
        out = ray.get(state.ps.finish_epoch.remote())
        state.epochs_done += 1
        state.accuracy = float(out["val_accuracy"])
        state.checkpoint, state.checkpoint_device = out["checkpoint"], state.ps_device
        self.events("epoch", {"job": state.name, "slot": entry.slot, "epoch": epoch,
                              "val_accuracy": state.accuracy})

    def _stop_actors(self, state: JobState) -> None:
        for device in list(state.workers):
            state.stop_worker(device, self.monitor, self._apart(device, state.ps_device))
        state.stop_ps()

    def finish(self, states: dict[str, JobState]) -> None:
        """Stop every job's actors (their byte counts are collected on the way)."""
        for state in states.values():
            self._stop_actors(state)

    def teardown(self, states: dict[str, JobState]) -> None:
        """Kill whatever is left after a failure, without asking the actors anything."""
        for state in states.values():
            release_members(list(state.workers.values()))
            state.workers.clear()
            state.stop_ps()
