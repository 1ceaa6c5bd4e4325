"""``edgewise bench time-to-accuracy``: the loops raced to a target accuracy (issue 24).

Protocol (``repeats`` runs, seeds ``s``, ``s+1``, ...; one generated data set): the shipped
MobileNetV2 ×0.35 spec on generated shapes (``per_class`` images per class, 80 % for training),
``epochs`` epochs, Adam at 0.003 with the cosine schedule, target ``target`` validation
accuracy, on the Deep-Edge testbed example with its SIFT apps running beside every arm (each
arm's misses reported). ``--where``: ``testbed`` brings that cluster up as a kernel-enforced
testbed (namespaces, shaped links, cgroup quotas; its time dilation in the JSON),
``emulated`` emulates it on this host (time dilation 1), ``auto`` (the default) takes the
testbed where the host can run one (root, ip, tc, cgroups) and emulates elsewhere:

- ``deep-edge/async``, ``deep-edge/sync``, ``fair/async``, ``fair/sync``: the policy plans,
  the engine trains the plan with that loop (``async``: its staleness treatment); the plan's
  fastest worker evaluates each epoch;
- ``deep-edge-goodput/sync``: the same with the ``deep-edge-goodput`` policy, planned with
  the gradient noise scale ``fair/sync`` measured in the same run (the median of its
  Adam-preconditioned readings up to its first epoch at the target:
  ``tta_arms.noise_on_the_way``), after it;
- ``ray-train-ddp``: Ray Train's TorchTrainer, DDP over gloo, one rank per worker device
  (placed by the devices' node labels on a testbed), equal shards, batch 32 per rank; the
  rank on the fastest device evaluates, at its device's speed;
- ``single-device``: a plain PyTorch loop on the fastest worker device alone, batch 32.

Every arm's evaluation is part of its epochs' time, at the speed of the device it runs on,
and every arm measures alike: BatchNorm's statistics re-estimated on the same training
samples, then the validation set (``runtime.evaluate``). DDP and the single device also read
each epoch with their running statistics, outside its time
(``tta_device_seconds_running_statistics``).

Each arm's time to accuracy is the device seconds until its first epoch at the target (the
epochs' wall seconds ÷ the time dilation). One run decides little: seeds differ (DDP took
4.14 to 5.88 device seconds to 0.90 over seeds 0–2 on 2026-12-06), so every figure is the
median over runs of several seeds (MLPerf Training likewise times several runs and averages
them without the fastest and slowest). Ctrl-C ends the race with the arms measured so far
(``interrupted``; no scaling part), printed like a whole run's, and the command exits 130.
``ps_scaling_efficiency_3_workers`` is the runtime bench's (three Nanos of
``three-nanos.yaml``, digits; on a testbed of its own where the race ran on one; the median
of ``repeats`` runs) and ``ps_scaling_link_bound`` the efficiency the links to the server
allow for the bytes each sample moves in that run (``suites.tta_scaling.link_bound``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgewise.bench import INTERRUPTED, BenchContext, BenchOption, BenchSpec, Figures
from edgewise.cluster.examples import example_path
from edgewise.errors import ConfigError
from edgewise.runtime.plan import DEFAULT_EVALUATION, evaluation_named, ps_shards_named
from edgewise.runtime.ray_cluster import RayRuntime
from edgewise.suites.tta_arms import (
    ArmResult,
    TTASetup,
    edgewise_arm,
    measured_noise_scale,
    shapes_setup,
)
from edgewise.suites.tta_figures import ARMS, GOODPUT_ARM, NOISE_FROM, figures_of
from edgewise.suites.tta_scaling import scaling
from edgewise.testbed.plan import DEFAULT_SUBNET
from edgewise.wire.frames import wire_dtype_named

__all__ = ["ARMS", "SPEC", "WHERE", "figures_of", "plots", "real", "where_to_run"]

WHERE = ("auto", "testbed", "emulated")
RACE_CLUSTER = "deep-edge-testbed.yaml"
SCALING_CLUSTER = "three-nanos.yaml"

def where_to_run(where: str, missing: list[str]) -> str:
    """``testbed`` or ``emulated`` for the ``--where`` asked, given what the host lacks for a
    testbed (``testbed.host.missing()``): ``auto`` takes the testbed where nothing lacks;
    ``testbed`` where something lacks is refused in one line naming it."""
    if where not in WHERE:
        raise ConfigError(f"must be one of {', '.join(WHERE)}, got {where!r}", field="--where")
    if where == "testbed" and missing:
        from edgewise.testbed.host import TestbedUnavailable

        raise TestbedUnavailable("this host cannot run a testbed: it lacks "
                                 + "; ".join(missing))
    if where == "auto":
        return "emulated" if missing else "testbed"
    return where


@dataclass
class _Clusters:
    """Brings up the bench's clusters one at a time where the race runs (a testbed each,
    or emulated on this host) and counts what each testbed's down left behind."""

    ctx: BenchContext
    where: str
    subnet: str
    dilation: dict[str, float] = field(default_factory=dict)
    left: dict[str, int] = field(default_factory=dict)

    @contextmanager
    def up(self, example: str, share: float) -> Iterator[tuple[RayRuntime, str | None]]:
        """The runtime of ``example`` and the interface gloo binds on it (None: default);
        ``share`` is the bench's progress when it starts."""
        key = example.removesuffix(".yaml")
        if self.where == "emulated":
            yield from self._emulated(example, key)
            return
        from edgewise.testbed.lifecycle import require_cgroups
        from edgewise.testbed.net import DEV
        from edgewise.testbed.session import testbed
        from edgewise.testbed.teardown import leftovers

        name = f"ewtta-{key}"[:20]
        self.ctx.progress(f"bringing up the testbed {example}", share)
        with testbed(example_path(example), name, subnet=self.subnet, fresh=True) as tb:
            self.ctx.timings[f"{key}_up_seconds"] = tb.record.up_seconds
            self.dilation[key] = round(tb.runtime.time_dilation, 4)
            yield tb.runtime, DEV
        self.left[key] = sum(leftovers(name, require_cgroups()).values())

    def _emulated(self, example: str, key: str) -> Iterator[tuple[RayRuntime, str | None]]:
        from edgewise.cluster.schema import load_cluster
        from edgewise.runtime.ray_cluster import start_local

        runtime = start_local(load_cluster(example_path(example)))
        self.dilation[key] = runtime.time_dilation
        try:
            yield runtime, None
        finally:
            runtime.shutdown()


