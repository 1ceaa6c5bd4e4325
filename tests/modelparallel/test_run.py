"""Real model-parallel training on a local Ray instance: the split forward/backward gives the
unsplit model's gradients and update, the loss falls, and a slow emulated link slows every
iteration by its transfer time."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from edgewise.cluster.schema import cluster_from_dict
from edgewise.errors import ConfigError, InfeasibleError
from edgewise.modelparallel.jct import iteration_time_s, occupancy
from edgewise.modelparallel.jobs import JOB_CPU, period_s
from edgewise.modelparallel.network import random_network
from edgewise.modelparallel.problem import BackgroundTask, EdgeNetwork, EdgeNode, TaskPlacement
from edgewise.modelparallel.realbench import (
    BENCH_BATCH,
    BENCH_WIDTH,
    bench_model,
    digits_batches,
    sequential_job,
    sequential_levels,
    spread_placement,
)
from edgewise.modelparallel.realjob import spread_training
from edgewise.modelparallel.run import (
    ModelParallelTrainer,
    execute,
    network_cluster,
    network_emulation,
    run_placement,
    stage_runs,
    train_model_parallel,
)
from edgewise.runtime.emulation import stretch_factors
from edgewise.runtime.ray_cluster import RayRuntime, start_local
from tests.clusters import MP_CLUSTER, MP_SLOW_MBPS

CUTS = (0, 2, 5, 9)  # conv+relu | conv+relu+pool | flatten+dense+relu+dense
BATCH, ITERATIONS, LR = 64, 30, 0.01


@dataclass
class FastRun:
    first_loss: float
    grads: dict[str, torch.Tensor]
    weights: dict[str, torch.Tensor]
    losses: list[float]
    seconds: list[float]


@pytest.fixture(scope="module")
def runtime() -> Iterator[RayRuntime]:
    rt = start_local(cluster_from_dict(MP_CLUSTER, source="test"))
    yield rt
    rt.shutdown()


@pytest.fixture(scope="module")
def fast(runtime: RayRuntime) -> FastRun:
    """Three stages on fast links, Adam: one step inspected, then trained on."""
    trainer = ModelParallelTrainer(runtime, bench_model(seed=3), CUTS, ["n0", "n1", "n3"],
                                   optimizer="adam", lr=LR)
    try:
        batches = digits_batches(BATCH, ITERATIONS, seed=1)
        loss, seconds = trainer.step(*next(batches))
        run = FastRun(loss, trainer.gradients(), trainer.state_dict(), [loss], [seconds])
        for x, y in batches:
            loss, seconds = trainer.step(x, y)
            run.losses.append(loss)
            run.seconds.append(seconds)
    finally:
        trainer.close()
    return run


@pytest.mark.ray
def test_split_training_gives_the_unsplit_gradients_and_update(fast: FastRun) -> None:
    model = bench_model(seed=3)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    x, y = next(digits_batches(BATCH, 1, seed=1))

    reference = F.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y))
    reference.backward()
    grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
    optimizer.step()

    assert fast.first_loss == pytest.approx(float(reference.detach()), rel=1e-5)
    assert set(fast.grads) == set(grads) == {k for k, _ in model.named_parameters()}
    for name, p in model.named_parameters():
        torch.testing.assert_close(fast.grads[name], grads[name], rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(fast.weights[name], p.detach(), rtol=1e-4, atol=1e-6)


@pytest.mark.ray
def test_training_lowers_the_loss(fast: FastRun) -> None:
    assert len(fast.losses) == ITERATIONS
    assert np.mean(fast.losses[-5:]) < 0.6 * np.mean(fast.losses[:5])


@pytest.mark.ray
def test_a_slow_link_slows_every_iteration(runtime: RayRuntime) -> None:
    slow = train_model_parallel(runtime, bench_model(seed=3), CUTS, ["n0", "n1", "n2"],
                                digits_batches(BATCH, 4, seed=1), optimizer="adam", lr=LR)

    # Stage 1 -> 2 carries a BATCH x 32 x 4 x 4 float32 activation forward and its gradient
    # back over the slow link: every iteration lasts at least that long. A lower bound that
    # a loaded host cannot break (it only adds time); the unshaped run's iterations take
    # about half of it, so a link that is not shaped fails here. (Comparing with the fast
    # run's mean instead flaked on a loaded host: its compute slowed by more than the margin.)
    extra_s = 2 * BATCH * 32 * 16 * 4 * 8 / (MP_SLOW_MBPS * 1e6)
    assert min(slow.iteration_s[1:]) > 0.8 * extra_s
    assert all(a + b > 0.8 * extra_s for a, b in zip(*slow.transfer_s[1:], strict=True))
    assert slow.mean_transfer_s > 0.8 * extra_s
    assert slow.wire_bytes[1] >= len(slow.losses) * BATCH * 32 * 16 * 4


@pytest.mark.ray
def test_partitions_devices_and_optimizer_are_checked(runtime: RayRuntime) -> None:
    with pytest.raises(ConfigError, match="devices"):
        ModelParallelTrainer(runtime, bench_model(), CUTS, ["n0", "n1"])
    with pytest.raises(ConfigError, match="optimizer"):
        ModelParallelTrainer(runtime, bench_model(), CUTS, ["n0", "n1", "n2"], optimizer="lbfgs")


@pytest.mark.ray
def test_run_placement_runs_one_stage_per_run_of_levels(runtime: RayRuntime) -> None:
    nodes = tuple(EdgeNode(f"n{i}", cpu=1.0, memory_mb=2048) for i in range(4))
    network = EdgeNetwork(nodes)
    model, cuts = bench_model(seed=3), sequential_levels(bench_model())
    job = sequential_job(model, cuts, torch.zeros(1, 1, 8, 8), BATCH, origin=0)
    x, y = next(digits_batches(BATCH, 1, seed=1))
    with torch.no_grad():
        reference = float(F.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y)))

    run = run_placement(runtime, network, job, TaskPlacement((0, 0, 3, 3)), model, cuts,
                        digits_batches(BATCH, 3, seed=1), optimizer="adam", lr=LR)

    assert run.devices == ("n0", "n3") and len(run.compute_s) == 2
    assert run.losses[0] == pytest.approx(reference, rel=1e-5)
    # only the level 1 -> 2 boundary crosses a link: BATCH x 512 float32 each way
    assert run.wire_bytes[0] >= 3 * BATCH * 512 * 4


@pytest.mark.ray
def test_execute_runs_transfers_at_the_environments_shared_rate(runtime: RayRuntime) -> None:
    """n1's 40 Mbps link also carries a background task's 30 Mbps: the environment gives the
    job's transfer an equal share of it (2× its lone time), and so does the real run."""
    from edgewise.modelparallel.schedule import Round

    nodes = tuple(EdgeNode(f"n{i}", cpu=1.0, memory_mb=2048,
                           bandwidth_mbps=40.0 if i == 1 else 1000.0) for i in range(4))
    network = EdgeNetwork(nodes)
    model = bench_model(seed=3)
    job = sequential_job(model, CUTS, torch.zeros(1, 1, 8, 8), BATCH, origin=0)
    place = TaskPlacement((0, 1, 1))
    rnd = Round(network, (job,), (BackgroundTask(1, 0.0, 0.0, 30.0),))
    alone = 2 * job.partitions[0].out_mb * 8 / 40.0
    occ = occupancy(network, [job], [place], rnd.background)
    shared = iteration_time_s(job, place, EdgeNetwork(nodes, host_gflops=math.inf), occ)
    assert shared == pytest.approx(2 * alone)

    run, = execute(runtime, rnd, (place,), model=model, cuts=CUTS,
                   batches=digits_batches(BATCH, 4, seed=1), optimizer="adam", lr=LR)

    # the shaped share is a floor the real run cannot beat (alone it would be about 1x);
    # a loaded host only adds to it: 2.05x the share was measured in a suite run
    # (2026-11-28), so no upper bound is checked here
    assert run.mean_transfer_s > 1.6 * alone


