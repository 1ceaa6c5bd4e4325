"""`edgewise profile`: profile the model-update task on this host under a stress grid."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from edgewise.cli.common import Address, err, out, state_dir, user_errors, writable_folder
from edgewise.cli.tables import print_fitted
from edgewise.cluster.schema import load_cluster
from edgewise.errors import ConfigError
from edgewise.nn.workload import Workload, load_workload, resolved, validate
from edgewise.perf.profiler import ProfileResult, default_config, quick_config
from edgewise.perf.profiler import profile as run_profile

__all__ = ["interval_summary", "profile", "shipped_profiles", "summary_rows", "summary_table"]


def _median(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return statistics.median(finite) if finite else math.nan


def _number(value: str | float | int) -> float:
    """A row's cell as a number; NaN for a blank one (a column an older profile lacks)."""
    return math.nan if value == "" else float(value)


def interval_summary(result: ProfileResult) -> dict[str, float | int]:
    """How well the rows' mean step times are known: the median and the largest relative
    half-width of their 95 % intervals, the target, the rows above it (they stopped at the
    cap: ``perf.stability``), and the rows recorded without an interval (older profiles)."""
    widths = [_number(s.row.get("step_time_ci95_rel", "")) for s in result.samples]
    known = [w for w in widths if not math.isnan(w)]
    return {"target": result.ci_rel_target, "median": _median(known),
            "max": max(known, default=math.nan),
            "above_target": sum(w > result.ci_rel_target for w in known),
            "reported": len(known), "unreported": len(widths) - len(known)}


def _interval_caption(summary: dict[str, float | int]) -> str:
    if not summary["reported"]:
        return "no row reports its step time's interval (recorded before they did)"
    text = (f"mean step time within ±{100 * summary['median']:.1f} % (median over rows; "
            f"at most ±{100 * summary['max']:.1f} %) at 95 % confidence; "
            f"{summary['above_target']} of {summary['reported']} rows stopped at the cap above "
            f"the ±{100 * summary['target']:g} % target")
    unreported = summary["unreported"]
    return text + (f"; {unreported} rows recorded without an interval" if unreported else "")


def summary_rows(result: ProfileResult) -> list[dict[str, float | int | str]]:
    """Per stress point: rows, and the medians of compute time, update time, CPU while
    training, the app's p95 execution time and the step time's relative 95 % interval."""
    groups: dict[str, list[dict[str, str | float | int]]] = {}
    for sample in result.samples:
        groups.setdefault(sample.point, []).append(sample.row)
    summary: list[dict[str, float | int | str]] = []
    for point, rows in groups.items():
        def med(col: str, rows: list[dict[str, str | float | int]] = rows) -> float:
            return _median([_number(r.get(col, "")) for r in rows])
        summary.append({"stress point": point, "rows": len(rows),
                        "compute µs/sample": 1e6 * med("compute_s_per_sample"),
                        "update ms": 1e3 * med("update_s"), "cpu %": med("cpu"),
                        "cpu training %": med("new_cpu"), "sift exec ms": med("app_exec_ms"),
                        "step ±%": 100 * med("step_time_ci95_rel")})
    return summary


def summary_table(result: ProfileResult) -> Table:
    """The summary as a Rich table (medians over each stress point's rows)."""
    rows = summary_rows(result)
    table = Table(title=f"{result.path}: {len(result.samples)} rows ({result.written} new, "
                        f"{result.skipped} already recorded); medians per stress point")
    for col in (rows[0] if rows else {"stress point": ""}):
        if col == "stress point":
            table.add_column(col, no_wrap=True, min_width=len("cpu=100/mem=4096/io=0"))
        else:
            table.add_column(col, justify="right")
    table.caption = ("cpu %: before training; cpu training %: p95 while training; sift exec "
                     "ms: p95 of the co-located SIFT app's execution time while training; "
                     "step ±%: half-width of the 95 % interval of the mean step time ÷ the "
                     "mean. " + _interval_caption(interval_summary(result)))
    for row in rows:
        table.add_row(*(v if isinstance(v, str) else str(v) if isinstance(v, int)
                        else f"{v:.1f}" for v in row.values()))
    return table


