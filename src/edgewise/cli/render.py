"""Rich tables for clusters, metrics and training results."""

from __future__ import annotations

from rich.table import Table

from edgewise.cluster.catalog import catalog
from edgewise.cluster.model import Cluster
from edgewise.runtime.engine import TrainResult

__all__ = ["catalog_table", "cluster_table", "metrics_table", "result_table"]


def cluster_table(cluster: Cluster, stretch: dict[str, float] | None = None) -> Table:
    table = Table(title=f"cluster {cluster.name}: {len(cluster.devices)} devices")
    ports = any(d.port_mbps is not None for d in cluster.devices)
    columns = ("device", "type", "roles", "cores", "accelerator", "memory MB", "speed")
    for col in (*columns, "port Mbit/s") if ports else columns:
        table.add_column(col, justify="left" if col in columns[:3] + columns[4:5] else "right")
    if stretch is not None:
        table.add_column("emulation stretch", justify="right")
    for d in cluster.devices:
        row = [d.name, d.type, ", ".join(d.roles), str(d.cpu_cores), d.accelerator,
               str(d.memory_mb), f"{d.speed:.3f}"]
        if ports:
            row.append("—" if d.port_mbps is None else f"{d.port_mbps:g}")
        if stretch is not None:
            row.append(f"{stretch[d.name]:.2f}x")
        table.add_row(*row)
    default = cluster.default_link
    table.caption = (f"links: {default.bandwidth_mbps:g} Mbit/s, {default.latency_ms:g} ms by "
                     f"default, {len(cluster.links)} overridden; sites: "
                     f"{', '.join(s.name for s in cluster.sites) or 'none'}; background apps: "
                     f"{len(cluster.background_apps)}")
    return table


def catalog_table() -> Table:
    table = Table(title="device catalog (speed: relative training speed, Jetson Nano = 1)")
    for col in ("type", "cores", "accelerator", "memory MB", "peak GFLOPS", "speed"):
        table.add_column(col)
    for t in catalog().values():
        table.add_row(t.name, str(t.cpu_cores), t.accelerator, str(t.memory_mb),
                      f"{t.peak_gflops:g}", f"{t.speed:.3f}")
    return table


def metrics_table(cluster: Cluster, metrics: dict[str, dict[str, float]],
                  emulated: bool = False) -> Table:
    """The device agents' metrics; on an emulated cluster every agent runs on this host and
    reads the host's own load and memory, so the table says so and shows them once."""
    if emulated:
        return _host_metrics_table(cluster, metrics)
    table = Table(title="live device metrics (from the device agents' heartbeats)")
    for col in ("device", "cpu %", "memory %", "memory used MB", "accelerator %", "age s"):
        table.add_column(col, justify="left" if col == "device" else "right")
    for d in cluster.devices:
        m = metrics.get(d.name)
        if m is None:
            table.add_row(d.name, "-", "-", "-", "-", "no report yet")
            continue
        accel = m.get("accelerator_percent")
        table.add_row(d.name, f"{m['cpu_percent']:.0f}", f"{m['memory_percent']:.0f}",
                      f"{m['memory_used_mb']:.0f}", "-" if accel is None else f"{accel:.0f}",
                      f"{m['age_seconds']:.1f}")
    return table


def _host_metrics_table(cluster: Cluster, metrics: dict[str, dict[str, float]]) -> Table:
    table = Table(title="device agents (emulated on this host: their heartbeats)")
    for col in ("device", "memory MB (file)", "heartbeat age s"):
        table.add_column(col, justify="left" if col == "device" else "right")
    for d in cluster.devices:
        m = metrics.get(d.name)
        table.add_row(d.name, str(d.memory_mb),
                      "no report yet" if m is None else f"{m['age_seconds']:.1f}")
    host = next(iter(metrics.values()), None)
    table.caption = ("the devices are emulated on this host, so no device has a load or "
                     "memory of its own to show; this host: " + (
                         "no report yet" if host is None else
                         f"cpu {host['cpu_percent']:.0f} %, memory {host['memory_percent']:.0f}"
                         f" % ({host['memory_used_mb']:.0f} MB used)"))
    return table


def result_table(result: TrainResult) -> Table:
    table = Table(title=f"model update {result.job_id}: {len(result.epochs)} epochs in "
                        f"{result.seconds:.1f} s, {len(result.interruptions)} interruption(s)")
    for col in ("epoch", "workers", "val accuracy", "epoch s", "device s", "samples/s",
                "samples trained", "staleness mean/max", "learning rate"):
        table.add_column(col, justify="left" if col == "workers" else "right")
    for r in result.epochs:
        table.add_row(str(r.epoch), ", ".join(r.workers), f"{r.val_accuracy:.3f}",
                      f"{r.wall_seconds:.2f}", f"{r.device_seconds:.2f}",
                      f"{r.samples_per_second:.0f}", str(len(r.applied_ids)),
                      f"{r.staleness_mean:.2f}/{r.staleness_max}",
                      "-" if r.learning_rate is None else f"{r.learning_rate:.3g}")
    noise = [r.noise_scale for r in result.epochs if r.noise_scale is not None]
    if noise:  # the sync loop's: a global batch far above it spends samples for little
        table.caption = (f"gradient noise scale B_simple (runtime.noise_scale): {noise[0]:.0f} "
                         f"samples in the first epoch, {noise[-1]:.0f} in the last")
    adam = [r.noise_scale_adam for r in result.epochs if r.noise_scale_adam is not None]
    if adam:
        table.caption = (f"{table.caption}; preconditioned by Adam's step (Pollux): "
                         f"{adam[0]:.0f} and {adam[-1]:.0f}")
    return table
