"""The command line, without Ray: cluster files, the catalog, join lines and input errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import ray
import yaml
from rich.console import Console
from typer.testing import CliRunner

import edgewise.cli.cluster as cli_cluster
import edgewise.cli.train as cli_train
from edgewise import __version__
from edgewise.cli import app
from edgewise.cluster.catalog import catalog
from edgewise.cluster.schema import load_cluster
from edgewise.runtime.ray_cluster import (
    head_device,
    head_start_line,
    ray_start_line,
    shared,
)

EXAMPLES = sorted((Path(__file__).parents[1] / "examples").glob("*.yaml"))
THREE_NANOS = Path(__file__).parents[1] / "examples" / "three-nanos.yaml"
NEGATIVE_MEMORY = """\
name: bad
devices:
  - {name: nano-0, type: jetson-nano, memory_mb: -512}
  - {name: nano-1, type: jetson-nano, memory_mb: 4096}
"""

runner = CliRunner()


def _flat(text: str) -> str:
    """The output with Rich's line wrapping undone (it wraps at spaces)."""
    return " ".join(text.split())


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


def _refuse_ray(*args: object, **kwargs: object) -> None:
    raise AssertionError("Ray must not be started for invalid input")


def test_version_prints_the_version() -> None:
    result = runner.invoke(app, ["--version"])

    assert result.exit_code == 0
    assert result.stdout.strip() == f"edgewise {__version__}"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_cluster_check_accepts_every_example(path: Path) -> None:
    name = yaml.safe_load(path.read_text())["name"]

    result = runner.invoke(app, ["cluster", "check", str(path)])

    assert result.exit_code == 0, result.output
    assert name in result.stdout


def test_cluster_check_names_the_bad_field(tmp_path: Path) -> None:
    path = _write(tmp_path, NEGATIVE_MEMORY)

    result = runner.invoke(app, ["cluster", "check", str(path)])

    assert result.exit_code == 2
    assert "devices[0].memory_mb" in result.stderr
    assert "greater than 0" in _flat(result.stderr)
    assert "Traceback" not in result.output


def test_cluster_check_names_an_unknown_device_type(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: bad\ndevices:\n  - {name: a, type: jetson-nano-9000}\n")

    result = runner.invoke(app, ["cluster", "check", str(path)])

    assert result.exit_code == 2
    assert "devices[0].type" in result.stderr
    assert "jetson-nano-9000" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize("bad_type", ["[/oops]", "[bold]nano"])
def test_error_text_from_user_input_is_printed_verbatim(tmp_path: Path, bad_type: str) -> None:
    path = _write(tmp_path, f'name: bad\ndevices:\n  - {{name: a, type: "{bad_type}"}}\n')

    result = runner.invoke(app, ["cluster", "check", str(path)])

    assert result.exit_code == 2
    assert bad_type in result.stderr


def test_cluster_check_missing_file_exits_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"

    result = runner.invoke(app, ["cluster", "check", str(missing)])

    assert result.exit_code == 2
    assert "cannot read" in _flat(result.stderr)
    assert "Traceback" not in result.output


def test_cluster_types_lists_every_catalog_type() -> None:
    result = runner.invoke(app, ["cluster", "types", "--json"])

    assert result.exit_code == 0
    listed = json.loads(result.stdout)
    assert set(listed) == set(catalog())
    for name, figures in listed.items():
        assert figures["name"] == name and figures["memory_mb"] == catalog()[name].memory_mb
    table = runner.invoke(app, ["cluster", "types"], env={"COLUMNS": "200"})
    assert all(name in table.stdout for name in catalog())


def test_join_lines_prints_the_heads_line_and_a_ray_start_line_per_other_device() -> None:
    cluster = load_cluster(THREE_NANOS)
    head = head_device(cluster)

    result = runner.invoke(app, ["cluster", "join-lines", str(THREE_NANOS), "--head", "h:1"])

    assert result.exit_code == 0
    assert result.stdout.count("ray start") == len(cluster.devices)
    assert head_start_line(head, 1) in _flat(result.stdout)
    for d in cluster.devices:
        if d != head:
            assert ray_start_line(d, "h:1") in _flat(result.stdout)
    # token authentication (Ray 2.x): every node gets the mode and the head's token
    assert result.stdout.count("export RAY_AUTH_MODE=token") == len(cluster.devices)
    # and a parameter server's frames inline, as on a testbed's nodes
    assert result.stdout.count("export RAY_max_direct_call_object_size=4194304") == len(
        cluster.devices)
    assert "ray get-auth-token --generate" in result.stdout and "auth_token" in result.stdout


def test_join_lines_are_not_wrapped_when_piped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_cluster, "out", Console(width=80))  # as `... > join.sh` sees it
    cluster = load_cluster(THREE_NANOS)

    result = runner.invoke(app, ["cluster", "join-lines", str(THREE_NANOS)])

    lines = result.stdout.splitlines()
    head = head_device(cluster)
    assert result.exit_code == 0
    assert [ln for ln in lines if ln.startswith("ray start")] == [head_start_line(head)] + [
        ray_start_line(d) for d in cluster.devices if d != head
    ]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--kill-worker", "nonsense"], "--kill-worker"),
        (["--kill-worker", "ghost@2"], "ghost"),
        (["--mode", "bogus"], "--mode"),
        (["--wire-dtype", "int4"], "--wire-dtype"),
        (["--mode", "async", "--wire-dtype", "int8"], "int8 needs the sync loop"),
        (["--evaluation", "during"], "--evaluation"),
        (["--ps-shards", "all"], "--ps-shards"),
        (["--mode", "async", "--ps-shards", "workers"], "a sharded server needs the sync loop"),
        (["--lr-reference-batch", "-1"], "--lr-reference-batch"),
    ],
    ids=["kill-syntax", "kill-unknown-device", "mode", "wire-dtype", "int8-async",
         "evaluation", "ps-shards", "shards-async", "lr-reference-batch"],
)
def test_train_rejects_bad_options_before_starting_ray(
    monkeypatch: pytest.MonkeyPatch, args: list[str], words: str
) -> None:
    monkeypatch.setattr(cli_train, "connect", _refuse_ray)

    result = runner.invoke(app, ["train", str(THREE_NANOS), *args])

    assert result.exit_code == 2, result.output
    assert words in result.stderr
    assert "Traceback" not in result.output
    assert not isinstance(result.exception, AssertionError)


