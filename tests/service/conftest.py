"""The manager served for the session (see managerproc.py), for the slower tests.

The tests that use it run first and one after another (tests/conftest.py sorts them so,
and under pytest-xdist sends them to one worker as a group). It is stopped after the last
of them, not at the end of the session: an idle served manager takes 0.15 of a core (its
six device agents' heartbeats, the health monitor, Ray's head; 4.6 CPU-seconds per 30 s,
measured 2026-11-27), which the rest of the session would pay for nothing."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from managerproc import ManagerProcess

_SERVED: list[ManagerProcess] = []


@pytest.fixture(scope="session")
def manager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagerProcess]:
    """The example cluster (deep-edge-testbed) served for the tests that use it."""
    _one_worker_serves(tmp_path_factory)
    process = ManagerProcess(tmp_path_factory.mktemp("served"))
    process.start()
    _SERVED.append(process)
    yield process
    process.stop()


def _one_worker_serves(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Under pytest-xdist, fail if another worker serves the manager too: the tests that
    use it are one ``xdist_group`` (tests/conftest.py), and a second served manager costs a
    Ray instance, six device agents and their jobs' processes (its Ray workers alone used
    67 CPU-seconds in a run of 2026-12-04, when pytest 9.2 had silently broken the
    grouping). Each serving worker leaves a file named after it in the run's shared folder."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        return
    shared = tmp_path_factory.getbasetemp().parent
    (shared / f"served-manager-by-{worker}").touch()
    others = sorted(p.name.removeprefix("served-manager-by-")
                    for p in shared.glob("served-manager-by-*")
                    if p.name != f"served-manager-by-{worker}")
    if others:
        pytest.fail(f"the served manager's tests ran on more than one pytest-xdist worker "
                    f"({', '.join([*others, worker])}): --dist loadgroup did not group them "
                    "(pytest-xdist#1386 under pytest 9.2; pyproject.toml keeps pytest below 9.2)",
                    pytrace=False)


@pytest.fixture(autouse=True)
def _served_again(request: pytest.FixtureRequest) -> None:
    """A test that asks for the manager after it was stopped early (a run that selected
    tests out of order) gets it started again on the same state. Each starts with no
    strikes: one test's struck devices (three, and a device is out of every plan) are not
    the next one's (a CI run beside stress-ng failed three tests in a row so, 2026-11-28)."""
    if "manager" in request.fixturenames:
        process: ManagerProcess = request.getfixturevalue("manager")
        if process.proc is None or process.proc.poll() is not None:
            process.start()
        process.clear_strikes()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the served manager once the next test does not use it."""
    if _SERVED and nextitem is not None and "manager" not in getattr(
            nextitem, "fixturenames", ()):
        _SERVED[-1].stop()
