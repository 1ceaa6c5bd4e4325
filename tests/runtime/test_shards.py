"""A parameter server cut into shards (``runtime.shards``) takes exactly the steps one server
takes: the oracle is one server fed the same pushes, compared bit for bit (no Ray here; the
engine's sharded runs are in test_training.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from edgewise.errors import ConfigError
from edgewise.nn.models import make_optimizer
from edgewise.runtime.narrowing import BLOCK
from edgewise.runtime.noise_scale import NoiseScale, grad_sq
from edgewise.runtime.plan import TrainConfig
from edgewise.runtime.pscheckpoint import checkpoint_frame, merge_checkpoints, restore
from edgewise.runtime.shards import finished, pooled_noise, shard_range
from edgewise.runtime.syncdelta import SyncDeltas
from edgewise.runtime.trainstate import FlatState, Pushed, mean_pushes
from edgewise.wire.frames import TransportError, WireDtype, decode, to_torch


@given(numel=st.integers(0, 20 * BLOCK + 7), count=st.integers(1, 9))
def test_the_ranges_tile_the_tensor_in_whole_blocks(numel: int, count: int) -> None:
    ranges = [shard_range(numel, i, count) for i in range(count)]
    assert ranges[0][0] == 0 and ranges[-1][1] == numel
    for (_, hi), (lo, _) in itertools.pairwise(ranges):
        assert hi == lo  # contiguous, no overlap
    for lo, hi in ranges:
        assert lo <= hi and lo % BLOCK == 0 and (hi % BLOCK == 0 or hi == numel)
    sizes = [hi - lo for lo, hi in ranges]
    assert max(sizes) - min(sizes) <= 2 * BLOCK or numel < count * BLOCK  # about equal


def test_a_shard_that_does_not_exist_is_refused() -> None:
    with pytest.raises(ValueError, match="shard 3 of 3"):
        shard_range(100, 3, 3)


class _Net(nn.Module):
    """Parameters in several tensors (ranges cut across them) and BatchNorm buffers."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 6 * 6, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))
        return out


def _net() -> nn.Module:
    torch.manual_seed(0)
    return _Net()


class _Server:
    """The server's side of a step, as ``runtime.ps`` takes it: read the pushes, their
    sample-weighted mean, one Adam step of its range."""

    def __init__(self, shard: tuple[int, int], wire: WireDtype) -> None:
        self.flat = FlatState(_net(), wire, shard)
        self.params = self.flat.optimizer_parameters()
        self.opt = make_optimizer("adam", self.params.values(), 0.01, 0.0)
        self.deltas = SyncDeltas(self.flat, 0)

    def step(self, frames: list[bytes]) -> list[Pushed]:
        pushes = [self.flat.read_push(f) for f in frames]
        self.flat.apply_push(mean_pushes(pushes))
        self.opt.step()
        return pushes


def _workers(count: int, wire: WireDtype) -> list[FlatState]:
    return [FlatState(_net(), wire) for _ in range(count)]


