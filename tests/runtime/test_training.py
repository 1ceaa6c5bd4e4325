"""The parameter-server engine on a real local Ray instance: both loops, exact accounting,
checkpoints, and faults injected for real (a killed worker, a stalled device, a cut link)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray

from edgewise.cluster.model import Cluster
from edgewise.errors import RuntimeFault
from edgewise.nn.data import digits_split
from edgewise.runtime.balance import batch_warmup, lr_scale
from edgewise.runtime.engine import TrainResult, train
from edgewise.runtime.faults import (
    ARMED_POLL_S,
    FaultInjector,
    KillMidEpoch,
    progress_poll_s,
)
from edgewise.runtime.health import StrikeLedger
from edgewise.runtime.plan import TrainConfig, equal_plan
from edgewise.runtime.ray_cluster import RayRuntime, start_local
from edgewise.wire.frames import decode

pytestmark = [pytest.mark.ray, pytest.mark.slow]
HEARTBEAT_S = 0.5  # the fault tests': a lost member is found within a second
QUIET_HEARTBEAT_S = 5.0
"""The jobs that inject no fault and assert none: a member silent for 7.5 s (1.5 beats) on
a loaded host is a fault, one silent for 0.8 s is not (a fresh clone's run of 2026-12-02
lost nano-2's worker that way at 0.5 s, and the async job's ``interruptions == ()``
failed)."""
TRAIN_IDS = np.sort(digits_split()[0].ids)


@pytest.fixture(scope="module")
def runtime(small_cluster: Cluster) -> Iterator[RayRuntime]:
    rt = start_local(small_cluster)
    yield rt
    rt.shutdown()


def _config(**kw: Any) -> TrainConfig:
    return TrainConfig(**{"epochs": 2, "heartbeat_s": HEARTBEAT_S, **kw})


def _quiet(**kw: Any) -> TrainConfig:
    return _config(**{"heartbeat_s": QUIET_HEARTBEAT_S, **kw})


def _assert_each_sample_once(result: TrainResult) -> None:
    for record in result.epochs:
        assert np.array_equal(np.sort(record.applied_ids), TRAIN_IDS), record.epoch


@pytest.fixture(scope="module")
def three_epochs(runtime: RayRuntime, tmp_path_factory: pytest.TempPathFactory
                 ) -> tuple[TrainResult, Path]:
    """One asynchronous job of three epochs, and the folder of its checkpoints."""
    folder = tmp_path_factory.mktemp("three-epochs")
    plan = equal_plan(runtime.cluster, len(TRAIN_IDS))
    return train(runtime, _quiet(epochs=3, mode="async"), plan,
                 checkpoint_dir=folder), folder


def test_async_training_accounts_every_sample_once(
        three_epochs: tuple[TrainResult, Path]) -> None:
    result, folder = three_epochs
    assert [r.epoch for r in result.epochs] == [0, 1, 2]
    _assert_each_sample_once(result)
    # it learns (chance is 0.1): three workers' arrival order is the host's, so the curve
    # varies; 0.89-0.94 after three epochs in ten runs on a quiet host, 0.69 once in CI
    assert result.epochs[-1].val_accuracy > 0.5
    assert all(r.device_seconds == r.wall_seconds for r in result.epochs)  # emulated: dilation 1
    assert max(r.staleness_max for r in result.epochs) >= 1  # three workers push concurrently
    assert all(r.noise_scale is None for r in result.epochs)  # measured in sync steps only
    first = result.epochs[0]  # read beside the next epoch (the default): known that late
    assert first.reading_device_seconds > 0 and result.epochs[-1].reading_device_seconds == 0
    assert result.time_to_accuracy(0.0) == first.device_seconds + first.reading_device_seconds
    assert result.time_to_accuracy(1.01) is None
    assert result.interruptions == ()
    assert sum(result.shipped_bytes.values()) > 0
    assert all(t["wire_bytes"] > 0 for t in result.transport_bytes.values())
    checkpoint = folder / "epoch-0002.ewt"
    assert result.checkpoint == checkpoint and decode(checkpoint.read_bytes()).meta["epoch"] == 2


def test_a_resumed_job_trains_only_the_epochs_after_its_checkpoint(
        runtime: RayRuntime, three_epochs: tuple[TrainResult, Path]) -> None:
    """What the manager does after a restart, on the engine itself: a job whose last
    checkpoint is epoch 2's, resumed for five epochs, trains epochs 3 and 4 only, each sample
    once, from that checkpoint's weights (its first epoch as accurate as the last one)."""
    before, folder = three_epochs
    plan = equal_plan(runtime.cluster, len(TRAIN_IDS))
    events: list[tuple[str, dict[str, Any]]] = []
    resumed = train(runtime, _quiet(epochs=5), plan, checkpoint_dir=folder, resume=True,
                    events=lambda kind, data: events.append((kind, data)))
    assert [r.epoch for r in resumed.epochs] == [3, 4]
    assert ("resumed", {"epoch": 3}) in events
    _assert_each_sample_once(resumed)
    assert resumed.epochs[0].val_accuracy > before.epochs[0].val_accuracy
    assert sorted(p.name for p in folder.glob("epoch-*.ewt")) == [
        f"epoch-000{k}.ewt" for k in range(5)]