@pytest.mark.parametrize("group", ["bench", "fault"])
def test_group_help_works(group: str) -> None:
    result = runner.invoke(app, [group, "--help"])

    assert result.exit_code == 0
    assert "Usage" in result.stdout
    assert "Commands" in result.stdout


def test_console_script_reports_bad_file_without_traceback(tmp_path: Path) -> None:
    path = _write(tmp_path, NEGATIVE_MEMORY)
    script = Path(sys.executable).parent / "edgewise"

    proc = subprocess.run(
        [str(script), "cluster", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )

    assert proc.returncode == 2
    assert "devices[0].memory_mb" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("argv", "called"), [
    (["bench", "seifer", "--json"], "bench"), (["--version"], ""), (["--help"], None),
    ([], None), (["demo"], "demo"), (["nosuch", "x"], None), (["bench", "--help"], "bench"),
])
def test_main_builds_only_the_called_group(argv: list[str], called: str | None) -> None:
    from edgewise.cli import _called

    assert _called(argv) == called


def test_version_and_bench_help_do_not_import_torch() -> None:
    code = ("import sys; from edgewise.cli import main; sys.argv = ['edgewise', '{}']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('torch' in sys.modules, 'ray' in sys.modules)")
    for arg in ("--version", "bench"):
        done = subprocess.run([sys.executable, "-c", code.format(arg)], capture_output=True,
                              text=True, check=True, timeout=120)
        assert done.stdout.strip().splitlines()[-1] == "False False", (arg, done.stdout)


def test_command_listings_are_one_paragraph_on_one_line() -> None:
    """Typer's rich listings keep a docstring's line breaks; every listed command gets its
    first paragraph joined, whatever group it sits in."""
    from edgewise.cli import build_app

    full = build_app()
    infos = list(full.registered_commands)
    for group in full.registered_groups:
        assert group.typer_instance is not None
        infos += group.typer_instance.registered_commands
    assert len(infos) > 20
    for info in infos:
        assert info.short_help, info.name
        assert "\n" not in info.short_help and "  " not in info.short_help, info.name
    update = CliRunner().invoke(app, ["update", "--help"], env={"COLUMNS": "200"})
    assert "predicted epoch time and predicted pressure on each background app" in update.stdout


def test_serve_refuses_a_non_loopback_host_before_starting_anything() -> None:
    pool, was_up = shared(), ray.is_initialized()
    uses = pool.uses if pool is not None else 0
    result = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--port", "8765"])
    assert result.exit_code == 2
    assert "--allow-remote" in result.output and "manager for cluster" not in result.output
    # no Ray cluster was started or asked for (the session's shared one is left as it was)
    assert ray.is_initialized() == was_up and (pool.uses if pool is not None else 0) == uses


def _must_not_run(*_: object, **__: object) -> None:
    raise AssertionError("the work ran before its output path was checked")


@pytest.mark.parametrize(("args", "work"), [
    (["bench", "srole", "--quick", "--plots"], "edgewise.cli.bench.run_bench"),
    (["bench", "ekya", "--quick", "--plots"], "edgewise.cli.bench.run_bench"),
    (["bench", "deep-edge", "--experiments", "1", "--plots"], "edgewise.cli.bench.run_bench"),
    (["profile", "--quick", "--output"], "edgewise.cli.profile.run_profile"),
    (["update", "fit", "README.md", "--device-type", "jetson-nano", "--output"],
     "edgewise.perf.models.fit_models")])
def test_output_paths_are_checked_before_the_work_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], work: str) -> None:
    monkeypatch.setattr(work, _must_not_run)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = runner.invoke(app, [*args, str(blocker / "out" / "x.png")])
    assert result.exit_code == 2, result.output
    assert "cannot create" in result.output and "Traceback" not in result.output


@pytest.mark.ray
@pytest.mark.slow
def test_train_recovers_from_a_killed_worker_and_reports_each_epoch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The happy path a README reader takes, with the fault it offers: two epochs, the
    worker on nano-1 killed in epoch 1, the job restarted from its checkpoint."""
    monkeypatch.setenv("EDGEWISE_STATE_DIR", str(tmp_path))

    result = runner.invoke(app, ["train", str(THREE_NANOS), "--epochs", "2",
                                 "--kill-worker", "nano-1@1"])

    assert result.exit_code == 0, result.output
    assert "2 epochs" in result.stdout and "1 interruption(s)" in result.stdout, result.stdout
    assert json.loads((tmp_path / "strikes.json").read_text()) == {"nano-1": 1}
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("*.ewt"))[-1] == \
        "epoch-0001.ewt"