@user_errors
def profile(
    output: Path | None = typer.Option(
        None, help="profile CSV; an existing one is resumed (recorded samples are skipped); "
        "default: <state dir>/profiles/<device type>[-quick].csv. The checkout's profiles/ "
        "are shipped inputs and are never written"),
    device_type: str = typer.Option("", help="catalog name recorded in each row (default: "
                                             "host-x86, or the --device's type)"),
    quick: bool = typer.Option(False, help="a small grid (under a minute) instead of the "
                                           "full one (a few minutes)"),
    repeats: int = typer.Option(1, min=1, max=100, help="samples per grid point"),
    batch_sizes: list[int] = typer.Option(
        [], "--batch-size", help="profile only this batch size (repeat the option for "
        "several; default: the grid's, 8 16 32 64, or 16 64 with --quick)"),
    device: str = typer.Option("", help="profile this device of a cluster where it runs "
                                        "(with --testbed, or --address and --cluster) instead "
                                        "of this host"),
    testbed: str = typer.Option("", "--testbed", help="the testbed whose --device to profile"),
    address: str = Address,
    cluster: Path | None = typer.Option(None, help="the cluster YAML of --address"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as one JSON object"),
    workload: Path | None = typer.Option(
        None, "--workload", help="profile the training step of this workload (your model and "
        "data, docs/workloads.md) instead of DigitsCNN on digits; fit its rows with `update "
        "fit --models NAME` and plan with them by `update plan --models NAME`"),
) -> None:
    """Profile the model-update task (DigitsCNN training steps, or --workload's) under CPU
    and memory stress points with the SIFT app co-located (Deep-Edge §IV-B1): on this host,
    or on a device of a testbed or of any Ray cluster, where the stressors and the app share
    the device's own CPU and memory and every update goes through a real parameter server."""
    output = _output(output, device_type or device or "host-x86", quick)
    writable_folder(output.parent, "--output")
    if device and not (testbed or address):
        raise ConfigError("give --testbed NAME or --address (and --cluster)", field="--device")
    if not device and (testbed or address):
        raise ConfigError("name the device to profile", field="--device")
    chosen = _checked_workload(workload)
    sizes = _batch_sizes(batch_sizes)
    bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err)
    with bars:
        task = bars.add_task("starting", total=None)

        def progress(done: int, total: int, label: str) -> None:
            bars.update(task, completed=done, total=total, description=label)

        if device:
            result = _on_device(output, device, device_type, quick, repeats, testbed,
                                address, cluster, progress, chosen, sizes)
        else:
            config = (quick_config if quick else default_config)(device_type or "host-x86",
                                                                 repeats)
            result = run_profile(output, replace(config, workload=chosen,
                                                 batch_sizes=sizes or config.batch_sizes),
                                 progress)
    _report(result, as_json)


def _report(result: ProfileResult, as_json: bool) -> None:
    """The profile's summary: one JSON object, or the table."""
    if as_json:
        print(json.dumps({"path": str(result.path), "rows": len(result.samples),
                          "written": result.written, "skipped": result.skipped,
                          "step_time_ci95_rel": _plain(interval_summary(result)),
                          "points": [_plain(r) for r in summary_rows(result)]}))
    else:
        print_fitted(summary_table(result), out)


def shipped_profiles() -> Path | None:
    """The checkout's ``profiles/`` folder (the shipped profiles, read-only inputs of `update
    fit` and the docs' figures), where edgewise runs from a checkout; None elsewhere."""
    root = Path(__file__).resolve().parents[3]
    folder = root / "profiles"
    return folder if (root / "pyproject.toml").is_file() and folder.is_dir() else None


def _output(chosen: Path | None, name: str, quick: bool) -> Path:
    """``--output``, or the state dir's profile for ``name``; never a shipped profile."""
    if chosen is None:
        return state_dir() / "profiles" / f"{name}{'-quick' if quick else ''}.csv"
    shipped = shipped_profiles()
    if shipped is not None and chosen.resolve().is_relative_to(shipped):
        raise ConfigError(f"{chosen} is in the shipped profiles folder {shipped}, which edgewise "
                          "only reads; profile into another file (the default is the state "
                          "folder) and copy it there if you mean to replace a shipped profile",
                          field="--output")
    return chosen


MAX_BATCH = 4096
"""The largest ``--batch-size``."""


def _batch_sizes(chosen: list[int]) -> tuple[int, ...]:
    """``--batch-size`` values, each once, ascending (empty: the grid's own)."""
    bad = [b for b in chosen if not 1 <= b <= MAX_BATCH]
    if bad:
        raise ConfigError(f"{bad[0]} is not a batch size in [1, {MAX_BATCH}]",
                          field="--batch-size")
    return tuple(sorted(set(chosen)))


def _checked_workload(path: Path | None) -> Workload | None:
    """The workload of ``--workload``, dry-run and resolved (None: DigitsCNN on digits)."""
    if path is None:
        return None
    loaded = load_workload(path)
    return resolved(loaded, validate(loaded))


def _on_device(output: Path, device: str, device_type: str, quick: bool, repeats: int,
               testbed: str, address: str, cluster: Path | None,
               progress: Callable[[int, int, str], None],
               workload: Workload | None = None,
               batch_sizes: tuple[int, ...] = ()) -> ProfileResult:
    """Profile ``device`` of the testbed ``testbed`` (joined as its driver) or of the Ray
    cluster at ``address`` whose devices ``cluster`` describes."""
    from edgewise.runtime.devprofile import device_grid, profile_device
    from edgewise.runtime.ray_cluster import connect
    from edgewise.testbed.driver import joined
    from edgewise.testbed.host import TestbedError
    from edgewise.testbed.record import read_record

    with ExitStack() as stack:
        if testbed:
            record = read_record(testbed, state_dir())
            if record is None:
                raise TestbedError(f"no testbed named {testbed!r}")
            runtime = stack.enter_context(joined(record))
        else:
            if cluster is None:
                raise ConfigError("--address needs the cluster's YAML", field="--cluster")
            runtime = connect(load_cluster(cluster), address)
            stack.callback(runtime.shutdown)
        if device not in runtime.cluster.device_names:
            raise ConfigError(f"the cluster has no device {device!r}", field="--device")
        spec = runtime.cluster.device(device)
        base = (quick_config if quick else default_config)(device_type or spec.type, repeats)
        grid = device_grid(spec.memory_mb, (0, 50, 100) if quick else (0, 30, 60, 90),
                           (0.0, 0.125) if quick else (0.0, 0.1, 0.25))
        return profile_device(runtime, device, output,
                              replace(base, grid=tuple(grid), workload=workload,
                                      batch_sizes=batch_sizes or base.batch_sizes),
                              progress=progress)


def _plain(row: Mapping[str, float | int | str]) -> dict[str, float | int | str | None]:
    """A summary row for JSON: NaN (no app period measured) as null."""
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
