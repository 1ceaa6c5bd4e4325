"""Training plans (equal shards, validation) and the data they split (digits, shards)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgewise.cluster.model import Cluster
from edgewise.cluster.schema import cluster_from_dict, load_cluster
from edgewise.errors import ConfigError
from edgewise.nn.data import digits_split, shard_indices
from edgewise.runtime.plan import TrainConfig, TrainPlan, equal_plan

TESTBED = Path(__file__).parents[2] / "examples" / "deep-edge-testbed.yaml"


def _workers_only(n: int) -> Cluster:
    devices: list[dict[str, Any]] = [{"name": f"w{i}", "type": "jetson-nano"} for i in range(n)]
    return cluster_from_dict({"name": "workers", "devices": devices}, source="test")


@pytest.fixture(scope="module")
def testbed() -> Cluster:
    return load_cluster(TESTBED)


# --- equal_plan ----------------------------------------------------------------------------


@given(n_workers=st.integers(min_value=1, max_value=9), n=st.integers(min_value=0, max_value=5000))
def test_equal_shards_differ_by_at_most_one_and_cover_the_data(n_workers: int, n: int) -> None:
    cluster = _workers_only(n_workers)

    plan = equal_plan(cluster, n, batch_size=16)

    sizes = list(plan.shards.values())
    assert set(plan.shards) == set(cluster.device_names)
    assert sum(sizes) == n
    assert max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)  # the remainder goes to the first workers
    assert dict(plan.batch_sizes) == dict.fromkeys(cluster.device_names, 16)


def test_equal_plan_respects_roles(testbed: Cluster) -> None:
    plan = equal_plan(testbed, 1437, batch_size=32)

    assert plan.ps_device == "pi-ps"
    assert plan.store_device == "pi-store"
    assert set(plan.shards) == {"tx2-0", "nano-0", "nano-1", "nano-2"}
    assert sorted(plan.shards.values()) == [359, 359, 359, 360]
    assert plan.policy == "equal"
    plan.validate(testbed, 1437)


def test_equal_plan_without_server_or_store_roles_falls_back_to_first_worker() -> None:
    plan = equal_plan(_workers_only(3), 10)

    assert plan.ps_device == "w0"
    assert plan.store_device == "w0"


def test_equal_plan_excludes_devices(testbed: Cluster) -> None:
    plan = equal_plan(testbed, 1437, exclude=frozenset({"nano-1", "tx2-0"}))

    assert set(plan.shards) == {"nano-0", "nano-2"}
    assert set(plan.batch_sizes) == {"nano-0", "nano-2"}
    assert sum(plan.shards.values()) == 1437


def test_equal_plan_with_no_worker_left_is_a_config_error(testbed: Cluster) -> None:
    everyone = frozenset(testbed.device_names)

    with pytest.raises(ConfigError) as info:
        equal_plan(testbed, 100, exclude=everyone)

    assert info.value.field == "devices"


# --- TrainPlan.validate --------------------------------------------------------------------


def _plan(**changes: Any) -> TrainPlan:
    base: dict[str, Any] = {
        "shards": {"nano-0": 50, "nano-1": 50},
        "batch_sizes": {"nano-0": 8, "nano-1": 8},
        "ps_device": "pi-ps",
        "store_device": "pi-store",
    }
    base.update(changes)
    return TrainPlan(**base)


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"shards": {"nano-0": 50, "ghost": 50}}, "shards", "ghost"),
        ({"batch_sizes": {"nano-0": 8, "nano-1": 8, "ghost": 8}}, "batch_sizes", "ghost"),
        ({"ps_device": "ghost"}, "ps_device", "ghost"),
        ({"store_device": "ghost"}, "store_device", "ghost"),
        ({"shards": {"nano-0": 50, "nano-1": 49}}, "shards", "99"),
        ({"batch_sizes": {"nano-0": 8}}, "batch_sizes", "nano-1"),
        ({"batch_sizes": {"nano-0": 8, "nano-1": 0}}, "batch_sizes", "nano-1"),
    ],
    ids=[
        "unknown-shard",
        "unknown-batch",
        "unknown-ps",
        "unknown-store",
        "wrong-sum",
        "missing-batch",
        "zero-batch",
    ],
)
def test_validate_names_the_field(
    testbed: Cluster, changes: dict[str, Any], field: str, words: str
) -> None:
    plan = _plan(**changes)

    with pytest.raises(ConfigError) as info:
        plan.validate(testbed, 100)

    assert info.value.field == field
    assert words in str(info.value)


def test_validate_accepts_a_plan_that_covers_the_data_once(testbed: Cluster) -> None:
    plan = _plan(shards={"nano-0": 100, "nano-1": 0}, batch_sizes={"nano-0": 8})

    plan.validate(testbed, 100)

    assert plan.workers == ("nano-0",)


# --- shard_indices -------------------------------------------------------------------------


@st.composite
def _shard_request(draw: st.DrawFn) -> tuple[int, dict[str, int]]:
    sizes = draw(st.lists(st.integers(min_value=0, max_value=200), min_size=1, max_size=6))
    n = sum(sizes) + draw(st.integers(min_value=0, max_value=100))
    return n, {f"w{i}": s for i, s in enumerate(sizes)}


@given(request=_shard_request(), seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_shards_are_disjoint_in_range_sized_and_deterministic(
    request: tuple[int, dict[str, int]], seed: int
) -> None:
    n, sizes = request

    shards = shard_indices(n, sizes, np.random.default_rng(seed))
    again = shard_indices(n, sizes, np.random.default_rng(seed))

    assert list(shards) == list(sizes)
    assert {k: len(v) for k, v in shards.items()} == sizes
    everything = np.concatenate(list(shards.values()))
    assert len(np.unique(everything)) == len(everything)
    assert all(0 <= i < n for i in everything.tolist())
    assert all(np.array_equal(shards[k], again[k]) for k in sizes)


def test_different_seeds_give_different_shards() -> None:
    a = shard_indices(1000, {"w0": 500, "w1": 500}, np.random.default_rng(1))
    b = shard_indices(1000, {"w0": 500, "w1": 500}, np.random.default_rng(2))

    assert not np.array_equal(a["w0"], b["w0"])


@pytest.mark.parametrize(
    ("n", "sizes"),
    [(10, {"w0": -1, "w1": 5}), (10, {"w0": 6, "w1": 5})],
    ids=["negative", "oversized"],
)
def test_bad_shard_sizes_are_config_errors(n: int, sizes: dict[str, int]) -> None:
    with pytest.raises(ConfigError) as info:
        shard_indices(n, sizes, np.random.default_rng(0))

    assert info.value.field == "shards"


# --- digits_split --------------------------------------------------------------------------


def test_digits_split_sizes_and_shapes() -> None:
    train, val = digits_split()

    assert (len(train), len(val)) == (1437, 360)
    assert train.x.shape == (1437, 1, 8, 8)
    assert train.x.dtype == np.float32
    assert float(train.x.min()) >= 0.0 and float(train.x.max()) <= 1.0


def test_digits_split_is_stratified() -> None:
    train, val = digits_split()

    train_counts = np.bincount(train.y, minlength=10)
    val_counts = np.bincount(val.y, minlength=10)

    assert (train_counts > 0).all() and (val_counts > 0).all()
    # Stratified: each class's share of the validation split is ~20 %.
    share = val_counts / (train_counts + val_counts)
    assert np.all(np.abs(share - 0.2) < 0.02)


def test_digits_split_ids_are_unique_and_disjoint() -> None:
    train, val = digits_split()

    ids = np.concatenate([train.ids, val.ids])

    assert len(np.unique(ids)) == 1797
    assert set(ids.tolist()) == set(range(1797))


def test_digits_split_is_deterministic_for_a_seed() -> None:
    a, _ = digits_split(seed=3)
    b, _ = digits_split(seed=3)
    c, _ = digits_split(seed=4)

    assert np.array_equal(a.ids, b.ids)
    assert not np.array_equal(a.ids, c.ids)


def test_the_evaluator_is_the_fastest_planned_worker(testbed: Cluster) -> None:
    """Deep-Edge's testbed: the TX2 evaluates while it trains, a Nano once it does not, and
    never the parameter server's Pi (the slowest device)."""
    from types import SimpleNamespace

    from edgewise.runtime.launch import evaluator_device

    runtime: Any = SimpleNamespace(cluster=testbed)
    plan = equal_plan(testbed, 1000)
    assert evaluator_device(runtime, plan) == "tx2-0"
    without = TrainPlan({**plan.shards, "tx2-0": 0, "nano-0": 250 + plan.shards["tx2-0"]},
                        plan.batch_sizes, plan.ps_device, plan.store_device)
    assert evaluator_device(runtime, without) == "nano-0"  # the first of equals



def test_the_auto_wire_is_bfloat16_changes_for_sync_and_float32_for_async() -> None:
    """``wire_dtype="auto"`` (the default): the ``sync`` loop's messages in bfloat16, its
    replies as changes (runtime.syncdelta); the asynchronous loops at float32; a named dtype
    is kept whatever the loop, and only a narrowed ``sync`` run sends changes."""
    from edgewise.runtime.launch import MemberSpec

    assert TrainConfig().wire_dtype == "auto"
    cases = {("auto", "sync"): ("bfloat16", True), ("auto", "async"): ("float32", False),
             ("auto", "async-paper"): ("float32", False), ("float32", "sync"): ("float32", False),
             ("float16", "async"): ("float16", False), ("float16", "sync"): ("float16", True),
             ("int8", "sync"): ("int8", True)}
    for (choice, mode), (wire, changes) in cases.items():
        config = TrainConfig(mode=mode, wire_dtype=choice)  # type: ignore[arg-type]
        spec = MemberSpec.of(config)
        assert (config.wire, spec.wire_dtype, spec.sync_deltas) == (wire, wire, changes)
