"""Shared fixtures: a real local Ray instance emulating a small cluster."""

from __future__ import annotations

import gc
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

from edgewise.cluster.examples import examples_dir
from edgewise.cluster.model import Cluster
from edgewise.cluster.schema import cluster_from_dict, load_cluster
from edgewise.runtime.ray_cluster import emulated_resources, share_local, shared, unshare_local
from edgewise.service import JobManager, Store
from edgewise.service.problems import discover_problems, job_kinds
from tests.clusters import LAB_CLUSTER, SESSION_CLUSTERS, SMALL_CLUSTER
from tests.needs import in_ci

# Hypothesis in CI: the same examples every run (a failure reproduces; a pass is not luck),
# no per-example deadline (a loaded 2-core runner is slow, and speed is not what these test).
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if in_ci() else "dev")

# Per-test time limits (pytest-timeout): 120 s by default (pyproject.toml), more for these
# (a Ray test waits on emulated devices, which a loaded host slows).
MARKER_TIMEOUT_S = {"ray": 300, "slow": 300, "system": 600}


# Tests marked `own_instance` start a Ray instance of their own in the test process, which
# ends the shared one (its added nodes and pooled member processes with it): they run last,
# so that no later test builds them again (a foreign-head test in mid-run cost its worker
# six nodes and every pooled process, 2026-12-01).
#
# Under pytest-xdist (`make test` runs two workers), tests that share something only one
# process can hold run on one worker, and go first, so that the long groups overlap: the
# session's served manager (one per worker that uses it) and the testbed (its namespaces
# and cgroups have fixed names).
XDIST_GROUPS = ("manager", "testbed")


def _group(item: pytest.Item) -> str | None:
    if "manager" in getattr(item, "fixturenames", ()):
        return "manager"
    if {"testbed", "suites"} & set(item.path.parts):
        return "testbed"
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        if item.get_closest_marker("timeout") is not None:
            continue
        limits = [s for name, s in MARKER_TIMEOUT_S.items() if item.get_closest_marker(name)]
        if limits:
            item.add_marker(pytest.mark.timeout(max(limits)))
    rank = {g: k for k, g in enumerate(XDIST_GROUPS)}
    items.sort(key=lambda i: (i.get_closest_marker("own_instance") is not None,
                              rank.get(_group(i) or "", len(rank))))  # stable: order kept


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection loaded (every test module, PyTorch, Ray) lives as long as the
    process: out of the cyclic collector's walks from here on (``gc.freeze``; one full
    collection with PyTorch loaded walks ~200,000 objects, 0.1 CPU-seconds)."""
    gc.freeze()


def _session_resources() -> dict[str, float]:
    """The devices of every shipped example cluster and of the test clusters several modules
    run on (tests/clusters.py): the shared instance carries them from its first start, so that
    their tests add no Ray node (each added node is a raylet and two Python agents, about
    4 CPU-seconds over a run; a suite run of 2026-12-03 added 29 on its two workers). Clusters
    of other devices or memories still get a node of their own when they first run."""
    clusters = [load_cluster(p) for p in sorted(examples_dir().glob("*.yaml"))]
    clusters += [cluster_from_dict(c, source="test") for c in SESSION_CLUSTERS]
    resources: dict[str, float] = {}
    for cluster in clusters:
        resources |= emulated_resources(cluster, tagged=True)
    return resources


@pytest.fixture(scope="session", autouse=True)
def _one_ray_instance() -> Iterator[None]:
    """One local Ray instance for every emulation test of the session (Ray's own suite does
    the same): each test's cluster gets its devices on it under a tag of its own, and a
    runtime's shutdown ends only what it left behind. Tests that need an instance of their
    own (a foreign head, a testbed, a manager process) get one: they join or start another
    process, never this one."""
    pool = share_local(_session_resources())
    yield
    RAY_STARTS.append((pool.starts, pool.added))
    unshare_local()


RAY_STARTS: list[tuple[int, int]] = []


@pytest.fixture(autouse=True)
def _ray_marker_is_set(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that runs work on the shared Ray instance carries the ``ray`` marker (so that
    ``-m "not ray"`` means what it says)."""
    pool = shared()
    before = pool.uses if pool is not None else 0
    yield
    if pool is not None and pool.uses > before and \
            request.node.get_closest_marker("ray") is None:
        pytest.fail("this test starts work on Ray: mark it @pytest.mark.ray", pytrace=False)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """How often the shared instance started, and how many clusters joined it as nodes (in
    one process; under pytest-xdist each worker has its own instance and prints nothing)."""
    if RAY_STARTS and RAY_STARTS[-1] != (0, 0):
        starts, added = RAY_STARTS[-1]
        terminalreporter.write_line(f"the shared local Ray instance started {starts} time(s); "
                                    f"{added} cluster(s) joined it as nodes")


@pytest.fixture(scope="session")
def small_cluster() -> Cluster:
    return cluster_from_dict(SMALL_CLUSTER, source="test")


@pytest.fixture(scope="session", autouse=True)
def _private_folders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The commands' state (strikes, checkpoints, profiles) and the traced-chain cache in
    temporary folders, never the user's ~/.local/state/edgewise or ~/.cache; a test that
    needs its own sets them again."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("EDGEWISE_STATE_DIR", str(tmp_path_factory.mktemp("state")))
        env.setenv("EDGEWISE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


# The manager API tests (service and the problems' routers): a small cluster, a dry-run backend.
@pytest.fixture
def cluster() -> Cluster:
    return cluster_from_dict(LAB_CLUSTER)


@pytest.fixture
def backend(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobManager]:
    """A dry-run manager: it checks and stores jobs of every installed kind, runs none."""
    state = tmp_path_factory.mktemp("manager")
    store = Store(state / "manager.db")
    yield JobManager(store, job_kinds(discover_problems()), cluster, state_dir=state)
    store.close()


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every way to open a connection raises and is recorded: the list of attempts."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args)
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return attempts
