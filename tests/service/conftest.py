"""The manager served for the whole session (see managerproc.py), for the slower tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from managerproc import ManagerProcess


@pytest.fixture(scope="session")
def manager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagerProcess]:
    """The example cluster (deep-edge-testbed) served for the whole session."""
    process = ManagerProcess(tmp_path_factory.mktemp("served"))
    process.start()
    yield process
    process.stop()