def _arm(arm: str, setup: TTASetup, runtime: RayRuntime, workers: list[str],
         gloo_ifname: str | None, earlier: dict[str, ArmResult]) -> ArmResult:
    from edgewise.suites.tta_ddp import fastest_device, ray_train_ddp_arm, single_device_arm

    if arm == "ray-train-ddp":
        return ray_train_ddp_arm(runtime, setup, workers, gloo_ifname)
    if arm == "single-device":
        return single_device_arm(runtime, setup, fastest_device(runtime, workers))
    policy, mode = arm.split("/")
    noise = None
    if arm == GOODPUT_ARM:
        noise = measured_noise_scale(earlier[NOISE_FROM]) if NOISE_FROM in earlier else None
        if noise is None:
            raise ConfigError(f"{GOODPUT_ARM} plans with the noise scale {NOISE_FROM} "
                              f"measures in the same run: race {NOISE_FROM} too, for enough "
                              "synchronous steps to measure one (Adam's fifth step on)",
                              field="--arms")
    return edgewise_arm(runtime, setup, policy, mode, noise_scale=noise)


def _arms(setups: list[TTASetup], ctx: BenchContext, runtime: RayRuntime,
          gloo_ifname: str | None, only: set[str],
          failed: dict[str, str]) -> list[dict[str, ArmResult]]:
    """Every arm in ``only`` once per setup (one seed each), on ``runtime``'s cluster. An arm
    that fails with edgewise's own error is recorded in ``failed`` (arm, seed -> the error's
    first line) and left out of its run; the other arms' runs are kept."""
    from edgewise.cluster.model import Role
    from edgewise.errors import EdgewiseError

    workers = [d.name for d in runtime.cluster.with_role(Role.WORKER)]
    names, label = [a for a in ARMS if a in only], "the race"
    runs: list[dict[str, ArmResult]] = []
    try:
        for r, setup in enumerate(setups):
            results: dict[str, ArmResult] = {}
            runs.append(results)
            for i, arm in enumerate(names):
                label = arm if len(setups) == 1 else f"{arm}, seed {setup.seed}"
                share = (r * len(names) + i) / (len(setups) * len(names))
                ctx.progress(label, share)
                try:
                    results[arm] = _arm(arm, setup, runtime, workers, gloo_ifname, results)
                except EdgewiseError as exc:
                    failed[f"{arm}, seed {setup.seed}"] = why = str(exc).splitlines()[0][:300]
                    ctx.progress(f"{label} failed: {why}", share)
    except KeyboardInterrupt:  # Ctrl-C: the arms measured so far are kept
        failed[INTERRUPTED] = f"{label}: interrupted"
        ctx.progress(f"{label}: interrupted; stopping, keeping the arms done", 1.0)
        if runs and not runs[-1]:  # the seed it cut before any arm of it
            runs.pop()
    return runs


