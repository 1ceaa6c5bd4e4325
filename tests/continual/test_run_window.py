"""The real runtime's window: planned vs real retraining completion, re-planning on a
completion (Algorithm 1), per-stream inference profiles and device-time accounting."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
import ray

from edgewise.continual.calibration import stream_inference_options
from edgewise.continual.problem import InferenceOption, default_inference_configs
from edgewise.continual.run import DEVICE, LiveProblem, RunSettings, edge_cluster, execute
from edgewise.nn.continual_models import golden_model, model_to_frame, predict, pretrained_edge
from edgewise.nn.streams import DigitsStream, digits_streams
from edgewise.runtime.colocated import RetrainActor, sampled_predictions
from edgewise.runtime.emulation import EmulationConfig
from edgewise.runtime.ray_cluster import RayRuntime, start_local


@pytest.fixture(scope="module")
def runtime() -> Iterator[RayRuntime]:
    rt = start_local(edge_cluster(), EmulationConfig(host_cores=2))
    yield rt
    rt.shutdown()


def test_stream_inference_factors_come_from_the_streams_own_frames() -> None:
    window = DigitsStream("cam", 3, n_windows=1).window(0)
    model, golden = pretrained_edge(0), golden_model(0)
    configs = default_inference_configs()
    given = tuple(InferenceOption(c.name, 0.99, 0.1 * (i + 1)) for i, c in enumerate(configs))
    got = stream_inference_options(model, window, golden, configs, given)
    assert [o.demand for o in got] == [o.demand for o in given]  # demands are kept
    full, truth = predict(model, window.x), predict(golden, window.x)
    every_4th = {i: int(full[i]) for i in range(0, len(full), 4)}
    expected = (sampled_predictions(every_4th, len(full)) == truth).mean() / (full == truth).mean()
    by_name = {o.config: o for o in got}
    assert by_name["s1-r1"].accuracy_factor == pytest.approx(1.0)
    assert by_name["s0.25-r1"].accuracy_factor == pytest.approx(min(1.0, expected))


@pytest.mark.ray
def test_epoch_cost_is_measured_per_configuration_and_share(runtime: RayRuntime) -> None:
    opts = runtime.actor_options(DEVICE, 64)
    # a device as fast as the host (stretch 1): a share of 0.25 already makes its epoch 4x
    actor = ray.remote(RetrainActor).options(**opts, max_concurrency=2).remote(1.0)
    w = DigitsStream("cam", 0, n_windows=1).window(0)
    config = {"epochs": 1, "batch_size": 32, "last_layer_neurons": 64, "layers_frozen": 0}
    weights = model_to_frame(pretrained_edge(0))
    full, quarter = ray.get([actor.epoch_cost.remote(weights, w.train_x[:64],
                                                     w.train_y[:64], [config], share)
                             for share in (1.0, 0.25)])
    # one cost per configuration at each share; that a share leaves the device-seconds
    # unchanged is the accounting's arithmetic (tests/runtime/test_throttle.py), which a
    # loaded host's wall clock cannot check here (it read a ratio of 2.9 against 1)
    assert len(full) == len(quarter) == 1 and full[0] > 0 and quarter[0] > 0
    ray.kill(actor)


@pytest.mark.ray
def test_plan_predicts_retraining_completion_and_replans(runtime: RayRuntime) -> None:
    # A device 3x slower than the host (the default is 15x) leaves retraining clearly worth
    # planning: measured costs and demands scaled up 6x (a loaded host inflates them) still
    # gave a plan that retrains both streams; at 15x, 2x already planned none (CI, 2026-12-05).
    streams = digits_streams(2, seed=0, n_windows=1)
    settings = RunSettings(window_s=4.0, stretch=3.0, seed=0)
    results = execute(runtime, LiveProblem(tuple(streams), 1, settings), "thief")
    r = results[0]
    planned = {n for n, t in r.planned_finish_s.items() if math.isfinite(t)}
    assert planned, "the thief planned no retraining on these streams"
    finished = {n: t for n, t in r.finish_s.items() if math.isfinite(t)}
    assert set(finished) <= planned  # only the planned retrainings ran
    for name in finished:
        assert r.epochs_done[name] > 0 and r.epoch_cost_s[name] > 0
    # Algorithm 1 re-runs when a retraining completes with time left in the window: once
    # at least if one completed early, and never more often than retrainings completed.
    # (How close the real finish comes to the planned one is `bench ekya`'s figure.)
    # The driver re-plans on seeing a completion before 98 % of the window, which is later
    # than the finish the actor's clock reports by the call's start and its result's
    # return: an actor call's round trip took at most 0.14 s at load average 15 on 2 cores
    # (2.8 ms idle). "Early" is half the window, 1.9 s before that cut: over 5x the delay.
    early = [n for n, t in finished.items() if t < 0.5 * 4.0]
    assert min(1, len(early)) <= r.replans <= len(finished)
    assert set(r.golden_accuracy) == set(r.accuracy) == {"cam0", "cam1"}
    assert all(0.0 <= a <= 1.0 for a in r.planned_accuracy.values())
    assert np.isfinite(r.plan.accuracy)


def test_live_problem_and_policy_are_checked_before_any_actor_starts() -> None:
    from edgewise.errors import ConfigError

    streams = tuple(digits_streams(1, seed=0, n_windows=2))
    with pytest.raises(ConfigError, match="no stream"):
        LiveProblem((), 1)
    with pytest.raises(ConfigError, match="windows"):
        LiveProblem(streams, 3)
    with pytest.raises(ConfigError, match="unknown policy"):
        execute(None, LiveProblem(streams, 1), "nope")  # no runtime is touched
