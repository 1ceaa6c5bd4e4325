"""`edgewise continual ...`: micro-profile drifting streams, plan with Ekya's thief, run it."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import Progress, TaskID
from rich.table import Table

from edgewise.cli.common import Address, err, out, user_errors
from edgewise.cli.stages import stage
from edgewise.cli.tables import print_fitted
from edgewise.cli.workload_opts import ClassesOpt, InputShapeOpt, workload_from_cli
from edgewise.cluster.schema import load_cluster
from edgewise.continual import (
    DEVICE,
    ContinualPlan,
    EdgeModels,
    LiveProblem,
    MicroProfile,
    RunSettings,
    StreamState,
    WindowResult,
    edge_cluster,
    edge_models,
    execute,
    frame_streams,
    get_policy,
    microprofile,
    offline_inference_options,
    plan_window,
    prepare_window,
)
from edgewise.errors import ConfigError
from edgewise.nn.streams import DIGITS_SHAPE, DigitsStream, Stream, Window, digits_streams
from edgewise.nn.workload import Workload

__all__ = ["app", "demo_part", "plan_json", "plan_table", "planned", "run_json", "window_table"]

app = typer.Typer(help="Continuous learning (Ekya): plan retraining vs inference, run it.",
                  no_args_is_help=True)

Streams = typer.Option(3, min=1, max=16, help="number of drifting digits streams")
WindowS = typer.Option(5.0, min=0.5, max=600.0, help="retraining window in seconds")
Seed = typer.Option(0, help="seed of the streams' drift schedules")
PolicyOpt = typer.Option("thief", help="thief, thief-checkpoints, uniform or exact")
AMin = typer.Option(0.0, min=0.0, max=1.0, help="inference accuracy floor a_MIN")
Frames = typer.Option([], help="a stream of your own: a folder with one sub-folder of PNG/JPEG "
                               "frames per window (repeatable; replaces the digits streams)")
Delta = typer.Option(0.1, min=0.01, max=1.0, help="stealing quantum Δ (share of the device)")
JsonOpt = typer.Option(False, "--json", help="print one JSON object on stdout")
StudentOpt = typer.Option(None, "--student", help="the student: hf:<ConfigClass>, "
                          "py:module:factory, py:FILE.py:factory or a built-in name "
                          "(default: the digits CNN)")
StudentArgs = typer.Option([], "--student-arg", metavar="KEY=VALUE",
                           help="a config or factory argument of the student (repeatable)")
StudentWeights = typer.Option(None, "--student-weights",
                              help="the deployed student's weights, a .safetensors file")
GoldenOpt = typer.Option(None, "--golden", help="the golden model that labels the retraining "
                         "frames, as --student (default: the digits teacher)")
GoldenArgs = typer.Option([], "--golden-arg", metavar="KEY=VALUE",
                          help="a config or factory argument of the golden model (repeatable)")
GoldenWeights = typer.Option(None, "--golden-weights",
                             help="the golden model's weights, a .safetensors file")


def model_specs(student: str | None, student_args: list[str], student_weights: Path | None,
                golden: str | None, golden_args: list[str], golden_weights: Path | None,
                input_shape: str | None, classes: int | None,
                ) -> tuple[Workload | None, Workload | None]:
    """The student's and the golden model's workload specs from the flags (None: built-in);
    both take the same frames (``--input-shape``) and classes (``--classes``)."""
    specs: list[Workload | None] = []
    for flag, model, args, weights in (("--student", student, student_args, student_weights),
                                       ("--golden", golden, golden_args, golden_weights)):
        if model is None:
            specs.append(None)
            continue
        try:
            specs.append(workload_from_cli(model, args=args, weights=weights,
                                           input_shape=input_shape, classes=classes))
        except ConfigError as exc:
            raise ConfigError(exc.problem, field=flag) from None
    return specs[0], specs[1]


def planned(windows: list[Window], policy: str, settings: RunSettings,
            models: EdgeModels | None = None) -> tuple[ContinualPlan, dict[str, MicroProfile]]:
    """Micro-profile each stream's window with the deployed model and plan it."""
    models = models or edge_models(seed=settings.seed)
    golden, model = models.golden, models.student
    holdout = DigitsStream("holdout", 10_000 + settings.seed, n_windows=1).window(0) \
        if models.shape == DIGITS_SHAPE else windows[0]
    infer = offline_inference_options(model, holdout, golden, settings)
    profiles, states = {}, []
    for w in windows:
        data = prepare_window(w, golden, seed=settings.seed)
        profile = microprofile(model, data, settings.retrain_configs, seed=settings.seed)
        profiles[w.stream] = profile
        states.append(StreamState(w.stream, profile.model_accuracy, profile.options(), infer))
    return plan_window(policy, states, settings), profiles


