"""Where the time-to-accuracy race runs (``--where``) and where its DDP ranks go: one rank
per worker device, by the device's node label on devices, by stretch on one emulating host;
the fastest device's rank evaluates (pure: no Ray started)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from edgewise.cluster.examples import example_path
from edgewise.cluster.model import Role
from edgewise.cluster.schema import load_cluster
from edgewise.errors import ConfigError
from edgewise.runtime.ray_cluster import LABEL_DEVICE, RayRuntime
from edgewise.suites.time_to_accuracy import where_to_run
from edgewise.suites.tta_ddp import ddp_placement, fastest_device
from edgewise.testbed.host import TestbedUnavailable as Unavailable


def _runtime(emulated: bool) -> RayRuntime:
    cluster = load_cluster(example_path("deep-edge-testbed.yaml"))
    # emulated: each device's stretch is host speed ÷ its speed; on devices it is 1
    stretch = {d.name: (6.0 / d.speed if emulated else 1.0) for d in cluster.devices}
    return RayRuntime(cluster, stretch, emulated=emulated)


def _workers(runtime: RayRuntime) -> list[str]:
    return [d.name for d in runtime.cluster.with_role(Role.WORKER)]


@pytest.mark.parametrize(("where", "missing", "chosen"), [
    ("auto", [], "testbed"), ("auto", ["root"], "emulated"), ("testbed", [], "testbed"),
    ("emulated", [], "emulated"), ("emulated", ["tc"], "emulated")])
def test_where_takes_the_testbed_only_where_the_host_can_run_one(
        where: str, missing: list[str], chosen: str) -> None:
    assert where_to_run(where, missing) == chosen


def test_a_testbed_asked_for_where_none_can_run_names_what_lacks() -> None:
    with pytest.raises(Unavailable, match="lacks root; tc"):
        where_to_run("testbed", ["root", "tc"])


def test_an_unknown_where_is_a_config_error_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match="auto, testbed, emulated") as err:
        where_to_run("cloud", [])
    assert err.value.field == "--where"


def test_on_devices_each_rank_asks_for_its_own_devices_label() -> None:
    runtime = _runtime(emulated=False)
    workers = _workers(runtime)
    placement = ddp_placement(runtime, workers)
    assert placement.by_label
    assert placement.label_selector == [{LABEL_DEVICE: w} for w in workers]
    assert len({s[LABEL_DEVICE] for s in placement.label_selector}) == len(workers) == 4
    assert set(placement.stretch.values()) == {1.0}


def test_on_one_emulating_host_ranks_follow_the_workers_order_and_their_stretch() -> None:
    runtime = _runtime(emulated=True)
    workers = _workers(runtime)
    placement = ddp_placement(runtime, workers)
    assert not placement.by_label and placement.label_selector is None
    assert placement.devices == tuple(workers)
    assert placement.stretch == {w: runtime.stretch[w] for w in workers}


@pytest.mark.parametrize("emulated", [True, False])
def test_the_fastest_device_by_its_nominal_speed_evaluates(emulated: bool) -> None:
    """Stretch factors are all 1 on a testbed: the speed, not the stretch, names the TX2."""
    runtime = _runtime(emulated)
    workers = _workers(runtime)
    fastest = max(workers, key=lambda w: runtime.cluster.device(w).speed)
    assert runtime.cluster.device(fastest).type.startswith("jetson-tx2")
    assert fastest_device(runtime, workers) == fastest
    assert ddp_placement(runtime, workers).evaluator == fastest
    # reversed order: still the fastest, not the first
    assert fastest_device(runtime, workers[::-1]) == fastest


def _race(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, arm: Any, only: set[str],
          seeds: tuple[int, ...] = (0, 1, 2), messages: list[str] | None = None
          ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """``_arms`` over ``seeds`` with ``arm`` standing in for every arm in ``only``: the runs
    it keeps and what it recorded as failed (its progress lines into ``messages``)."""
    from edgewise.suites import time_to_accuracy as tta
    from edgewise.suites.tta_arms import TTASetup

    monkeypatch.setattr(tta, "_arm", arm)
    lines = [] if messages is None else messages
    ctx = SimpleNamespace(progress=lambda message, share: lines.append(message))
    setups = [TTASetup(tmp_path / "w.yaml", 1, seed, 0.9) for seed in seeds]
    failed: dict[str, str] = {}
    runs = tta._arms(setups, ctx, _runtime(True), None,  # type: ignore[arg-type]
                     only, failed)
    return runs, failed


def test_a_failed_arm_is_recorded_and_the_other_arms_are_kept(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """One arm's error (edgewise's own) costs that arm's run only, and is named."""
    from edgewise.errors import EdgewiseError
    from edgewise.suites.tta_arms import ArmResult, TTASetup

    def arm(name: str, setup: TTASetup, *_: object) -> ArmResult:
        if name == "fair/async" and setup.seed == 1:
            raise EdgewiseError("model: transformers has no config class 'X'\nmore")
        return ArmResult(name, (0.95,), (1.0,))

    messages: list[str] = []
    runs, failed = _race(monkeypatch, tmp_path, arm, {"fair/async", "fair/sync"}, (0, 1),
                         messages)
    assert failed == {"fair/async, seed 1": "model: transformers has no config class 'X'"}
    assert [sorted(run) for run in runs] == [["fair/async", "fair/sync"], ["fair/sync"]]
    assert any("fair/async, seed 1 failed" in m for m in messages)