@pytest.mark.ray
def test_spread_training_spreads_the_levels_from_the_origin(runtime: RayRuntime) -> None:
    """`modelparallel run`'s training: the bench CNN's four levels from n1 over the others,
    its first loss the unsplit model's on the first batch."""
    x, y = next(digits_batches(BENCH_BATCH, 1, seed=3))
    with torch.no_grad():
        reference = float(F.cross_entropy(bench_model(3, BENCH_WIDTH)(torch.from_numpy(x)),
                                          torch.from_numpy(y)))

    run = spread_training(runtime, "n1", iterations=2, seed=3)

    assert run.devices == ("n1", "n0", "n2", "n3") and len(run.losses) == 2
    assert run.losses[0] == pytest.approx(reference, rel=1e-5)
    with pytest.raises(ConfigError, match="ghost"):
        spread_training(runtime, "ghost")


# --- the adapter from the environment's job and placement (no Ray) --------------------------


def test_sequential_job_matches_a_hand_count() -> None:
    batch, mb = 4, 1e6
    job = sequential_job(bench_model(width=16), CUTS, torch.zeros(1, 1, 8, 8), batch, origin=2)

    # conv1 2*1024*9 + relu 1024 | conv2 2*2048*144 + relu 2048 + pool 512 | flatten 0 +
    # dense 2*64*512 + relu 64 + dense 2*10*64 (FLOPs per sample, multiply-add = 2)
    flops = (18432 + 1024, 589824 + 2048 + 512, 65536 + 64 + 1280)
    params = (640, 18560, 131328 + 2600)  # bytes: weights + biases, float32
    acts = (4096 + 4096, 8192 + 8192 + 2048, 2048 + 256 + 256 + 40)  # bytes per sample
    outs = (4096, 2048, 40)
    assert job.origin == 2 and job.input_mb == pytest.approx(256 * batch / mb)
    for k, p in enumerate(job.partitions):
        assert p.gflop == pytest.approx(3 * flops[k] * batch / 1e9)
        assert p.memory_mb == pytest.approx((3 * params[k] + acts[k] * batch) / mb)
        assert p.out_mb == pytest.approx(outs[k] * batch / mb)
        assert p.cpu == pytest.approx(JOB_CPU * flops[k] / sum(flops))
    # one iteration every period_s keeps JOB_CPU busy: activation and gradient at that rate
    period = period_s(3 * sum(flops) * batch / 1e9)
    for k, p in enumerate(job.partitions):
        assert p.out_mbps == pytest.approx(2 * 8 * outs[k] * batch / mb / period)
    assert job.input_mbps == pytest.approx(8 * 256 * batch / mb / period)


