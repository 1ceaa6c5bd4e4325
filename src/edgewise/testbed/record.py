"""The record of a testbed on disk: what ``up`` made, so that every other command finds it.

``<state>/testbeds/<name>.json`` holds the cluster document, the plan and the state
(``starting`` while ``up`` runs, then ``up``); ``<name>.token`` the Ray token (mode 0600).
The record is written before anything is made, so a crash at any point leaves enough
behind for the next ``up`` or ``down`` to clean.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgewise.cluster.model import Cluster
from edgewise.cluster.schema import cluster_from_dict
from edgewise.testbed.host import TestbedError
from edgewise.testbed.plan import HostFacts, NodePlan, PeerRate, TestbedPlan, check_name

__all__ = ["Record", "default_state_dir", "list_records", "locked", "read_record",
           "record_path", "remove_record", "write_record", "write_token"]


def default_state_dir() -> Path:
    """The state directory, by the rule of ``edgewise.cli.common.state_dir``
    (``EDGEWISE_STATE_DIR``, else ``$XDG_STATE_HOME/edgewise``)."""
    base = os.environ.get("EDGEWISE_STATE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_STATE_HOME", str(Path.home() / ".local" / "state"))
    return Path(xdg) / "edgewise"


def _folder(state: Path | None) -> Path:
    return (state or default_state_dir()) / "testbeds"


def record_path(name: str, state: Path | None = None) -> Path:
    return _folder(state) / f"{check_name(name)}.json"


@dataclass(frozen=True, slots=True)
class Record:
    """A testbed as recorded: its plan, the cluster, and how far ``up`` got."""

    plan: TestbedPlan
    cluster_document: dict[str, Any]
    cluster_file: str
    state: str
    owner_pid: int
    created_at: float
    token_path: str
    cgroup_version: int
    latency_in: str = "transport"  # or "netem"
    up_seconds: float = 0.0

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def cluster(self) -> Cluster:
        return cluster_from_dict(self.cluster_document, source=self.cluster_file)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)


def _plan(data: dict[str, Any]) -> TestbedPlan:
    nodes = tuple(
        NodePlan(**{**n, "peers": tuple(PeerRate(**p) for p in n["peers"])})
        for n in data["nodes"])
    return TestbedPlan(**{**data, "host": HostFacts(**data["host"]), "nodes": nodes})


def _from_json(text: str, source: Path) -> Record:
    try:
        data = json.loads(text)
        return Record(**{**data, "plan": _plan(data["plan"])})
    except (KeyError, TypeError, ValueError) as exc:
        raise TestbedError(f"{source}: not a testbed record ({exc}); `edgewise testbed "
                           "down NAME` still removes what the name made") from None


def read_record(name: str, state: Path | None = None) -> Record | None:
    """The record of testbed ``name``, or None when there is none."""
    path = record_path(name, state)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return _from_json(text, path)


def write_record(record: Record, state: Path | None = None) -> None:
    """Write the record atomically (readers never see half a file)."""
    path = record_path(record.name, state)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(record.to_json())
    tmp.replace(path)


def write_token(name: str, state: Path | None = None) -> Path:
    """A fresh Ray auth token for testbed ``name``, readable by its owner only."""
    path = _folder(state) / f"{check_name(name)}.token"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    return path


def remove_record(name: str, state: Path | None = None) -> None:
    folder = _folder(state)
    for suffix in (".json", ".token"):
        (folder / f"{name}{suffix}").unlink(missing_ok=True)


def list_records(state: Path | None = None) -> list[str]:
    """Names of every recorded testbed."""
    folder = _folder(state)
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


@contextmanager
def locked(name: str, state: Path | None = None, wait_s: float = 30.0) -> Iterator[None]:
    """Hold testbed ``name``'s lock: one ``up``, ``down`` or restart at a time."""
    path = _folder(state) / f"{check_name(name)}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TestbedError(f"testbed {name!r} is busy (another up or down "
                                       "holds its lock)") from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
