"""`edgewise demo`: the main job, one part per problem; Deep-Edge's plan runs on a
kernel-enforced testbed where this machine can make one (root, namespaces, cgroups), else
on the single-host emulator, with one line saying why."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace

import typer

from edgewise.cli.common import err, out, user_errors
from edgewise.cli.demo_summary import (
    Finding,
    apps_finding,
    continual_finding,
    pipeline_finding,
    sites_finding,
    srole_finding,
    summary_table,
    training_finding,
)
from edgewise.cli.tables import print_fitted
from edgewise.cli.train import EXAMPLES, run_equal_update
from edgewise.errors import EdgewiseError
from edgewise.runtime.plan import TrainConfig

__all__ = ["DEMO_TESTBED", "QUICK", "DemoSettings", "demo", "demo_cluster"]

DEMO_TESTBED = "edgewise-demo"
TESTBED_EPOCHS = 3  # a testbed runs its devices' time `time_dilation` times slower


@contextmanager
def demo_cluster(use_testbed: bool = True) -> Iterator[str | None]:
    """The Deep-Edge testbed up and this process joined to it (yields the head's address),
    or, where the machine cannot make one, None (emulation) after one line saying why."""
    from edgewise.testbed.host import missing
    from edgewise.testbed.session import testbed

    lacks = missing() if use_testbed else []
    if not use_testbed or lacks:
        err.print("single-host emulation: " + ("--no-testbed" if not use_testbed else
                                               "this host cannot run a testbed, it lacks "
                                               + "; ".join(lacks)))
        yield None
        return
    with ExitStack() as stack:
        try:
            tb = stack.enter_context(testbed(EXAMPLES / "deep-edge-testbed.yaml",
                                             DEMO_TESTBED))
        except EdgewiseError as exc:
            err.print(f"single-host emulation: the testbed did not come up ({exc})")
            yield None
            return
        plan = tb.record.plan
        out.print(f"on a kernel-enforced testbed: {len(plan.nodes)} Ray nodes in their own "
                  f"network namespaces, cgroup CPU quotas and memory limits, tc-shaped links; "
                  f"it runs {plan.time_dilation:.2f}x slower than the devices (up in "
                  f"{tb.record.up_seconds:.0f} s)")
        yield plan.head_address


@dataclass(frozen=True, slots=True)
class DemoSettings:
    """How much each part runs: the full demo, or ``quick`` (its parts at their smallest,
    for the test suite and a first look)."""

    epochs: int = 5
    kill_worker: str = "nano-1@2"
    requests: int = 30
    windows: int = 2
    window_s: float = 3.0
    srole_online: int = 20
    srole_rounds: int = 200
    apps_epochs: int | None = None
    """Epochs of part 2, whose four SIFT apps take more than a core of a small host while
    it runs (default: ``epochs``)."""


FULL = DemoSettings()
QUICK = DemoSettings(epochs=2, kill_worker="nano-1@1", requests=12, windows=1, window_s=2.0,
                     srole_online=4, srole_rounds=40, apps_epochs=1)


@user_errors
def demo(
    kill_worker: str = typer.Option(FULL.kill_worker,
                                    help="crash injected to show fault tolerance, "
                                         "DEVICE@EPOCH ('' for none)"),
    epochs: int = typer.Option(FULL.epochs, min=1, max=100,
                               help=f"epochs of the updates (at most {TESTBED_EPOCHS} on a "
                                    "testbed)"),
    use_testbed: bool = typer.Option(True, "--testbed/--no-testbed",
                                     help="run Deep-Edge's plan on a testbed if possible"),
    quick: bool = typer.Option(False, "--quick", help="every part at its smallest (2 epochs, "
                               "1 with the apps, 12 requests, 1 Ekya window, 4 SROLE "
                               "rounds; no testbed): the parts and the summary in about two "
                               "minutes on a 2-core host"),
) -> None:
    """The main job, one part per problem, each saying what it shows and how its result
    reads against the paper, then a summary table: (1) a real parameter-server model
    update on the Deep-Edge testbed emulated on this host, a worker killed mid-epoch and the
    job recovering from its checkpoint; (2) the Deep-Edge plan for it with one heavily
    loaded Nano, run with SIFT really running beside the training on every worker, on a
    kernel-enforced testbed where the machine allows (else emulated); (3) a CNN partitioned
    over emulated Jetson Nanos behind slow links, one stage killed mid-stream and every
    request answered once; (4) Ekya's thief vs uniform on drifting digits streams,
    retraining and inference really sharing a device; (5) Okita planning a job over three
    edge sites and running it with a migration; (6) SROLE's methods placing VGG-16
    training on a 10-node network, simulated."""
    settings = QUICK if quick else replace(FULL, epochs=epochs, kill_worker=kill_worker)
    start = time.monotonic()
    findings = [_training_part(settings), _deep_edge_part(settings, use_testbed and not quick)]
    findings += _other_parts(settings)
    out.rule("summary")
    print_fitted(summary_table(findings, time.monotonic() - start), out)


def _said(finding: Finding) -> Finding:
    out.print(f"[bold]{finding.result}[/]; {finding.verdict}", highlight=False)
    return finding


def _shows(text: str) -> None:
    out.print(f"shows: {text}", highlight=False)


def _training_part(settings: DemoSettings) -> Finding:
    out.rule("1. data-parallel model update with a crash injected")
    _shows("a real parameter-server update (the default loop, balanced synchronous steps, the "
           "server sharded over the workers' devices) of a digits CNN over four emulated "
           "Jetsons; a worker is killed mid-epoch and the job "
           "resumes from its checkpoint")
    result = run_equal_update(EXAMPLES / "deep-edge-testbed.yaml",
                              TrainConfig(epochs=settings.epochs), 32,
                              settings.kill_worker or None, None, "local")
    since = "the start"
    for lost in result.interruptions:
        since = f"the epoch-{lost.epoch - 1} checkpoint" if lost.epoch else "the start"
        out.print(f"fault: {lost.member} on {lost.device} ({lost.reason}); strikes now "
                  f"{lost.strikes}; the job resumed from {since}")
    return _said(training_finding(result.val_accuracy, len(result.interruptions), since))


def _deep_edge_part(settings: DemoSettings, use_testbed: bool) -> Finding:
    from edgewise.cli.update import DEMO_STATE, run_plan

    out.rule("2. Deep-Edge: interference-aware plan, background apps running")
    _shows("Deep-Edge's plan (workers, shards, batch sizes) with nano-2 under CPU and GPU "
           "stress, run with SIFT really running beside the training on every worker")
    with demo_cluster(use_testbed) as address:
        epochs = settings.apps_epochs or settings.epochs
        n = epochs if address is None else min(epochs, TESTBED_EPOCHS)
        done = run_plan(EXAMPLES / "deep-edge-testbed.yaml", "deep-edge", [DEMO_STATE], n,
                        0.0, address)
    return _said(apps_finding(done.apps, emulated=address is None))


def _other_parts(settings: DemoSettings) -> list[Finding]:
    from edgewise.cli.continual import demo_part as continual_demo
    from edgewise.cli.modelparallel import demo_part as srole_demo
    from edgewise.cli.pipeline_run import run_pipeline
    from edgewise.cli.sites import demo_part as sites_demo

    out.rule("3. SEIFER: partitioned inference on slow links, a stage killed mid-stream")
    _shows("a CNN cut into stages on four emulated Jetson Nanos behind 5-20 Mbit/s links; "
           "a stage is killed mid-stream, every request is answered once and checked")
    found = [_said(pipeline_finding(run_pipeline(requests=settings.requests, kill_stage=1,
                                                 seed=0, address="local")))]
    out.rule("4. Ekya: retraining and inference sharing one device, drifting streams")
    _shows("two drifting digits streams; each window the thief (then uniform) splits one "
           "emulated device between retraining and inference, accuracy measured")
    means = continual_demo(windows=settings.windows, window_s=settings.window_s)
    found.append(_said(continual_finding(means["thief"], means["uniform"])))
    out.rule("5. Okita: a learning job scheduled across edge sites, moved between slots")
    _shows("Okita's schedule of one job over three sites, run for real: chunks, parameter "
           "server and workers moved between slots from checkpoints")
    run = sites_demo()
    found.append(_said(sites_finding(run.final_accuracy, run.migrations)))
    out.rule("6. SROLE (simulated): shielded multi-agent placement of model-parallel training")
    _shows("SROLE's learners placing VGG-16's layer partitions on a simulated 10-node "
           "network, with and without shields; nothing runs on Ray in this part")
    jct = srole_demo(online=settings.srole_online, rounds=settings.srole_rounds)
    found.append(_said(srole_finding(jct)))
    return found
