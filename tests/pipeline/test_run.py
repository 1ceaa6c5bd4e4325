"""The SEIFER inference runtime on a real local Ray instance: results in order and equal to
the whole model, emulated links that limit throughput, the bandwidth probe, a stage killed
mid-stream and a model switch mid-stream — nothing lost, nothing duplicated."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from torch import nn

from edgewise.cluster.schema import cluster_from_dict
from edgewise.errors import ConfigError
from edgewise.nn.chain import ModelChain
from edgewise.nn.split import split_sequential
from edgewise.pipeline.problem import PipelinePlan, PipelineProblem
from edgewise.pipeline.run import Dispatcher, Result, execute, stream
from edgewise.pipeline.sim import simulate
from edgewise.runtime.faults import FaultInjector
from edgewise.runtime.probe import measure_bandwidth
from edgewise.runtime.ray_cluster import RayRuntime, start_local
from edgewise.wire.activation import (
    ActivationCodec,
    decode_activation,
    encode_activation,
    zfp_available,
)
from edgewise.wire.state import materialize, stage_payload

SLOW_MBPS = 10.0
CLUSTER = {
    "name": "test-pipeline",
    "default_link": {"bandwidth_mbps": 1000, "latency_ms": 0.3},
    "links": [{"between": ["nano-2", "nano-3"], "bandwidth_mbps": SLOW_MBPS, "latency_ms": 0.3}],
    "devices": [
        *({"name": f"nano-{i}", "type": "jetson-nano"} for i in range(4)),
        {"name": "pi5", "type": "raspberry-pi-5", "roles": ["manager"]},
    ],
}
CUTS = (0, 2, 4, 7)
ROWS, WIDTH = 32, 512  # a 64 KiB float32 activation between stages


def mlp(seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH), nn.Tanh(),
                         nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, 16)).eval()


def inputs(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(ROWS, 64)).astype(np.float32) for _ in range(n)]


def reference(model: nn.Module, xs: list[np.ndarray]) -> list[np.ndarray]:
    with torch.inference_mode():
        return [model(torch.from_numpy(x)).numpy() for x in xs]


@pytest.fixture(scope="module")
def runtime() -> Iterator[RayRuntime]:
    rt = start_local(cluster_from_dict(CLUSTER, source="test"))
    yield rt
    rt.shutdown()


def test_split_sequential_checks_cuts_and_keeps_the_function() -> None:
    model, x = mlp(0), torch.ones(2, 64)
    parts = split_sequential(model, CUTS)
    y = x
    for part in parts:
        y = part(y)
    assert [len(p) for p in parts] == [2, 2, 3]
    assert torch.equal(y, model(x))
    for bad in [(0, 2, 2, 7), (1, 7), (0, 8), (0,)]:
        with pytest.raises(ConfigError):
            split_sequential(model, bad)


def test_stage_payload_round_trips_buffers_without_pickling_weights() -> None:
    module = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU())
    module.register_buffer("scale", torch.full((8,), 2.0), persistent=False)
    module[1].running_mean.fill_(0.5)
    skeleton, weights = stage_payload(module)
    assert all(t.device.type == "meta" for t in skeleton.state_dict().values())
    rebuilt = materialize(skeleton, weights)
    x = torch.randn(3, 4)
    assert torch.allclose(rebuilt(x), module.eval()(x))
    assert torch.equal(rebuilt.get_buffer("scale"), module.get_buffer("scale"))


def test_zfp_keeps_its_error_bound_and_meta() -> None:
    assert zfp_available(), "zfpy is a dependency of edgewise (pyproject.toml)"
    x = torch.from_numpy(np.random.default_rng(1).normal(size=(2, 4, 8, 8, 8)).astype("f4"))
    codec = ActivationCodec("zfp", tolerance=1e-3)
    frame = encode_activation(x, {"id": 7}, codec)
    y, meta = decode_activation(frame)
    assert meta == {"id": 7} and y.shape == x.shape
    assert float((y - x).abs().max()) <= 1e-3
    assert len(frame) < x.numel() * 4
    tiny = torch.ones(3, 5)  # padded ZFP blocks would be larger: sent lossless instead
    assert torch.equal(decode_activation(encode_activation(tiny, {}, codec))[0], tiny)


@pytest.fixture(scope="module")
def pipeline(runtime: RayRuntime) -> Iterator[Dispatcher]:
    """A 3-stage pipeline of ``mlp(0)`` over 1000 Mbit/s links, shared to save start-ups."""
    dispatcher = Dispatcher(runtime, mlp(0), ["nano-0", "nano-1", "nano-3"], CUTS)
    yield dispatcher
    dispatcher.close()


@pytest.mark.ray
def test_three_stages_return_in_order_equal_to_the_whole_model(pipeline: Dispatcher) -> None:
    xs = inputs(16)
    first = pipeline.admitted
    run = stream(pipeline, xs)
    assert run.request_ids == list(range(first, first + 16))
    for got, want in zip(run.outputs, reference(mlp(0), xs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert run.restarts == run.duplicates == 0 and run.bytes["wire_bytes"] > 0
    assert 0 < run.latency_p50_s <= run.latency_p99_s


def _problem(runtime: RayRuntime) -> PipelineProblem:
    """``mlp(0)`` as a chain of its 7 children on the four Nanos, the Pi 5 dispatching; raw
    float32 activations (compression 1), as the dispatcher's default codec sends them
    compressed by LZ4 at most (random floats barely compress)."""
    hidden = ROWS * WIDTH * 4
    chain = ModelChain("mlp", ROWS * 64 * 4, (hidden,) * 6 + (ROWS * 16 * 4,),
                       (1_000_000,) * 7, (1.0,) * 7)
    nodes = tuple(f"nano-{i}" for i in range(4))
    names = ("pi5", *nodes)
    bw = np.array([[0.0 if a == b else runtime.cluster.link(a, b).bandwidth_mbps
                    for b in names] for a in names])
    return PipelineProblem(chain, nodes, (10_000_000,) * 4, bw, compression=1.0,
                           dispatcher="pi5")


@pytest.mark.ray
def test_a_slow_link_limits_throughput(runtime: RayRuntime, pipeline: Dispatcher) -> None:
    """The plan over the 10 Mbit/s nano-2 → nano-3 link: the simulated bound is that link's
    send of one activation, and the emulated pipeline cannot beat it (ratio in one run)."""
    xs = inputs(20)
    fast = stream(pipeline, xs)
    problem = _problem(runtime)
    plan = PipelinePlan(CUTS, (0, 2, 3), 0.0, "hand")
    bound = simulate(problem, lambda _p, _rng: plan)
    frame_s = ROWS * WIDTH * 4 * 8 / (SLOW_MBPS * 1e6)
    assert bound.bottleneck_s == pytest.approx(frame_s, rel=1e-12)
    slow = execute(runtime, problem, plan, model=mlp(0), inputs=xs)
    print(f"throughput: 1000 Mbit/s {fast.throughput_rps:.1f} req/s, "
          f"10 Mbit/s {slow.throughput_rps:.1f} req/s (plan's bound "
          f"{bound.throughput_rps:.1f}); p50 latency {fast.latency_p50_s * 1e3:.0f} / "
          f"{slow.latency_p50_s * 1e3:.0f} ms")
    # a shaped link is never faster than its rate, however idle the host (a loaded host
    # only slows it): an upper bound, not a timing claim. How close the run comes to the
    # bound is `bench seifer`'s measured-versus-planned figure.
    assert slow.throughput_rps <= 1.05 * bound.throughput_rps
    assert slow.request_ids == list(range(20))
    for got, want in zip(slow.outputs, reference(mlp(0), xs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.ray
def test_execute_refuses_a_plan_on_devices_the_cluster_lacks(runtime: RayRuntime) -> None:
    problem = _problem(runtime)
    renamed = dataclasses.replace(problem, nodes=("nano-0", "nano-1", "nano-2", "tx2-9"))
    plan = PipelinePlan(CUTS, (0, 1, 3), 0.0, "hand")
    with pytest.raises(ConfigError, match="tx2-9"):
        execute(runtime, renamed, plan, model=mlp(0), inputs=inputs(1))


@pytest.mark.ray
def test_bandwidth_probe_sees_the_emulated_link(runtime: RayRuntime) -> None:
    slow = measure_bandwidth(runtime, "nano-2", "nano-3", size_bytes=400_000,
                             frame_bytes=32_768)
    fast = measure_bandwidth(runtime, "nano-0", "nano-1", size_bytes=8_000_000,
                             frame_bytes=1_000_000)
    print(f"probe: {slow:.2f} Mbit/s (link 10), {fast:.0f} Mbit/s (link 1000)")
    # The slow link's frames wait out its serialisation time, so the probe sees the link.
    # The probe times arrivals from the first frame's: when a loaded host delays that one,
    # the next ones arrive bunched, and the probe reads more than the link carries (1,101
    # of 1,000 Mbit/s in a suite run on 2026-11-27). So every bound here is 5x away from
    # what was read (9.95 of 10 Mbit/s, 489 to 1,101 of 1,000): an unshaped link (a
    # loopback carries gigabits) fails the slow link's upper one. How exact the probe is,
    # is not yet a bench key (docs/testing.md).
    assert SLOW_MBPS / 5 <= slow <= SLOW_MBPS * 5
    assert fast > 2 * slow  # 489 / 9.95 = 49 beside a suite run: the links told apart


@pytest.mark.ray
def test_a_stage_killed_mid_stream_loses_and_duplicates_nothing(pipeline: Dispatcher) -> None:
    """Stage 1 restarts on the free device nano-2 (``restart="other"``), re-wired."""
    xs, first, restarts = inputs(60, seed=1), pipeline.admitted, pipeline.restarts
    pipeline.restart = "other"

    def kill_after_ten(dispatcher: Dispatcher, result: Result) -> None:
        if result.request_id == first + 9:
            FaultInjector().kill(dispatcher.stage_names[1])

    run = stream(pipeline, xs, on_result=kill_after_ten)
    assert run.request_ids == list(range(first, first + 60))
    assert run.restarts == restarts + 1 and run.resends > 0
    assert [s.device for s in pipeline.stages] == ["nano-0", "nano-2", "nano-3"]
    for got, want in zip(run.outputs, reference(mlp(0), xs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.ray
def test_a_model_switch_mid_stream_drops_nothing(pipeline: Dispatcher) -> None:
    """Runs last: it leaves ``mlp(1)`` in two stages with ZFP (error bound 1e-4) deployed."""
    xs, first, version = inputs(40, seed=2), pipeline.admitted, pipeline.version
    switched_at: list[int] = []
    codec = ActivationCodec("zfp", tolerance=1e-4) if zfp_available() else None

    def switch(dispatcher: Dispatcher, result: Result) -> None:
        if result.request_id == first + 9:
            switched_at.append(dispatcher.admitted - first)
            dispatcher.switch_model(mlp(1), (0, 3, 7), ["nano-1", "nano-2"], codec=codec)

    run = stream(pipeline, xs, on_result=switch)
    assert run.request_ids == list(range(first, first + 40))
    cut = switched_at[0]
    assert 10 <= cut < 40
    assert run.versions == [version] * cut + [version + 1] * (40 - cut)
    for got, want in zip(run.outputs[:cut], reference(mlp(0), xs[:cut]), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    for got, want in zip(run.outputs[cut:], reference(mlp(1), xs[cut:]), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=2e-3)