def test_ctrl_c_keeps_the_arms_measured_so_far(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    """Ctrl-C in seed 1's second arm: seed 0's arms and seed 1's first are kept, the race
    stops there, and ``interrupted`` names where."""
    from edgewise.suites.tta_arms import ArmResult, TTASetup

    ran: list[tuple[str, int]] = []

    def arm(name: str, setup: TTASetup, *_: object) -> ArmResult:
        if (name, setup.seed) == ("fair/sync", 1):
            raise KeyboardInterrupt
        ran.append((name, setup.seed))
        return ArmResult(name, (0.95,), (1.0,))

    runs, failed = _race(monkeypatch, tmp_path, arm, {"fair/async", "fair/sync"})
    assert ran == [("fair/async", 0), ("fair/sync", 0), ("fair/async", 1)]
    assert [sorted(run) for run in runs] == [["fair/async", "fair/sync"], ["fair/async"]]
    assert failed == {"interrupted": "fair/sync, seed 1: interrupted"}


def test_ctrl_c_at_a_seeds_first_arm_leaves_no_empty_run_and_all_failed_seeds_stay(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A seed cut before any arm of it is no run; a seed whose arms all failed stays one."""
    from edgewise.errors import EdgewiseError
    from edgewise.suites.tta_arms import ArmResult, TTASetup

    def arm(name: str, setup: TTASetup, *_: object) -> ArmResult:
        if setup.seed == 1:
            raise EdgewiseError("no such config")
        if setup.seed == 2:
            raise KeyboardInterrupt
        return ArmResult(name, (0.95,), (1.0,))

    runs, failed = _race(monkeypatch, tmp_path, arm, {"fair/sync"})
    assert [sorted(run) for run in runs] == [["fair/sync"], []]
    assert failed == {"fair/sync, seed 1": "no such config",
                      "interrupted": "fair/sync, seed 2: interrupted"}


def _cut_short(ctx: object) -> dict[str, object]:
    """A bench part that Ctrl-C stopped after measuring something."""
    return {"measured_seconds": 1.5, "interrupted": True}


def test_a_bench_cut_short_prints_what_it_measured_then_exits_130() -> None:
    import json

    import typer
    from typer.testing import CliRunner

    from edgewise.bench import BenchSpec
    from edgewise.cli.bench import command

    spec = BenchSpec("cut-short", "a bench stopped part way", simulated=None,
                     real=f"{__name__}:_cut_short", has_quick=False)
    app = typer.Typer()
    app.command("cut-short")(command(spec))
    app.command("other")(lambda: None)  # two commands: the app takes the command's name
    done = CliRunner().invoke(app, ["cut-short", "--json"])
    assert done.exit_code == 130, done.output
    printed = json.loads(done.stdout[done.stdout.index("{"):done.stdout.rindex("}") + 1])
    assert printed["measured_seconds"] == 1.5 and printed["interrupted"] is True
