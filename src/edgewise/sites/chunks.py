"""A job's data cut into chunks (the unit of data, §III-A) as transport frames, and loaded into
the site stores where the job's data lies at the start (D_i^r chunks at site r)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import numpy as np
import ray
from numpy.typing import NDArray

from edgewise.errors import ConfigError
from edgewise.nn.data import Dataset
from edgewise.sites.jobstate import JobState
from edgewise.sites.problem import SitesProblem
from edgewise.wire.frames import Codec, encode

__all__ = ["check_data", "chunk_frame", "load_data", "split_chunks"]

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


def _site_arrays(train: Dataset, ids: list[NDArray[np.int64]], chunks: list[int]) -> Arrays:
    """The samples of ``chunks`` with each sample's chunk number (empty arrays if none)."""
    parts = [ids[c] for c in chunks]
    index = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    numbers = [np.full(len(p), c, np.int64) for p, c in zip(parts, chunks, strict=True)]
    chunk_of = np.concatenate(numbers) if numbers else np.zeros(0, np.int64)
    part = train.take(index)
    return {"x": part.x, "y": part.y, "ids": part.ids, "chunk": chunk_of}


def check_data(problem: SitesProblem, n_samples: Mapping[str, int],
               own: Collection[str] | None = None) -> None:
    """A chunk holds at least one sample: ConfigError for a job with more chunks than its
    training set (``n_samples`` by job name; a job not named there is not checked) has
    samples. ``own``: the jobs that train a workload of their own (default: those whose
    scenario entry names one), the others the digits."""
    for i, job in enumerate(problem.jobs):
        if job.name in n_samples and job.total_chunks > n_samples[job.name]:
            mine = job.workload is not None if own is None else job.name in own
            data = "its workload's" if mine else "the digits"
            raise ConfigError(f"{job.total_chunks} chunks, but {data} training set has "
                              f"{n_samples[job.name]} samples to cut into chunks",
                              field=f"jobs[{i}].data")


def load_data(problem: SitesProblem, stores: list[Any], trains: Mapping[str, Dataset],
              seed: int, compression: Codec) -> dict[str, JobState]:
    """Each job's own copy of its training set (``trains`` by job name) cut into its
    Σ_r D_i^r chunks; site r's store starts with D_i^r of them (the data its cameras
    collected). Returns each job's driver state."""
    check_data(problem, {name: len(t) for name, t in trains.items()})
    states: dict[str, JobState] = {}
    for i, job in enumerate(problem.jobs):
        train = trains[job.name]
        ids = split_chunks(len(train), job.total_chunks, seed + i)  # positions in train
        bounds = np.cumsum([0, *job.data])
        remaining = [list(range(int(bounds[r]), int(bounds[r + 1])))
                     for r in range(problem.n_sites)]
        ray.get([store.accept.remote(job.name, chunk_frame(_site_arrays(train, ids, chunks),
                                                           compression))
                 for store, chunks in zip(stores, remaining, strict=True)])
        states[job.name] = JobState(job, [train.ids[p] for p in ids], remaining)
    return states
