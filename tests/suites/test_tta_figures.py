"""The time-to-accuracy race's figures over repeated runs: medians, never-reached times,
ratios of the medians (``suites.time_to_accuracy.figures_of``), on hand-made curves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edgewise.suites.time_to_accuracy import figures_of
from edgewise.suites.tta_arms import ArmResult


def _arm(name: str, accs: list[float], epoch_s: float, stale: float | None = None,
         misses: int = 0) -> ArmResult:
    times = tuple(epoch_s * (i + 1) for i in range(len(accs)))
    return ArmResult(name, tuple(accs), times, stale, {"app": misses})


def _run(de_sync: list[float], fair_sync: list[float], ddp: list[float]) -> dict[str, ArmResult]:
    return {"deep-edge/async": _arm("deep-edge/async", [0.5, 0.96], 1.0, stale=2.0, misses=1),
            "deep-edge/sync": _arm("deep-edge/sync", de_sync, 2.0, misses=2),
            "fair/sync": _arm("fair/sync", fair_sync, 3.0),
            "ray-train-ddp": _arm("ray-train-ddp", ddp, 4.0),
            "single-device": _arm("single-device", [0.2, 0.5, 0.95], 10.0)}


def test_figures_are_medians_over_the_runs_and_ratios_of_the_medians() -> None:
    runs = [_run([0.95, 0.99], [0.1, 0.95], [0.95, 0.97]),   # de 2, fair 6, ddp 4
            _run([0.1, 0.1, 0.92], [0.1, 0.1], [0.1, 0.95]),  # de 6, fair never, ddp 8
            _run([0.1, 0.1], [0.1, 0.1, 0.1], [0.1, 0.96])]  # de never, fair never, ddp 8
    f = figures_of(runs, 0.9)
    assert f["repeats"] == 3
    assert f["tta_device_seconds_runs"]["deep-edge/sync"] == [2.0, 6.0, None]
    # the median with a never-reached run counted as longer than any time
    assert f["tta_device_seconds"]["deep-edge/sync"] == 6.0
    assert f["tta_device_seconds"]["fair/sync"] is None  # two of three never reached it
    assert f["tta_device_seconds"]["ray-train-ddp"] == 8.0
    assert f["tta_device_seconds"]["single-device"] == 30.0
    assert f["tta_device_seconds"]["deep-edge/async"] == 2.0
    # best edgewise arm: deep-edge/async's median 2.0
    assert f["tta_ratio_best_to_ray_train_ddp"] == pytest.approx(2.0 / 8.0)
    assert f["tta_ratio_best_to_single_device"] == round(2.0 / 30.0, 4)  # rounded
    assert f["tta_speedup_deep_edge_over_fair"] is None  # fair's median is never
    assert f["epoch_speedup_deep_edge_over_fair"] == pytest.approx(3.0 / 1.0)
    assert f["final_accuracy"]["deep-edge/sync"] == 0.92
    assert f["async_final_accuracy"] == 0.96
    assert f["async_minus_sync_final_accuracy"] == pytest.approx(0.96 - 0.92)
    assert f["staleness_mean"] == 2.0
    assert f["deadline_misses"]["deep-edge/sync"] == {"app": 6}  # summed over the runs
    assert len(f["curves"]["fair/sync"]) == 3
    assert f["curves"]["fair/sync"][2]["device_seconds"] == [3.0, 6.0, 9.0]


def test_one_run_gives_that_runs_figures() -> None:
    f = figures_of([_run([0.95], [0.1, 0.95], [0.97])], 0.9)
    assert f["tta_device_seconds"] == {"deep-edge/async": 2.0, "deep-edge/sync": 2.0,
                                       "fair/sync": 6.0, "ray-train-ddp": 4.0,
                                       "single-device": 30.0}
    assert f["tta_speedup_deep_edge_over_fair"] == pytest.approx(6.0 / 2.0)


def test_the_goodput_arm_has_its_own_speed_up_and_the_noise_scale_it_planned_with() -> None:
    runs = []
    for noise, accs in ((300.0, [0.5, 0.95]), (500.0, [0.5, 0.5, 0.91])):
        run = _run([0.1, 0.95], [0.1, 0.1, 0.95], [0.95])  # de 4, fair 9 device seconds
        run["deep-edge-goodput/sync"] = ArmResult(
            "deep-edge-goodput/sync", tuple(accs), tuple(1.5 * (i + 1) for i in range(len(accs))),
            extra={"planned_noise_scale": noise})
        runs.append(run)
    f = figures_of(runs, 0.9)
    assert f["tta_device_seconds"]["deep-edge-goodput/sync"] == pytest.approx(3.75)  # 3, 4.5
    assert f["tta_speedup_deep_edge_goodput_over_fair"] == pytest.approx(9.0 / 3.75, abs=1e-4)
    assert f["tta_speedup_deep_edge_over_fair"] == pytest.approx(9.0 / 2.0)  # async, not goodput
    assert f["goodput_noise_scale"] == 400.0
    assert f["goodput_noise_scale_runs"] == [300.0, 500.0]
    assert f["tta_ratio_best_to_ray_train_ddp"] == pytest.approx(2.0 / 4.0)  # async's 2.0


def test_the_goodput_arm_takes_fair_syncs_measured_noise_scale_or_says_why_not() -> None:
    from edgewise.errors import ConfigError
    from edgewise.suites.time_to_accuracy import _arm
    from edgewise.suites.tta_arms import TTASetup, measured_noise_scale

    fair = ArmResult("fair/sync", (0.5,), (1.0,), extra={"noise_scale_adam": 312.5})
    assert measured_noise_scale(fair) == 312.5
    assert measured_noise_scale(ArmResult("fair/sync", (0.5,), (1.0,))) is None
    setup = TTASetup(Path("spec.yaml"), 2, 0, 0.9)
    for earlier in ({}, {"fair/sync": ArmResult("fair/sync", (0.5,), (1.0,))}):
        with pytest.raises(ConfigError, match="race fair/sync too") as raised:
            _arm("deep-edge-goodput/sync", setup, None, [], None, earlier)  # type: ignore[arg-type]
        assert raised.value.field == "--arms"


def test_the_noise_scale_to_plan_with_is_the_median_on_the_way_to_the_target() -> None:
    from edgewise.suites.tta_arms import noise_on_the_way

    readings = [None, 300.0, 9000.0, 200.0, 250.0, 5000.0, 8000.0]
    accuracies = [0.2, 0.5, 0.7, 0.8, 0.91, 0.95, 0.97]
    # epochs 1-5 (the fifth first at 0.9): 300, 9000, 200, 250; the later ones left out
    assert noise_on_the_way(readings, accuracies, 0.9) == 275.0
    # never reached: every epoch's
    assert noise_on_the_way(readings, accuracies, 0.99) == 2650.0
    assert noise_on_the_way([None, None], [0.95, 0.97], 0.9) is None
    assert noise_on_the_way([], [], 0.9) is None


def _scaling_run(wire_per_sample: dict[str, float], received: float = 0.5
                 ) -> dict[str, object]:
    """A three-Nano scaling run's figures: each worker 1,000 samples/s alone, 479 samples
    trained together, moving ``wire_per_sample`` bytes each, ``received`` of them the
    server's replies."""
    return {"samples_per_second_alone": dict.fromkeys(wire_per_sample, 1000.0),
            "samples_by_worker": dict.fromkeys(wire_per_sample, 479),
            "transport_wire_bytes_by_worker": {w: round(b * 479)
                                               for w, b in wire_per_sample.items()},
            "transport_wire_bytes_received_by_worker": {
                w: round(b * 479 * received) for w, b in wire_per_sample.items()}}