def real(ctx: BenchContext) -> Figures:
    """The protocol above; wall-clock figures go to ``ctx.timings``."""
    per_class = 40 if ctx.quick else int(ctx.option("per_class"))
    epochs = 2 if ctx.quick else int(ctx.option("epochs"))
    target = float(ctx.option("target"))
    arms = str(ctx.option("arms") or ",".join(ARMS)).split(",")
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        raise ConfigError(f"unknown arms {', '.join(unknown)}; use {', '.join(ARMS)}",
                          field="--arms")
    from edgewise.testbed.host import missing

    where = where_to_run(str(ctx.option("where")), missing())
    clusters = _Clusters(ctx, where, str(ctx.option("subnet")))
    repeats = 1 if ctx.quick else int(ctx.option("repeats"))
    wire = wire_dtype_named(str(ctx.option("wire_dtype")), "--wire-dtype")
    evaluation = evaluation_named(str(ctx.option("evaluation")), "--evaluation")
    shards = ps_shards_named(str(ctx.option("ps_shards")), "--ps-shards")
    failed: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="edgewise-tta-") as tmp:
        spec = shapes_setup(Path(tmp), per_class, ctx.seed)  # one data set, seeds per run
        setups = [TTASetup(spec, epochs, ctx.seed + r, target, wire_dtype=wire,
                           evaluation=evaluation, ps_shards=shards) for r in range(repeats)]
        with ctx.timings.timed("arms_seconds"), clusters.up(RACE_CLUSTER, 0.0) as (runtime, ifname):
            runs = _arms(setups, ctx, runtime, ifname, set(arms), failed)
    figures: dict[str, Any] = figures_of(runs, target)
    figures["ddp_rank_devices"] = [(r["ray-train-ddp"].extra or {}).get("rank_devices")
                                   for r in runs if "ray-train-ddp" in r]
    if not ctx.option("skip_scaling") and INTERRUPTED not in failed:
        ctx.progress("parameter-server scaling (runtime bench)", 0.95)
        with ctx.timings.timed("scaling_seconds"), clusters.up(SCALING_CLUSTER, 0.95) as (rt, _):
            figures |= scaling(rt, ctx.seed, 2 if ctx.quick else 8,
                               duplex=where == "testbed", repeats=repeats)
    for key in ("tta_device_seconds", "tta_device_seconds_runs",
                "tta_device_seconds_running_statistics", "evaluation_device_seconds",
                "step_device_seconds"):
        ctx.timings[key] = figures.pop(key)
    race = RACE_CLUSTER.removesuffix(".yaml")
    extra = {} if where == "emulated" else {"down_leftovers": sum(clusters.left.values()),
                                            "down_leftovers_by_testbed": clusters.left}
    kind = "kernel-enforced testbed" if where == "testbed" else "emulated"
    return {**figures, **extra, "arm_errors": failed, INTERRUPTED: INTERRUPTED in failed,
            "where": where, "cluster": f"{race} ({kind})",
            "time_dilation": clusters.dilation[race],
            "scaling_time_dilation": clusters.dilation.get(SCALING_CLUSTER.removesuffix(".yaml")),
            "epochs": epochs, "per_class": per_class, "target": target, "arms": arms,
            "wire_dtype": wire, "evaluation": evaluation, "ps_shards": shards,
            "seeds": [s.seed for s in setups]}


