"""`edgewise bench runtime`: does the engine really train, scale and move bytes fast?

Protocol (one Ray instance, one run):
1. Each of the three identical emulated workers trains alone on the full training set for
   ``solo_epochs`` epochs (the other two idle); its samples/s is the median over the epochs
   after the first of the training loop's rate (pull, compute, push, update), so start-up
   and warm-up are not counted.
2. The three train together, asynchronously, with equal shards, for ``epochs`` epochs; the
   validation accuracy after the last epoch is ``digits_val_accuracy``; the median samples/s
   of the epochs after the first (all samples / the slowest worker's loop time) over the sum
   of the solo figures is ``ps_scaling_efficiency_3_workers``.
3. LZ4 throughput on a gradient-like 16 MB tensor, and the median round trip of a 1 MB frame
   (encode, LZ4, through a real Ray actor and back, decode).
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray

from edgewise.bench import BenchContext, BenchOption, BenchSpec, Figures
from edgewise.cluster.examples import example_path
from edgewise.cluster.model import Cluster, Role
from edgewise.cluster.schema import load_cluster
from edgewise.runtime.engine import EpochRecord, TrainResult, train
from edgewise.runtime.microbench import lz4_compress_mb_s, roundtrip_via
from edgewise.runtime.plan import TrainConfig, equal_plan
from edgewise.runtime.ray_cluster import RayRuntime, start_local

__all__ = ["DEFAULT_CLUSTER", "SPEC", "real", "run_runtime_bench", "runtime_figures"]

DEFAULT_CLUSTER = example_path("three-nanos.yaml")
Progress = Callable[[str], None]


@ray.remote(num_cpus=0)
class _Echo:
    def echo(self, frame: bytes) -> bytes:
        return frame


def _loop_throughput(record: EpochRecord) -> float:
    """Samples per second of an epoch's training loops (slowest worker bounds the epoch)."""
    stats = record.worker_stats.values()
    return sum(s["samples"] for s in stats) / max(s["wall_seconds"] for s in stats)


def _steady_throughput(result: TrainResult) -> float:
    """Median loop throughput over the epochs after the first (warm-up excluded)."""
    return float(statistics.median(_loop_throughput(r) for r in result.epochs[1:]))


def _seconds_per_batch(stats: dict[str, float], key: str) -> float:
    """A worker's epoch statistics as seconds per batch (it reports compute per sample)."""
    if key == "compute":
        return stats["compute_seconds_per_sample"] * stats["samples"] / max(stats["steps"], 1)
    return stats[f"{key}_seconds_per_batch"]


def where_time_went(result: TrainResult) -> dict[str, Any]:
    """Where an asynchronous run's steady epochs (after the first) spent their time: the
    server's share of each epoch's loop time serving pushes (``server_seconds``: decode,
    treatment, optimiser step, encoding the reply; median over epochs), and each worker's
    seconds per batch computing gradients, encoding its push, waiting for the server's
    reply (the link both ways, the server's queue and its service) and loading the weights
    (mean over workers of each worker's median over epochs). A server busy near 1 is the
    bottleneck; long waits with a server seldom busy point at the calls and links instead."""
    epochs = [r for r in (result.epochs[1:] or result.epochs) if r.worker_stats]
    busy = [r.server_seconds / max(max(s["wall_seconds"] for s in r.worker_stats.values()),
                                   1e-9) for r in epochs]
    workers = sorted({w for r in epochs for w in r.worker_stats})
    per_batch: dict[str, float | None] = {}
    for key in ("compute", "encode", "wait", "load"):
        medians = [statistics.median(_seconds_per_batch(r.worker_stats[w], key)
                                     for r in epochs if w in r.worker_stats) for w in workers]
        per_batch[key] = round(statistics.fmean(medians), 5) if medians else None
    return {"ps_server_busy_fraction": round(statistics.median(busy), 4) if busy else None,
            "worker_seconds_per_batch": per_batch}


def _solo(runtime: RayRuntime, worker: str, config: TrainConfig, n: int) -> float:
    others = frozenset(d.name for d in runtime.cluster.with_role(Role.WORKER)) - {worker}
    plan = equal_plan(runtime.cluster, n, exclude=others)
    result = train(runtime, config, plan)
    return _steady_throughput(result)


def _together(runtime: RayRuntime, config: TrainConfig, n: int) -> TrainResult:
    return train(runtime, config, equal_plan(runtime.cluster, n))