def _three_nanos(port_mbps: float | None) -> Any:
    """three-nanos.yaml with every device's port at ``port_mbps`` (None: no port)."""
    from dataclasses import replace

    from edgewise.cluster.examples import example_path
    from edgewise.cluster.schema import load_cluster

    cluster = load_cluster(example_path("three-nanos.yaml"))
    return replace(cluster, devices=tuple(replace(d, port_mbps=port_mbps)
                                          for d in cluster.devices))


def test_the_link_bound_takes_each_workers_own_link_to_the_server() -> None:
    """three-nanos.yaml without its ports: 1 Gbit/s pairs, 125 MB/s at dilation 1. Each
    pair carries only its worker's bytes: three workers moving 62.5 KB a sample each fit
    their links twice over (2,000 samples/s against 1,000 alone): no bound at all, where
    one link shared by the three would have allowed 2,000 of their 3,000. A worker whose
    link carries 500 samples/s holds the three to 2,500 of 3,000."""
    from types import SimpleNamespace
    from typing import cast

    from edgewise.suites.tta_scaling import link_bound

    runtime = cast(Any, SimpleNamespace(cluster=_three_nanos(port_mbps=None),
                                        time_dilation=1.0))
    nanos = ("nano-0", "nano-1", "nano-2")
    assert link_bound(runtime, _scaling_run(dict.fromkeys(nanos, 62_500.0))) == 1.0
    slow = {"nano-0": 250_000.0, "nano-1": 62_500.0, "nano-2": 62_500.0}
    assert link_bound(runtime, _scaling_run(slow)) == pytest.approx(2500 / 3000, abs=1e-4)
    runtime.time_dilation = 2.0  # a testbed shapes each pair at its rate ÷ the dilation
    assert link_bound(runtime, _scaling_run(slow)) == pytest.approx(
        (250 + 1000 + 1000) / 3000, abs=1e-4)
    # and each direction apart: the busier direction's bytes alone (half, or 60 %, of
    # nano-0's 250 KB a sample) set its rate, not both directions' sum
    assert link_bound(runtime, _scaling_run(slow), duplex=True) == pytest.approx(
        (500 + 1000 + 1000) / 3000, abs=1e-4)
    assert link_bound(runtime, _scaling_run(slow, received=0.4), duplex=True) == pytest.approx(
        (62_500 / 150_000 * 1000 + 1000 + 1000) / 3000, abs=1e-4)