def plots(figures: Figures, folder: Path) -> Figures:
    """Accuracy against device time, one line per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (name, curves) in enumerate(figures.get("curves", {}).items()):
        for k, curve in enumerate(curves):  # one line per run, one colour per arm
            ax.plot(curve["device_seconds"], curve["val_accuracy"], marker="o", markersize=3,
                    color=f"C{i}", alpha=1.0 if k == 0 else 0.45,
                    label=name if k == 0 else None)
    if figures.get("target") is not None:
        ax.axhline(figures["target"], color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("device seconds")
    ax.set_ylabel("validation accuracy")
    if figures.get("curves"):  # a race cut before its first arm has no line to name
        ax.legend()
    target = folder / "time-to-accuracy.png"
    fig.savefig(target, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return {"accuracy_over_device_time": str(target)}


SPEC = BenchSpec(
    name="time-to-accuracy",
    title="Time to accuracy: edgewise's loops under the deep-edge and fair plans against Ray "
          "Train's DDP and one device alone, MobileNetV2 on generated shapes.",
    simulated=None,
    real="edgewise.suites.time_to_accuracy:real",
    plots="edgewise.suites.time_to_accuracy:plots",
    real_share=1.0,
    options=(BenchOption("per_class", 300, "generated images per class (4 classes)",
                         minimum=10, maximum=2000),
             BenchOption("epochs", 30, "epochs of every arm", minimum=1, maximum=200),
             BenchOption("target", 0.9, "the target validation accuracy", kind="float",
                         minimum=0.0, maximum=1.0),
             BenchOption("repeats", 3, "runs of every arm, seeds seed, seed+1, ...; the "
                         "figures are medians over them (--quick: 1)", minimum=1, maximum=10),
             BenchOption("arms", None, "comma-separated arms to run (default: all six)",
                         kind="str"),
             BenchOption("skip_scaling", False, "leave out the parameter-server scaling "
                         "runs", kind="bool"),
             BenchOption("wire_dtype", "auto", "what the engine's arms send weights and "
                         "gradients as: float32, bfloat16, float16, or auto (bfloat16 for "
                         "the sync arms, float32 for the async ones)", kind="str"),
             BenchOption("ps_shards", "auto", "the engine's arms' parameter server: one, on "
                         "the plan's server device, workers: cut into ranges, one on each "
                         "worker's device (the sync arms only), or auto: workers for the sync "
                         "arms, one for the async ones", kind="str"),
             BenchOption("evaluation", DEFAULT_EVALUATION, "when the engine's arms read an "
                         "epoch: after (in its time) or beside (while the next trains; a "
                         "reading counts when known)", kind="str"),
             BenchOption("where", "auto", "testbed (the kernel-enforced testbed; root), "
                         "emulated (this host), or auto: the testbed where the host can run "
                         "one", kind="str"),
             BenchOption("subnet", DEFAULT_SUBNET, "private IPv4 subnet of the testbeds",
                         kind="str")),
    labels={"tta_device_seconds": "device seconds: wall seconds ÷ the time dilation, on the "
                                  "kernel-enforced testbed or emulated (the JSON's `where`)",
            "ps_scaling_efficiency_3_workers": "ratio of two throughputs in the same run "
                                               "(three Nanos, digits; where the race ran)"},
)
"""``edgewise bench time-to-accuracy``."""