def run_runtime_bench(cluster_file: Path = DEFAULT_CLUSTER, *, epochs: int = 8,
                      solo_epochs: int = 4, seed: int = 0,
                      progress: Progress = lambda msg: None) -> dict[str, Any]:
    """Run the protocol above on the cluster emulated on this host; returns the figures as
    one JSON-able dict."""
    cluster: Cluster = load_cluster(cluster_file)
    started = time.perf_counter()
    runtime = start_local(cluster)
    try:
        figures = runtime_figures(runtime, epochs=epochs, solo_epochs=solo_epochs, seed=seed,
                                  progress=progress)
    finally:
        runtime.shutdown()
    return {**figures, "emulation_stretch": {k: round(v, 3) for k, v in runtime.stretch.items()},
            "host": platform.node(), "seconds": round(time.perf_counter() - started, 1)}


def _throughput_config(epochs: int, seed: int) -> TrainConfig:
    """The throughput runs' training: ``async``, each epoch read after it (not beside the
    next, whose evaluation would share the evaluating worker's device with its training),
    so their samples a second are the training's alone, as they always were."""
    return TrainConfig(mode="async", epochs=epochs, seed=seed, evaluation="after")


def runtime_figures(runtime: RayRuntime, *, epochs: int = 8, solo_epochs: int = 4,
                    seed: int = 0, progress: Progress = lambda msg: None) -> dict[str, Any]:
    """Steps 1–3 of the protocol on ``runtime`` (any cluster with three identical workers:
    emulated, a testbed or real devices); throughputs in the cluster's own time."""
    cluster = runtime.cluster
    workers = [d.name for d in cluster.with_role(Role.WORKER)]
    n = 1437  # digits training split (80 % of 1,797)
    solo: dict[str, float] = {}
    for w in workers:
        progress(f"{w} trains alone")
        solo[w] = _solo(runtime, w, _throughput_config(solo_epochs, seed), n)
    progress(f"{len(workers)} workers train together, asynchronously")
    together = _together(runtime, _throughput_config(epochs, seed), n)
    progress("transport micro-benchmarks")
    echo = _Echo.remote()  # type: ignore[attr-defined]
    roundtrip = roundtrip_via(lambda f: ray.get(echo.echo.remote(f)), repeats=30)
    ray.kill(echo)
    together_sps = _steady_throughput(together)
    return {
        "cluster": cluster.name,
        "workers": len(workers),
        "mode": "async",
        "epochs": epochs,
        "digits_val_accuracy": round(together.val_accuracy, 4),
        "val_accuracy_per_epoch": [round(r.val_accuracy, 4) for r in together.epochs],
        "ps_scaling_efficiency_3_workers": round(together_sps / sum(solo.values()), 4),
        "samples_per_second_together": round(together_sps, 1),
        "samples_per_second_alone": {w: round(v, 1) for w, v in solo.items()},
        "lz4_compress_mb_s": round(lz4_compress_mb_s(), 1),
        "transport_roundtrip_ms_1mb": round(roundtrip, 3),
        "data_store_bytes_shipped": sum(together.shipped_bytes.values()),
        "transport_wire_bytes": sum(t["wire_bytes"] for t in together.transport_bytes.values()),
        "transport_wire_bytes_by_worker": {w: t["wire_bytes"]
                                           for w, t in together.transport_bytes.items()},
        "transport_wire_bytes_received_by_worker": {
            w: t.get("wire_bytes_received", 0) for w, t in together.transport_bytes.items()},
        "samples_by_worker": {w: sum(int(r.worker_stats[w]["samples"]) for r in together.epochs
                                     if w in r.worker_stats) for w in workers},
        **where_time_went(together),
    }


def real(ctx: BenchContext) -> Figures:
    """The protocol above as the kit's real part (``edgewise bench runtime``); its wall-clock
    figures (throughputs, transport timings, run seconds) go to ``ctx.timings``."""
    figures = run_runtime_bench(Path(ctx.option("cluster") or DEFAULT_CLUSTER),
                                epochs=int(ctx.option("epochs")), seed=ctx.seed,
                                progress=lambda msg: ctx.progress(msg, 0.5))
    for key in _WALL_CLOCK:
        ctx.timings[key] = figures.pop(key)
    return figures


_WALL_CLOCK = ("samples_per_second_together", "samples_per_second_alone",
               "lz4_compress_mb_s", "transport_roundtrip_ms_1mb", "seconds")

SPEC = BenchSpec(
    name="runtime",
    title="Real training on the emulated cluster: accuracy, parameter-server scaling, "
          "transport.",
    simulated=None,
    real="edgewise.runtime.bench:real",
    has_quick=False,
    options=(BenchOption("cluster", None, "cluster with three identical workers "
                         "(default: the shipped three-nanos.yaml)", kind="path"),
             BenchOption("epochs", 8, "epochs of the joint run", minimum=1, maximum=100)),
    labels={"ps_scaling_efficiency_3_workers":
            "ratio of two wall-clock throughputs measured in the same run (emulated devices "
            "on one host)"},
)
"""``edgewise bench runtime``."""

