"""A site's chunk store actor: the site's data chunks, shipped to other sites over the emulated
inter-site link (Okita's data transmission phase, Fig. 2) and served to the site's workers."""

from __future__ import annotations

from typing import Any

import numpy as np
import ray
from numpy.typing import NDArray

from edgewise.cluster.model import Link
from edgewise.runtime.shaping import ByteCounter, ShapedLink
from edgewise.wire.frames import Codec, decode, encode

__all__ = ["SiteStore", "chunk_frame", "split_chunks"]

Arrays = dict[str, NDArray[Any]]


def split_chunks(n_samples: int, n_chunks: int, seed: int) -> list[NDArray[np.int64]]:
    """``n_chunks`` disjoint random chunks of ``range(n_samples)``, sizes differing by at
    most one (a data chunk is the unit of data, §III-A); each chunk is sorted."""
    if not 1 <= n_chunks <= n_samples:
        raise ValueError(f"need 1 <= chunks <= {n_samples} samples, got {n_chunks}")
    order = np.random.default_rng(seed).permutation(n_samples).astype(np.int64)
    return [np.sort(part) for part in np.array_split(order, n_chunks)]


def chunk_frame(arrays: Arrays, compression: Codec = "lz4") -> bytes:
    """Samples ``x``, ``y``, ``ids`` and each sample's ``chunk`` number as one frame."""
    return encode(arrays, compression=compression)


@ray.remote(max_concurrency=8)  # type: ignore[call-overload]
class SiteStore:
    """Holds chunks per job as arrays (x, y, ids, chunk); no pickled payloads: chunks arrive
    and leave as transport frames. Counts the bytes it shipped per link."""

    def __init__(self, site: str, device: str, compression: Codec = "lz4",
                 time_scale: float = 1.0) -> None:
        self.site, self.device, self.compression = site, device, compression
        self.time_scale = time_scale
        self.held: dict[str, Arrays] = {}
        self.jobs: dict[str, str] = {}  # worker name -> its job
        self.counter = ByteCounter()

    def accept(self, job: str, frame: bytes) -> int:
        """Store the chunks in ``frame`` for ``job``; returns the samples now held for it."""
        arrays = {k: v.copy() for k, v in decode(frame).arrays.items()}
        have = self.held.get(job)
        if have is not None:
            arrays = {k: np.concatenate([have[k], arrays[k]]) for k in arrays}
        self.held[job] = arrays
        return len(arrays["ids"])

    def chunks(self, job: str) -> list[int]:
        """The chunk numbers held for ``job``, sorted."""
        have = self.held.get(job)
        return [] if have is None else sorted({int(c) for c in have["chunk"]})

    def ship(self, job: str, chunks: list[int], link: Link) -> bytes:
        """Remove ``chunks`` of ``job`` from this site and send them over ``link`` (waits the
        emulated transfer time, counts the bytes); returns the frame for the receiving site."""
        have = self.held.get(job)
        wanted = np.asarray(chunks, np.int64)
        if have is None or not np.isin(wanted, have["chunk"]).all():
            raise KeyError(f"site {self.site} does not hold chunks {chunks} of {job}")
        mask = np.isin(have["chunk"], wanted)
        out = {k: v[mask] for k, v in have.items()}
        self.held[job] = {k: v[~mask] for k, v in have.items()}
        frame = chunk_frame(out, self.compression)
        shaped = ShapedLink(link, time_scale=self.time_scale)
        shaped.transmit(len(frame))
        raw = sum(int(v.nbytes) for v in out.values())
        self.counter.record(shaped.key, raw_bytes=raw, wire_bytes=len(frame))
        return frame

    def expect(self, worker: str, job: str) -> None:
        """``worker`` trains ``job``: its :meth:`shard` requests read that job's chunks."""
        self.jobs[worker] = job

    def drop(self, job: str, chunks: list[int]) -> int:
        """Forget ``chunks`` of ``job`` (trained); returns the samples still held for it."""
        have = self.held.get(job)
        if have is None:
            return 0
        keep = ~np.isin(have["chunk"], np.asarray(chunks, np.int64))
        self.held[job] = {k: v[keep] for k, v in have.items()}
        return int(keep.sum())

    def shard(self, worker: str, positions: NDArray[np.int64]) -> bytes:
        """The samples of ``worker``'s job with ids ``positions`` (all held here) as one frame
        (the interface :class:`edgewise.runtime.worker.Worker` loads its shard through)."""
        have = self.held.get(self.jobs.get(worker, ""))
        if have is None:
            raise KeyError(f"site {self.site} holds no data for worker {worker}")
        index = {int(s): k for k, s in enumerate(have["ids"])}
        missing = [int(s) for s in positions if int(s) not in index]
        if missing:
            raise KeyError(f"site {self.site} does not hold samples {missing[:5]} for {worker}")
        take = np.asarray([index[int(s)] for s in positions], np.int64)
        return encode({k: have[k][take] for k in ("x", "y", "ids")},
                      compression=self.compression)

    def shipped(self) -> dict[str, int]:
        """Frames and bytes shipped to other sites, in total and per link."""
        return self.counter.snapshot_dict()