def plan_table(plan: ContinualPlan, profiles: dict[str, MicroProfile], policy: str) -> Table:
    table = Table(title=f"{policy} plan: estimated window-averaged accuracy {plan.accuracy:.3f}"
                        f" ({plan.violations} a_MIN violations)")
    for col in ("stream", "deployed acc", "retrain config", "est. acc after", "cost s",
                "retrain share", "inference config", "inference share"):
        table.add_column(col, justify="left" if "config" in col or col == "stream" else "right")
    for d in plan.decisions:
        prof = profiles[d.stream]
        opt = next((o for o in prof.options() if o.config == d.retrain), None)
        table.add_row(d.stream, f"{prof.model_accuracy:.3f}", d.retrain or "-",
                      "-" if opt is None else f"{opt.accuracy:.3f}",
                      "-" if opt is None else f"{opt.cost_s:.2f}", f"{d.retrain_share:.2f}",
                      d.inference, f"{d.inference_share:.2f}")
    return table


def _windows(streams: int, seed: int, window: int, frames: list[Path],
             models: EdgeModels) -> list[Window]:
    if frames:
        found = []
        for stream in frame_streams(frames, models):
            if window >= stream.n_windows:
                raise ConfigError(f"{stream.name} has {stream.n_windows} windows, asked for "
                                  f"{window}", field="--window")
            found.append(stream.window(window))
        return found
    if models.shape != DIGITS_SHAPE:
        raise ConfigError(f"the digits streams are 8x8 grey; a student on {list(models.shape)} "
                          "frames needs --frames", field="--frames")
    return [s.window(window) for s in digits_streams(streams, seed=seed, n_windows=window + 1)]


@app.command()
@user_errors
def plan(streams: int = Streams, window_s: float = WindowS, seed: int = Seed,
         policy: str = PolicyOpt, a_min: float = AMin, delta: float = Delta,
         window: int = typer.Option(0, min=0, max=50, help="which window to plan"),
         frames: list[Path] = Frames, student: str | None = StudentOpt,
         student_args: list[str] = StudentArgs, student_weights: Path | None = StudentWeights,
         golden: str | None = GoldenOpt, golden_args: list[str] = GoldenArgs,
         golden_weights: Path | None = GoldenWeights, input_shape: str | None = InputShapeOpt,
         classes: int | None = ClassesOpt, as_json: bool = JsonOpt) -> None:
    """Micro-profile every stream's window and print the policy's plan."""
    settings = RunSettings(window_s=window_s, seed=seed, a_min=a_min, delta=delta)
    get_policy(policy)
    models = edge_models(*model_specs(student, student_args, student_weights, golden,
                                      golden_args, golden_weights, input_shape, classes), seed)
    with stage(f"micro-profiling {len(frames) or streams} streams' windows"):
        result, profiles = planned(_windows(streams, seed, window, frames, models), policy,
                                   settings, models)
    if as_json:
        print(json.dumps(plan_json(result, profiles, policy)))
    else:
        print_fitted(plan_table(result, profiles, policy), out)


def plan_json(plan: ContinualPlan, profiles: dict[str, MicroProfile],
              policy: str) -> dict[str, Any]:
    """The plan as one JSON-able object: the estimate, and per stream its decision and the
    profiled accuracy and cost of the chosen retraining configuration."""
    streams = []
    for d in plan.decisions:
        prof = profiles[d.stream]
        opt = next((o for o in prof.options() if o.config == d.retrain), None)
        streams.append({"stream": d.stream, "deployed_accuracy": prof.model_accuracy,
                        "retrain": d.retrain, "retrain_share": d.retrain_share,
                        "inference": d.inference, "inference_share": d.inference_share,
                        "retrained_accuracy": None if opt is None else opt.accuracy,
                        "retrain_cost_s": None if opt is None else opt.cost_s})
    return {"policy": policy, "estimated_accuracy": plan.accuracy,
            "violations": plan.violations, "streams": streams}


def window_table(results: list[WindowResult], policy: str) -> Table:
    table = Table(title=f"{policy}: measured window-averaged inference accuracy")
    for col in ("window", "measured", "estimated", "retrained (epochs)"):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(str(r.index), f"{r.mean_accuracy:.3f}", f"{r.plan.accuracy:.3f}",
                      ", ".join(f"{k}:{v}" for k, v in r.epochs_done.items()))
    return table


def _advance(bar: Progress, task: TaskID) -> Callable[[WindowResult], None]:
    return lambda result: bar.advance(task)


def _windows_of(runtime: Any, problem: LiveProblem, policy: str,
                windows: int) -> list[WindowResult]:
    """``policy``'s windows, behind a bar on a terminal, else with a plain line per window."""
    label = f"{policy}: {windows} windows"
    if err.is_terminal:
        with Progress(console=err, transient=True) as bar:
            task = bar.add_task(label, total=windows)
            return execute(runtime, problem, policy, progress=_advance(bar, task))
    with stage(label):
        return execute(runtime, problem, policy, progress=lambda r: err.print(
            f"{policy}: window {r.index} done", highlight=False))