def test_network_cluster_emulates_each_node_at_its_cpu_share() -> None:
    network = random_network(5, np.random.default_rng(4))
    cluster = network_cluster(network)
    stretch = stretch_factors(cluster, network_emulation(network))

    for i, node in enumerate(network.nodes):
        assert cluster.device(node.name).memory_mb == int(node.memory_mb)
        assert stretch[node.name] == pytest.approx(1.0 / node.cpu)
        for other in network.nodes[i + 1:]:  # a lone transfer: the slower of the two links
            assert cluster.link(node.name, other.name).bandwidth_mbps == pytest.approx(
                min(node.bandwidth_mbps, other.bandwidth_mbps))


def test_spread_placement_uses_the_origin_then_its_neighbours() -> None:
    network = random_network(5, np.random.default_rng(4))
    job = sequential_job(bench_model(), CUTS, torch.zeros(1, 1, 8, 8), 8, origin=1)

    hosts = spread_placement(network, job).nodes

    assert hosts[0] == 1 and len(hosts) == 3
    assert set(hosts[1:]) <= set(network.candidates(1))


def test_levels_of_the_bench_model_and_their_stage_runs() -> None:
    # conv+relu | conv+relu+pool+flatten | dense+relu | dense: weight-free children join
    # the level before them (jobs.model_profile's rule)
    assert sequential_levels(bench_model()) == (0, 2, 6, 8, 9)
    assert stage_runs(TaskPlacement((3, 3, 1, 3))) == ((0, 2), (2, 3), (3, 4))
    assert stage_runs(TaskPlacement((2, 2, 2, 2))) == ((0, 4),)
    assert stage_runs(TaskPlacement((0, 1, 2, 3))) == ((0, 1), (1, 2), (2, 3), (3, 4))


def test_levels_on_one_node_predict_as_one_partition_there() -> None:
    """The prediction the real run is compared with: levels merged into a stage cost what
    that stage as a single partition costs (compute adds up, no transfer inside a run)."""
    network = random_network(5, np.random.default_rng(4))
    example, model = torch.zeros(1, 1, 8, 8), bench_model()
    levels = sequential_job(model, sequential_levels(model), example, 64, origin=1)
    merged = sequential_job(model, (0, 6, 9), example, 64, origin=1)
    level_place, merged_place = TaskPlacement((1, 1, 3, 3)), TaskPlacement((1, 3))
    for a, b in ((levels, level_place), (merged, merged_place)):
        assert len(stage_runs(b)) == 2 and len(a.partitions) == len(b.nodes)
    assert iteration_time_s(levels, level_place, network, occupancy(
        network, [levels], [level_place])) == pytest.approx(iteration_time_s(
            merged, merged_place, network, occupancy(network, [merged], [merged_place])))


def test_run_placement_refuses_a_node_without_the_memory() -> None:
    nodes = tuple(EdgeNode(f"e{i}", cpu=0.5, memory_mb=m) for i, m in enumerate((4096, 1, 4096)))
    network = EdgeNetwork(nodes)
    job = sequential_job(bench_model(), CUTS, torch.zeros(1, 1, 8, 8), 64, origin=0)
    runtime = RayRuntime(network_cluster(network), {}, emulated=True)  # Ray is never reached

    with pytest.raises(InfeasibleError, match="e1"):
        run_placement(runtime, network, job, TaskPlacement((0, 1, 1)), bench_model(), CUTS, [])
    with pytest.raises(ConfigError, match="partitions"):
        run_placement(runtime, network, job, TaskPlacement((0, 1)), bench_model(), CUTS, [])