def _backward(flat: FlatState, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    flat.zero_grad()
    flat.model.train()
    x = torch.randn(5, 1, 8, 8, generator=generator)
    y = torch.randint(0, 10, (5,), generator=generator)
    nn.functional.cross_entropy(flat.model(x), y).backward()  # type: ignore[no-untyped-call]


def _run(count: int, wire: WireDtype, steps: int = 4) -> tuple[list[_Server], list[FlatState]]:
    """``steps`` synchronous steps of two workers against ``count`` shards; each step's
    replies (the changes, on a narrowed wire) loaded back into the workers."""
    servers = [_Server((i, count), wire) for i in range(count)]
    workers = _workers(2, wire)
    for step in range(steps):
        frames = []
        for w, worker in enumerate(workers):
            _backward(worker, 100 * step + w)
            ids = np.arange(w * 5, w * 5 + 5 + w, dtype=np.int64)  # 5 and 6 samples
            frames.append(worker.gradients_frames(ids, "lz4", base=step, shards=count))
        for index, server in enumerate(servers):
            server.step([f[index] for f in frames])
        for worker in workers:
            for server in servers:
                reply = server.deltas.delta_frame(step + 1, "lz4") if wire != "float32" \
                    else server.flat.weights_frame("lz4", {"updates": step + 1})
                worker.load_weights(reply, change=wire != "float32")
    return servers, workers


def _owned(servers: list[_Server], key: str) -> torch.Tensor:
    return torch.cat([s.flat.owned(key) for s in servers])


@pytest.mark.parametrize("wire", ["float32", "bfloat16", "int8"])
@pytest.mark.parametrize("count", [2, 3])
def test_shards_take_the_steps_of_one_server_bit_for_bit(wire: WireDtype, count: int) -> None:
    """Weights, Adam's moments, the buffers and what the workers hold after the replies: the
    shards' ranges put together are one server's, on every wire (int8's blocks never
    straddle two shards)."""
    (one,), one_workers = _run(1, wire)
    shards, workers = _run(count, wire)
    for key in one.flat.ranges:
        assert torch.equal(_owned(shards, key), one.flat.flats[key])
        for state in ("exp_avg", "exp_avg_sq"):
            merged = torch.cat([s.opt.state[s.params[key]][state] for s in shards])
            assert torch.equal(merged, one.opt.state[one.params[key]][state])
    for key in (k for k in one.flat.flats if k.startswith("b.")):
        assert all(torch.equal(s.flat.flats[key], one.flat.flats[key]) for s in shards)
    for worker, alone in zip(workers, one_workers, strict=True):
        assert all(torch.equal(worker.flats[k], alone.flats[k]) for k in alone.flats)


def test_the_shards_checkpoints_merge_into_one_servers_and_restore_into_any_shards() -> None:
    (one,), _ = _run(1, "float32")
    shards, _ = _run(3, "float32")
    frames = [checkpoint_frame(s.flat, s.params, s.opt, "lz4", {"epoch": 0, "updates": 4})
              for s in shards]
    merged = decode(merge_checkpoints(frames[::-1], "lz4"))  # in any order
    alone = decode(checkpoint_frame(one.flat, one.params, one.opt, "lz4",
                                    {"epoch": 0, "updates": 4}))
    assert merged.meta == alone.meta
    want, got = to_torch(alone), to_torch(merged)
    assert set(got) == set(want) and all(torch.equal(got[k], want[k]) for k in want)
    # restored into two shards, the ranges are the one server's again, and so are the moments
    for index in range(2):
        server = _Server((index, 2), "float32")
        assert restore(merge_checkpoints(frames, "lz4"), server.flat, server.params,
                       server.opt) == 4
        for key, (lo, hi) in server.flat.ranges.items():
            assert torch.equal(server.flat.owned(key), one.flat.flats[key][lo:hi])
            assert torch.equal(server.opt.state[server.params[key]]["exp_avg"],
                               one.opt.state[one.params[key]]["exp_avg"][lo:hi])


def test_checkpoints_of_other_servers_do_not_merge() -> None:
    shards, _ = _run(2, "float32", steps=1)
    frame = checkpoint_frame(shards[0].flat, shards[0].params, shards[0].opt, "lz4", {})
    with pytest.raises(ValueError, match="not the 2 shards"):
        merge_checkpoints([frame, frame], "lz4")


def test_a_shard_refuses_another_shards_range() -> None:
    worker = _workers(1, "float32")[0]
    _backward(worker, 0)
    frames = worker.gradients_frames(np.arange(5, dtype=np.int64), "lz4", shards=2)
    shard = _Server((0, 2), "float32")
    shard.flat.read_push(frames[0])
    with pytest.raises(TransportError, match="does not match"):
        shard.flat.read_push(frames[1])
    with pytest.raises(TransportError, match="does not match"):  # nor a whole model's push
        shard.flat.read_push(worker.gradients_frame(np.arange(5, dtype=np.int64), "lz4"))


def test_the_noise_scale_pools_the_shards_squares() -> None:
    """A step's squared norms over the whole model are the sums over the shards' ranges: the
    pooled estimate is one server's (up to the order of the float sums)."""
    rng = np.random.default_rng(0)
    steps = [[torch.from_numpy(rng.normal(0.3, 1.0, 1000)) for _ in range(3)]
             for _ in range(6)]
    batches = [4, 8, 20]
    one = NoiseScale()
    logs: list[list[tuple[list[tuple[int, float]], float, None, None]]] = [[], []]
    for grads in steps:
        mean = torch.stack([g * b for g, b in zip(grads, batches, strict=True)]).sum(0) \
            / sum(batches)
        one.observe([(b, float(g @ g)) for b, g in zip(batches, grads, strict=True)],
                    float(mean @ mean))
        for log, part in zip(logs, (slice(0, 512), slice(512, 1000)), strict=True):
            log.append(([(b, grad_sq({"p.x": g[part]})) for b, g in
                         zip(batches, grads, strict=True)], grad_sq({"p.x": mean[part]}),
                        None, None))
    plain, adam = pooled_noise(logs)
    assert plain == pytest.approx(one.simple(), rel=1e-9) and adam is None
    reply = finished([{"noise_squares": logs[0], "push_seconds": 1.0, "updates": 6},
                      {"noise_squares": logs[1], "push_seconds": 2.0, "updates": 6}])
    assert reply == {"noise_scale": plain, "noise_scale_adam": None, "push_seconds": 2.0,
                     "updates": 6}


def test_only_the_sync_loop_shards_its_server() -> None:
    assert TrainConfig(mode="sync", ps_shards="workers").ps_shards == "workers"
    with pytest.raises(ConfigError, match="sync loop"):
        TrainConfig(mode="async", ps_shards="workers")
    with pytest.raises(ConfigError, match="auto, one or workers"):
        TrainConfig(mode="sync", ps_shards="all")  # type: ignore[arg-type]
    # auto: sharded for the sync loop, one server for the others
    assert TrainConfig(mode="sync").shards == "workers"
    assert TrainConfig(mode="async").shards == "one"
    assert TrainConfig(mode="sync", ps_shards="one").shards == "one"