def test_the_link_bound_on_a_testbed_fits_every_workers_bytes_through_the_servers_port(
        ) -> None:
    """three-nanos.yaml as shipped: every device has one 1 Gbit/s port (125 MB/s at dilation
    1), which a testbed enforces. Three workers moving 62.5 KB a sample each way (125 KB in
    all) each fit their own link twice over, but the server's port takes 125 MB/s of
    pushes: 2,000 samples/s of the 3,000 they train alone. At half the bytes the port
    carries all three. The emulator models no ports: there the same run is not bound."""
    from types import SimpleNamespace
    from typing import cast

    from edgewise.suites.tta_scaling import link_bound

    runtime = cast(Any, SimpleNamespace(cluster=_three_nanos(port_mbps=1000.0),
                                        time_dilation=1.0))
    heavy = dict.fromkeys(("nano-0", "nano-1", "nano-2"), 125_000.0)
    assert link_bound(runtime, _scaling_run(heavy), duplex=True) == pytest.approx(
        2000 / 3000, abs=1e-4)
    light = dict.fromkeys(heavy, 62_500.0)
    assert link_bound(runtime, _scaling_run(light), duplex=True) == 1.0
    assert link_bound(runtime, _scaling_run(heavy)) == 1.0  # emulated: links alone
    # a port slower than the pairs also caps each worker's own link: 250 Mbit/s ports
    # carry 31.25 MB/s, 500 samples/s of 62.5 KB each way per worker (no one alone at its
    # 1,000), and the server's port the same 500 in all
    runtime.cluster = _three_nanos(port_mbps=250.0)
    assert link_bound(runtime, _scaling_run(heavy), duplex=True) == pytest.approx(
        500 / 3000, abs=1e-4)