def run_windows(streams: int, windows: int, window_s: float, seed: int,
                policies: Sequence[str], a_min: float = 0.0, console: Console = out,
                show: bool = True, frames: Sequence[Path] = (),
                specs: tuple[Workload | None, Workload | None] = (None, None),
                cluster: Path | None = None, address: str | None = None,
                device: str = "") -> dict[str, list[WindowResult]]:
    """Run each policy for real on one local Ray instance (or on the cluster at
    ``address``, whose ``device``, by default its fastest, the streams share); prints a
    progress bar and (with ``show``) the per-window accuracy of each. ``frames`` replace
    the digits streams; ``specs`` are the student's and the golden model's workloads (None:
    built-in)."""
    from edgewise.runtime.emulation import EmulationConfig
    from edgewise.runtime.ray_cluster import connect

    for policy in policies:
        get_policy(policy)  # an unknown name fails before Ray starts
    devices = edge_cluster() if cluster is None else load_cluster(cluster)
    device = device or max(devices.devices, key=lambda d: d.speed).name
    if device not in devices.device_names:
        raise ConfigError(f"the cluster has no device {device!r} for the streams to share",
                          field="--device")
    settings = RunSettings(window_s=window_s, seed=seed, a_min=a_min)
    models = edge_models(*specs, seed)  # the models are checked before Ray starts
    chosen: list[Stream] = list(frame_streams(frames, models)) if frames else list(
        digits_streams(streams, seed=seed, n_windows=windows))
    problem = LiveProblem(tuple(chosen), windows, settings, device=device, student=specs[0],
                          golden=specs[1])
    runtime = connect(devices, address or None, EmulationConfig())
    found: dict[str, list[WindowResult]] = {}
    try:
        for policy in policies:
            found[policy] = _windows_of(runtime, problem, policy, windows)
            if show:
                console.print(window_table(found[policy], policy))
    finally:
        runtime.shutdown()
    return found


@app.command()
@user_errors
def run(streams: int = Streams, windows: int = typer.Option(3, min=1, max=20),
        window_s: float = WindowS, seed: int = Seed, policy: str = PolicyOpt,
        a_min: float = AMin, frames: list[Path] = Frames, student: str | None = StudentOpt,
        student_args: list[str] = StudentArgs, student_weights: Path | None = StudentWeights,
        golden: str | None = GoldenOpt, golden_args: list[str] = GoldenArgs,
        golden_weights: Path | None = GoldenWeights, input_shape: str | None = InputShapeOpt,
        classes: int | None = ClassesOpt,
        cluster: Path | None = typer.Option(
            None, help=f"cluster YAML (default: one emulated edge server, {DEVICE!r})"),
        device: str = typer.Option("", help="the device the streams share (default: the "
                                            "cluster's fastest)"),
        address: str = Address, as_json: bool = JsonOpt) -> None:
    """Run the plan for real: per stream an inference and a retraining actor on one device
    (emulated, or of the cluster at --address, e.g. a testbed), sharing it by the plan's
    shares; accuracy is measured against true labels (the golden model's where frames have
    none)."""
    specs = model_specs(student, student_args, student_weights, golden, golden_args,
                        golden_weights, input_shape, classes)
    found = run_windows(streams, windows, window_s, seed, [policy], a_min,
                        console=err if as_json else out, show=not as_json, frames=frames,
                        specs=specs, cluster=cluster, address=address, device=device)
    if as_json:
        print(json.dumps(run_json(found[policy], policy)))


def run_json(results: list[WindowResult], policy: str) -> dict[str, Any]:
    """The measured windows as one JSON-able object (accuracies against the true labels)."""
    return {"policy": policy,
            "mean_accuracy": float(sum(r.mean_accuracy for r in results) / len(results)),
            "windows": [{"window": r.index, "accuracy": r.accuracy,
                         "mean_accuracy": r.mean_accuracy, "golden_accuracy": r.golden_accuracy,
                         "estimated_accuracy": r.plan.accuracy, "epochs_done": r.epochs_done,
                         "replans": r.replans, "frames": r.frames,
                         "frames_analysed": r.analysed} for r in results]}


def demo_part(console: Console = out, windows: int = 2,
              window_s: float = 3.0) -> dict[str, float]:
    """The `edgewise demo` part (≈1 min): 2 streams, 2 windows, thief vs uniform, for real;
    each policy's window-averaged accuracy."""
    found = run_windows(2, windows, window_s, 0, ["thief", "uniform"], console=console)
    means = {p: sum(r.mean_accuracy for r in rs) / len(rs) for p, rs in found.items()}
    console.print(f"[bold]Ekya thief {means['thief']:.3f} vs uniform {means['uniform']:.3f} "
                  "window-averaged inference accuracy (measured)[/]")
    return means
