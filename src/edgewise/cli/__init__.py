"""`edgewise ...`: one sub-command group per problem (Typer + Rich)."""

from __future__ import annotations

import typer

from edgewise import __version__
from edgewise.cli import (
    bench,
    cluster,
    continual,
    fault,
    modelparallel,
    pipeline,
    pipeline_run,
    sites,
    update,
)
from edgewise.cli.profile import profile
from edgewise.cli.serve import serve
from edgewise.cli.train import demo, train_command

__all__ = ["app", "main"]

app = typer.Typer(
    help="edgewise: decide where and how deep-learning work runs on heterogeneous edge "
    "devices, then run it.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(cluster.app, name="cluster")
app.add_typer(bench.app, name="bench")
app.add_typer(fault.app, name="fault")
app.add_typer(update.app, name="update")
app.add_typer(pipeline.app, name="pipeline")
app.add_typer(continual.app, name="continual")
app.add_typer(sites.app, name="sites")
app.add_typer(modelparallel.app, name="modelparallel")
pipeline.app.command("plan")(pipeline_run.plan)
pipeline.app.command("run")(pipeline_run.run)
app.command("train")(train_command)
app.command("demo")(demo)
app.command("serve")(serve)
app.command("profile")(profile)


def _version(value: bool) -> None:
    if value:
        print(f"edgewise {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="print the version and exit"),
) -> None:
    """edgewise: where and how deep-learning work runs at the edge."""


def main() -> None:
    app()
