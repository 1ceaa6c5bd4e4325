"""`edgewise demo`: the main job, one part per problem; Deep-Edge's plan runs on a
kernel-enforced testbed where this machine can make one (root, namespaces, cgroups), else
on the single-host emulator, with one line saying why."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import typer

from edgewise.cli.common import err, out, user_errors
from edgewise.cli.train import EXAMPLES, run_equal_update
from edgewise.errors import EdgewiseError
from edgewise.runtime.plan import TrainConfig

__all__ = ["DEMO_TESTBED", "demo", "demo_cluster"]

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


@user_errors
def demo(
    kill_worker: str = typer.Option("nano-1@3", help="crash injected to show fault tolerance, "
                                                     "DEVICE@EPOCH ('' for none)"),
    epochs: int = typer.Option(8, min=1, max=100, help="epochs of the updates (at most "
                                                        f"{TESTBED_EPOCHS} on a testbed)"),
    use_testbed: bool = typer.Option(True, "--testbed/--no-testbed",
                                     help="run Deep-Edge's plan on a testbed if possible"),
) -> None:
    """The main job: (1) a real parameter-server model update with equal shards on the
    Deep-Edge testbed emulated on this host, a worker killed mid-epoch and the job
    recovering from its checkpoint; (2) the Deep-Edge plan for it with one heavily loaded
    Nano, run with SIFT really running beside the training on every worker, on a
    kernel-enforced testbed where the machine allows (else emulated); (3) a CNN partitioned
    over emulated Jetson Nanos behind slow links, one stage killed mid-stream and every
    request answered once; (4) Ekya's thief vs uniform on drifting digits streams,
    retraining and inference really sharing a device; (5) Okita planning a job over three
    edge sites and running it with a migration; (6) SROLE's methods placing VGG-16
    training on a 10-node network."""
    from edgewise.cli.update import DEMO_STATE, run_plan

    cluster = EXAMPLES / "deep-edge-testbed.yaml"
    out.rule("1. data-parallel model update with a crash injected")
    result = run_equal_update(cluster, TrainConfig(epochs=epochs), 32, kill_worker or None,
                              None, "local")
    for lost in result.interruptions:
        since = f"the epoch-{lost.epoch - 1} checkpoint" if lost.epoch else "the start"
        out.print(f"fault: {lost.member} on {lost.device} ({lost.reason}); strikes now "
                  f"{lost.strikes}; the job resumed from {since}")
    out.print(f"[bold]final validation accuracy {result.val_accuracy:.3f}[/]")
    out.rule("2. Deep-Edge: interference-aware plan, background apps running")
    with demo_cluster(use_testbed) as address:
        n = epochs if address is None else min(epochs, TESTBED_EPOCHS)
        run_plan(cluster, "deep-edge", [DEMO_STATE], n, 0.0, address)
    _emulated_parts()


def _emulated_parts() -> None:
    out.rule("3. SEIFER: partitioned inference on slow links, a stage killed mid-stream")
    from edgewise.cli.pipeline_run import run_pipeline

    run_pipeline(requests=60, kill_stage=1, seed=0, address="local")
    out.rule("4. Ekya: retraining and inference sharing one device, drifting streams")
    from edgewise.cli.continual import demo_part as continual_demo

    continual_demo()
    out.rule("5. Okita: a learning job scheduled across edge sites, moved between slots")
    from edgewise.cli.sites import demo_part as sites_demo

    sites_demo()
    out.rule("6. SROLE: shielded multi-agent placement of model-parallel training")
    from edgewise.cli.modelparallel import demo_part as srole_demo

    srole_demo()