def test_running_statistics_readings_give_their_own_time_to_the_target() -> None:
    """The DDP arm also reads each epoch with its replica's running BatchNorm statistics (as
    a DDP user evaluating ``model.eval()`` would): their time to the target is reported
    beside the race's, which is measured as the engine measures."""
    def ddp(running: list[float]) -> ArmResult:
        return ArmResult("ray-train-ddp", (0.5, 0.92, 0.95, 0.97), (1.0, 2.0, 3.0, 4.0),
                         extra={"running_statistics": running})

    runs = [{"ray-train-ddp": ddp([0.25, 0.25, 0.91, 0.97])},   # 3.0, against 2.0
            {"ray-train-ddp": ddp([0.25, 0.25, 0.5, 0.95])},    # 4.0
            {"ray-train-ddp": ddp([0.25, 0.25, 0.25, 0.25])}]   # never
    f = figures_of(runs, 0.9)
    assert f["tta_device_seconds"]["ray-train-ddp"] == 2.0
    assert f["tta_device_seconds_running_statistics"] == {"ray-train-ddp": 4.0}
    # an arm without the readings (the engine's) has no entry; none at all without DDP
    assert figures_of([{"fair/sync": _arm("fair/sync", [0.95], 1.0)}], 0.9)[
        "tta_device_seconds_running_statistics"] == {}


def test_the_scaling_figure_is_the_median_runs_with_every_run_beside_it() -> None:
    from edgewise.suites.tta_scaling import median_scaling

    runs = [{"ps_scaling_efficiency_3_workers": e, "ps_scaling_link_bound": b}
            for e, b in ((0.885, 1.0), (0.472, 0.9), (0.687, 0.8))]
    assert median_scaling(runs) == {"ps_scaling_efficiency_3_workers": 0.687,
                                    "ps_scaling_link_bound": 0.8,
                                    "ps_scaling_efficiency_runs": [0.885, 0.472, 0.687]}
    # an even count takes the lower middle run; one run is itself
    assert median_scaling(runs[:2])["ps_scaling_efficiency_3_workers"] == 0.472
    assert median_scaling(runs[:1])["ps_scaling_efficiency_runs"] == [0.885]


def test_a_reading_beside_the_next_epoch_counts_when_it_was_known() -> None:
    """An arm whose readings came beside the next epoch reaches the target when the reading
    was known (its epoch's end plus the lag), and its curve is drawn at those times."""
    arm = ArmResult("fair/sync", (0.5, 0.95, 0.97), (1.0, 2.0, 3.0), lags=(0.25, 0.25, 0.0),
                    extra={"evaluation_device_seconds": 0.25})
    assert arm.tta(0.9) == pytest.approx(2.25)
    assert arm.reading_seconds == (1.25, 2.25, 3.0)
    assert arm.epoch_device_seconds == 1.0  # the epochs themselves hold no evaluation
    f = figures_of([{"fair/sync": arm}], 0.9)
    assert f["tta_device_seconds"]["fair/sync"] == 2.25
    assert f["curves"]["fair/sync"][0]["device_seconds"] == [1.25, 2.25, 3.0]
    assert f["evaluation_device_seconds"]["fair/sync"] == 0.25


def test_each_step_part_is_its_median_over_the_runs_that_timed_it() -> None:
    """``step_device_seconds``: per engine arm, each part's median over the runs; a run
    without the breakdown (an arm that timed none) is left out, not read as zero."""
    def arm(parts: dict[str, float] | None) -> ArmResult:
        return ArmResult("fair/sync", (0.95,), (1.0,), extra={"step_device_seconds": parts})

    runs = [{"fair/sync": arm({"compute": 0.02, "wait": 0.05})},
            {"fair/sync": arm({"compute": 0.04, "wait": 0.03})},
            {"fair/sync": arm({"compute": 0.03, "wait": 0.01})},
            {"fair/sync": arm(None)}]
    f = figures_of(runs, 0.9)
    assert f["step_device_seconds"] == {"fair/sync": {"compute": 0.03, "wait": 0.03}}