@pytest.mark.parametrize("transport", ["socket", "ray"])
def test_an_overlapped_push_is_one_version_stale_and_loses_no_sample(
        runtime: RayRuntime, transport: str) -> None:
    """One worker alone, ``async`` with overlap: it computes each batch while the server
    answers the previous push, so every update but an epoch's first is exactly one server
    version old (alone and waiting, each would be 0), and every sample is still trained
    once an epoch; over the data plane and as Ray calls alike."""
    plan = equal_plan(runtime.cluster, len(TRAIN_IDS), exclude=frozenset({"nano-1", "nano-2"}))
    steps = -(-len(TRAIN_IDS) // 32)
    result = train(runtime, _quiet(mode="async", epochs=1, overlap=True,
                                   ps_transport=transport), plan)
    _assert_each_sample_once(result)
    (record,) = result.epochs
    assert record.staleness_max == 1
    assert record.staleness_mean == pytest.approx((steps - 1) / steps)



def test_a_narrowed_wire_shrinks_the_replies_and_still_learns(runtime: RayRuntime) -> None:
    """``wire_dtype`` ``bfloat16`` and ``int8`` reach the server and the worker through the
    engine: one worker's replies (the steps' changes narrowed, ``runtime.syncdelta``, which
    LZ4 may shrink further; the epoch's first pull at float32) are at most about half (a
    quarter, and the first pull) of the bytes of a float32 run's, every sample is trained
    once, and it learns (chance is 0.1)."""
    plan = equal_plan(runtime.cluster, len(TRAIN_IDS), exclude=frozenset({"nano-1", "nano-2"}))
    runs = {wire: train(runtime, _quiet(mode="sync", epochs=1, wire_dtype=wire), plan)
            for wire in ("float32", "bfloat16", "int8")}
    received = {wire: sum(t["wire_bytes_received"] for t in r.transport_bytes.values())
                for wire, r in runs.items()}
    assert received["bfloat16"] / received["float32"] < 0.55, received
    assert received["int8"] / received["float32"] < 0.35, received
    for wire in ("bfloat16", "int8"):
        _assert_each_sample_once(runs[wire])
        assert runs[wire].epochs[-1].val_accuracy > 0.5, wire


def test_sync_training_with_unequal_shards_takes_balanced_steps(runtime: RayRuntime) -> None:
    plan = equal_plan(runtime.cluster, len(TRAIN_IDS))
    shards = {"nano-0": 700, "nano-1": 500, "nano-2": 237}
    plan = type(plan)(shards, plan.batch_sizes, plan.ps_device, plan.store_device)
    # the rate was set for a global batch of 48: it follows the balanced steps' 1437/15
    result = train(runtime, _quiet(mode="sync", epochs=2, lr_reference_batch=48), plan)
    _assert_each_sample_once(result)
    assert result.epochs[-1].val_accuracy > 0.6
    factor = lr_scale("adam", 48, 1437 / 15)
    assert [r.learning_rate for r in result.epochs] == pytest.approx(
        [0.003 * factor * batch_warmup(factor, 2).factor(e) for e in (0, 1)])
    for record in result.epochs:  # balanced steps: every worker the same number, none left
        steps = {w: s["steps"] for w, s in record.worker_stats.items()}
        assert set(steps.values()) == {round(1437 / 96)}, steps
        assert record.staleness_mean == 0 and record.staleness_max == 0
    # the server measured the gradient noise scale over the first epoch's steps (three
    # workers: two batch sizes a step); early on the gradient dominates, so it is finite
    first = result.epochs[0].noise_scale
    assert first is not None and 0 < first < 1e6, first
    # and that of the Adam-preconditioned gradients, from Adam's fifth of 15 steps on: a
    # noisier estimate, None in an epoch whose pooled |G|^2 came out negative (this job's
    # first, on the host where it was written: 2026-12-02), so over the run
    adam = [r.noise_scale_adam for r in result.epochs if r.noise_scale_adam is not None]
    assert adam and all(0 < a < 1e6 for a in adam), result.epochs


    # the same job again takes the same steps: batches seeded by device and epoch, a step's
    # pushes summed in the workers' order (not their arrival's), one thread each; and its
    # pushes and pulls as Ray calls instead of over the data plane change none of them
    again = train(runtime, _quiet(mode="sync", epochs=2, ps_transport="ray",
                                  lr_reference_batch=48), plan)
    _assert_each_sample_once(again)
    assert [(r.val_accuracy, r.noise_scale, r.noise_scale_adam) for r in again.epochs] == [
        (r.val_accuracy, r.noise_scale, r.noise_scale_adam) for r in result.epochs]


def test_readings_beside_the_next_epoch_are_the_readings_after_it(runtime: RayRuntime) -> None:
    """``evaluation="beside"``: an epoch is read while the next one trains, on the
    evaluator's second network. Dropout's masks are seeded like the batches (seed, epoch,
    device) and the reading touches no generator they are drawn from, so a synchronous job
    with dropout reads the same accuracies either way. A reading's lag after its epoch
    counts in the time to accuracy; a target met by a reading beside stops the run after
    the epoch that trained meanwhile, which is read after it (the last has no lag)."""
    from pathlib import Path

    from edgewise.nn.workload.spec import Workload, parse_model

    model = Path(__file__).parent / "models" / "dropout_mlp.py"
    workload = Workload(parse_model(f"py:{model}:make"))
    plan = equal_plan(runtime.cluster, len(TRAIN_IDS), exclude=frozenset({"nano-2"}))
    after = train(runtime, _quiet(mode="sync", epochs=3, workload=workload,
                                  evaluation="after"), plan)
    assert all(r.reading_device_seconds == 0.0 for r in after.epochs)
    first = after.epochs[0].val_accuracy
    beside = train(runtime, _quiet(mode="sync", epochs=3, workload=workload,
                                   evaluation="beside", target_accuracy=first), plan)
    assert beside.stopped_early and len(beside.epochs) == 2
    assert [r.val_accuracy for r in beside.epochs] == [r.val_accuracy for r in after.epochs[:2]]
    _assert_each_sample_once(beside)
    lag, last = (r.reading_device_seconds for r in beside.epochs)
    assert lag > 0 and last == 0.0
    assert beside.time_to_accuracy(first) == \
        pytest.approx(beside.epochs[0].device_seconds + lag)


class _Kills:
    """:class:`KillMidEpoch` hooks, one an epoch: each kills ``kills[epoch]``'s worker once
    that epoch is a third done (each at most once), asking for the fine progress readings
    while one is armed."""

    def __init__(self, kills: dict[int, str]) -> None:
        self.hooks = [KillMidEpoch(device, epoch, len(TRAIN_IDS))
                      for epoch, device in kills.items()]

    @property
    def progress_poll_s(self) -> float | None:
        return progress_poll_s(*self.hooks)

    @property
    def killed_at(self) -> dict[int, float]:
        return {h.epoch: h.fault.at for h in self.hooks if h.fault is not None}

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        for hook in self.hooks:
            hook(kind, data)


def test_killed_workers_are_struck_and_the_third_strike_excludes_a_device(
        runtime: RayRuntime, tmp_path: Path) -> None:
    """nano-1 killed in epoch 1: detected after the kill, struck once, the job goes on with
    it. nano-2, struck twice before, killed in epoch 2: its third strike excludes it, and
    the epoch is trained again on the two devices left. Every epoch trains each sample once
    and no worker outlives the job."""
    ledger = StrikeLedger(tmp_path / "strikes.json")
    ledger.strike("nano-2")
    ledger.strike("nano-2")
    hook = _Kills({1: "nano-1", 2: "nano-2"})
    plan = equal_plan(runtime.cluster, len(TRAIN_IDS))
    result = train(runtime, _config(epochs=3), plan, ledger=ledger, events=hook)
    assert set(hook.killed_at) == {1, 2}
    assert [r.epoch for r in result.epochs] == [0, 1, 2]
    _assert_each_sample_once(result)
    lost = result.interruptions
    assert [(i.device, i.epoch) for i in lost] == [("nano-1", 1), ("nano-2", 2)]
    # detected after the kill, in the epoch it happened in (how soon is a benchmark's
    # matter: a loaded host delays heartbeats, docs/runtime.md)
    assert lost[0].detected_at >= hook.killed_at[1] and lost[1].detected_at >= hook.killed_at[2]
    assert set(result.epochs[1].workers) == {"nano-0", "nano-1", "nano-2"}
    assert StrikeLedger(tmp_path / "strikes.json").counts == {"nano-1": 1, "nano-2": 3}
    assert result.strikes["nano-2"] == 3 and "nano-2" not in result.final_plan.workers
    assert set(result.epochs[-1].workers) == {"nano-0", "nano-1"}
    assert not [n for n in FaultInjector.actors("worker-")]


class _KillServerMidEpoch:
    """Kills the job's actor whose name starts with ``kills[epoch]`` (``ps-``, ``store-``)
    once that epoch is a third done."""

    def __init__(self, kills: dict[int, str]) -> None:
        self.kills = dict(kills)
        self.killed: dict[int, str] = {}
        self._epoch = 0

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "epoch_start":
            self._epoch = data["epoch"]
        if kind == "progress" and self._epoch in self.kills and \
                self._epoch not in self.killed and data["samples"] > len(TRAIN_IDS) // 3:
            [name] = FaultInjector.actors(self.kills[self._epoch])[-1:]
            self.killed[self._epoch] = FaultInjector().kill(name).target

    @property
    def progress_poll_s(self) -> float | None:
        """Fine readings while this epoch's kill is armed (as :class:`KillMidEpoch` asks)."""
        armed = self._epoch in self.kills and self._epoch not in self.killed
        return ARMED_POLL_S if armed else None


def test_a_killed_data_store_then_server_lose_no_sample(runtime: RayRuntime,
                                                        tmp_path: Path) -> None:
    """The data store killed in epoch 1: Ray restarts it (it rebuilds the same shards) and
    the job goes on, nothing interrupted. The parameter server killed in epoch 2: the
    attempt is interrupted with the server's device struck, and the job resumes from the
    last checkpoint. Every epoch trains each sample once."""
    hook = _KillServerMidEpoch({1: "store-", 2: "ps-"})
    plan = equal_plan(runtime.cluster, len(TRAIN_IDS))
    result = train(runtime, _config(epochs=3, ps_shards="one"), plan, events=hook,
                   ledger=StrikeLedger(tmp_path / "strikes.json"))
    assert hook.killed[1].startswith("store-") and hook.killed[2].startswith("ps-")
    assert [r.epoch for r in result.epochs] == [0, 1, 2]
    _assert_each_sample_once(result)
    assert [(i.device, i.epoch) for i in result.interruptions][:1] == [(plan.ps_device, 2)]
    assert "parameter server lost" in result.interruptions[0].reason


def test_a_job_out_of_restarts_fails_clearly(runtime: RayRuntime) -> None:
    """No restart left (``max_restarts=0``): the lost worker ends the job with RuntimeFault,
    and no worker of it is left running."""
    plan = equal_plan(runtime.cluster, len(TRAIN_IDS))
    with pytest.raises(RuntimeFault, match="gave up after 0 restarts"):
        train(runtime, _config(epochs=2, max_restarts=0), plan, events=_Kills({1: "nano-0"}))
    assert not FaultInjector.actors("worker-")


class _Inject:
    """Stalls nano-0 when epoch 1 starts and cuts nano-2 from ``peer`` (a server's device)
    when epoch 2 does."""

    def __init__(self, peer: str) -> None:
        self.at: dict[int, float] = {}
        self.peer = peer

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        epoch = data.get("epoch")
        if kind != "epoch_start" or epoch not in (1, 2) or epoch in self.at:
            return
        self.at[epoch] = time.time()
        if epoch == 1:
            FaultInjector().stall("nano-0", 4 * HEARTBEAT_S)
        else:
            FaultInjector().cut("nano-2", self.peer, 2.0)


@pytest.mark.parametrize(("shards", "peer"), [("one", "pi5"), ("workers", "nano-0")])
def test_a_stalled_device_and_a_cut_link_restart_from_checkpoint(
        runtime: RayRuntime, shards: str, peer: str) -> None:
    """With one server (on pi5) and with its shards on the workers' devices, where the link
    between nano-2 and nano-0 carries each one's exchange with the other's shard: cut, it
    fails both workers, and either end may be struck for it (with one server, nano-2)."""
    # Small batches make an epoch last several heartbeats, long enough to notice the fault.
    plan = equal_plan(runtime.cluster, len(TRAIN_IDS), batch_size=8)
    inject = _Inject(peer)
    try:
        result = train(runtime, _config(epochs=3, ps_shards=shards), plan, events=inject)
    finally:
        FaultInjector().clear()
    # each faulty device is detected in its epoch; on a loaded 2-core host a healthy one's
    # heartbeat can be late too (CI once saw nano-1 first), which is not what this checks
    ends = {"nano-2"} if shards == "one" else {"nano-2", peer}
    for devices, epoch in (({"nano-0"}, 1), (ends, 2)):
        found = [i for i in result.interruptions if i.device in devices and i.epoch == epoch]
        assert found, [(i.device, i.epoch) for i in result.interruptions]
        assert found[0].detected_at >= inject.at[epoch]
    _assert_each_sample_once(result)
    assert [r.epoch for r in result.epochs] == [0, 1, 2]


@ray.remote
def _niceness() -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)


def test_the_emulated_devices_work_at_the_drivers_priority(runtime: RayRuntime) -> None:
    """Ray's default starts workers at nice 15, where any process of the host at nice 0
    (the manager's HTTP server, the driver) takes the CPU from the devices first."""
    assert ray.get(_niceness.remote(), timeout=60) == os.getpriority(os.PRIO_PROCESS, 0)
