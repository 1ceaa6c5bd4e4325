"""The manager's persistent store: jobs, specs, plans, events, metrics history and strikes
in SQLite (WAL mode), with versioned schema migrations. Safe for many threads and
processes at once: every thread has its own connection, every write is one transaction."""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgewise.errors import ConfigError
from edgewise.jobs import FINAL_STATES
from edgewise.service.migrations import MIGRATIONS

__all__ = ["MIGRATIONS", "JobRow", "Store", "json_ready"]

_JOB_FIELDS = ("id", "kind", "state", "spec", "progress", "summary", "reason", "attempts",
               "created_at", "started_at", "finished_at")
_MUTABLE = frozenset(_JOB_FIELDS) - {"id", "kind", "spec", "created_at"}


def json_ready(value: Any) -> Any:
    """``value`` with non-finite floats as None and other strange objects as strings, so
    that it always serialises to strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_ready(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    if hasattr(value, "item"):  # numpy scalars
        return json_ready(value.item())
    return str(value)


def _dumps(value: Any) -> str:
    return json.dumps(json_ready(value), allow_nan=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class JobRow:
    """A job as stored: its spec (JSON text) and where it stands."""

    id: str
    kind: str
    state: str
    spec: dict[str, Any]
    progress: float
    summary: dict[str, Any]
    reason: str | None
    attempts: int
    created_at: float
    started_at: float | None
    finished_at: float | None


def _row(values: Sequence[Any]) -> JobRow:
    data = dict(zip(_JOB_FIELDS, values, strict=True))
    data["spec"] = json.loads(data["spec"])
    data["summary"] = json.loads(data["summary"])
    return JobRow(**data)


class Store:
    """The SQLite store at ``path`` (created, and migrated to the latest schema, on open).

    Raises ConfigError if the file is not a database or holds a newer schema than this
    version of edgewise knows.
    """

    def __init__(self, path: Path, *, migrations: Sequence[str] = MIGRATIONS,
                 timeout_s: float = 30.0) -> None:
        self.path = path
        self._timeout_s = timeout_s
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.version = self._migrate(tuple(migrations))
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"cannot use the job store: {exc}", source=str(path)) from None

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self._timeout_s, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def _write(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        """One statement in its own immediate transaction (waits for other writers)."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            cursor = conn.execute(sql, params)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return cursor

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._conn().execute(sql, params).fetchall()

    def _migrate(self, migrations: tuple[str, ...]) -> int:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > len(migrations):
                raise ConfigError(f"the job store has schema version {version}; this "
                                  f"edgewise knows up to {len(migrations)}",
                                  source=str(self.path))
            for number, script in enumerate(migrations[version:], start=version + 1):
                for statement in filter(str.strip, script.split(";")):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {number}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return len(migrations)

    def close(self) -> None:
        """Close every thread's connection (the store cannot be used afterwards)."""
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()

    # jobs
    def create_job(self, kind: str, spec: Mapping[str, Any], now: float | None = None) -> JobRow:
        """A new pending job with the next id (``job-0001``, ``job-0002``...; never reused)."""
        at = time.time() if now is None else now
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            cursor = conn.execute(
                "INSERT INTO jobs (id, kind, state, spec, created_at) VALUES (?, ?, ?, ?, ?)",
                (f"tmp-{threading.get_ident()}-{at}", kind, "pending", _dumps(spec), at))
            job_id = f"job-{cursor.lastrowid:04d}"
            conn.execute("UPDATE jobs SET id = ? WHERE seq = ?", (job_id, cursor.lastrowid))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        found = self.job(job_id)
        assert found is not None
        return found

    def job(self, job_id: str) -> JobRow | None:
        rows = self._read(f"SELECT {', '.join(_JOB_FIELDS)} FROM jobs WHERE id = ?", (job_id,))
        return _row(rows[0]) if rows else None

    def jobs(self, kind: str | None = None, states: Iterable[str] | None = None) -> list[JobRow]:
        """Jobs oldest first, optionally of one kind and in some states."""
        sql, params = f"SELECT {', '.join(_JOB_FIELDS)} FROM jobs WHERE 1=1", []
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        if states is not None:
            wanted = list(states)
            sql += f" AND state IN ({', '.join('?' * len(wanted))})"
            params += wanted
        return [_row(r) for r in self._read(sql + " ORDER BY seq", params)]

    def jobs_page(self, *, limit: int, before: int | None = None, kind: str | None = None,
                  state: str | None = None) -> tuple[list[JobRow], int | None]:
        """Up to ``limit`` jobs, newest first, submitted before the job numbered ``before``
        (all when None), of one kind and state when given; and the number to pass as
        ``before`` for the next page (None: there is no more)."""
        sql = f"SELECT seq, {', '.join(_JOB_FIELDS)} FROM jobs WHERE seq < ?"
        params: list[Any] = [2**62 if before is None else before]
        for column, value in (("kind", kind), ("state", state)):
            if value is not None:
                sql += f" AND {column} = ?"
                params.append(value)
        rows = self._read(sql + " ORDER BY seq DESC LIMIT ?", [*params, limit + 1])
        more = len(rows) > limit
        rows = rows[:limit]
        return [_row(r[1:]) for r in rows], (int(rows[-1][0]) if more else None)

    def prune_finished(self, *, keep: int, finished_before: float,
                       spare: frozenset[str] = frozenset()) -> list[str]:
        """Delete the finished jobs (with their plans, events and metrics) beyond the
        ``keep`` newest finished ones, or that finished before ``finished_before``; never
        a pending, planning or running one, nor one in ``spare``. The ids deleted."""
        final = sorted(FINAL_STATES)
        marks = ", ".join("?" * len(final))
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            ids = [r[0] for r in conn.execute(
                f"SELECT id FROM jobs WHERE state IN ({marks}) AND (finished_at < ? OR seq NOT "
                f"IN (SELECT seq FROM jobs WHERE state IN ({marks}) ORDER BY seq DESC "
                "LIMIT ?))", [*final, finished_before, *final, keep]).fetchall()
                if r[0] not in spare]
            for table, column in (("plans", "job_id"), ("events", "job_id"),
                                  ("metrics", "job_id"), ("jobs", "id")):
                conn.executemany(f"DELETE FROM {table} WHERE {column} = ?",
                                 [(i,) for i in ids])
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return ids

    def update_job(self, job_id: str, *, only_from: Iterable[str] | None = None,
                   **changes: Any) -> bool:
        """Set ``changes`` on the job, atomically and only if its state is in ``only_from``
        (when given); True if it was changed."""
        unknown = set(changes) - _MUTABLE
        if unknown:
            raise ValueError(f"not a mutable job field: {sorted(unknown)}")
        values = [_dumps(v) if k == "summary" else v for k, v in changes.items()]
        sql = f"UPDATE jobs SET {', '.join(f'{k} = ?' for k in changes)} WHERE id = ?"
        params: list[Any] = [*values, job_id]
        if only_from is not None:
            allowed = list(only_from)
            sql += f" AND state IN ({', '.join('?' * len(allowed))})"
            params += allowed
        return self._write(sql, params).rowcount == 1

    def counts(self) -> dict[tuple[str, str], int]:
        """How many jobs there are per (kind, state)."""
        rows = self._read("SELECT kind, state, COUNT(*) FROM jobs GROUP BY kind, state")
        return {(k, s): int(n) for k, s, n in rows}

    # plans, events, metrics, strikes
    def set_plan(self, job_id: str, plan: Mapping[str, Any]) -> None:
        self._write("INSERT OR REPLACE INTO plans (job_id, plan, created_at) VALUES (?, ?, ?)",
                    (job_id, _dumps(plan), time.time()))

    def plan(self, job_id: str) -> dict[str, Any] | None:
        rows = self._read("SELECT plan FROM plans WHERE job_id = ?", (job_id,))
        return json.loads(rows[0][0]) if rows else None

    def add_event(self, job_id: str | None, kind: str, message: str,
                  data: Mapping[str, Any] | None = None, at: float | None = None) -> int:
        cursor = self._write(
            "INSERT INTO events (job_id, at, kind, message, data) VALUES (?, ?, ?, ?, ?)",
            (job_id, time.time() if at is None else at, kind, message, _dumps(data or {})))
        return int(cursor.lastrowid or 0)

    def events(self, job_id: str | None, *, after: int = 0, limit: int = 500,
               ) -> list[dict[str, Any]]:
        """Events of a job (None: of the cluster) with ids above ``after``, oldest first."""
        where = "job_id IS NULL" if job_id is None else "job_id = ?"
        params: list[Any] = [] if job_id is None else [job_id]
        rows = self._read(f"SELECT id, job_id, at, kind, message, data FROM events WHERE "
                          f"{where} AND id > ? ORDER BY id LIMIT ?", [*params, after, limit])
        return [{"id": r[0], "job_id": r[1], "at": r[2], "kind": r[3], "message": r[4],
                 "data": json.loads(r[5])} for r in rows]

    def put_metric(self, job_id: str, name: str, value: float, step: float | None = None,
                   at: float | None = None) -> None:
        """Record a finite value; a (job, name, step) recorded before is replaced."""
        if not math.isfinite(value):
            return
        when = time.time() if at is None else at
        self._write("INSERT OR REPLACE INTO metrics (job_id, name, step, value, at) "
                    "VALUES (?, ?, ?, ?, ?)", (job_id, name, step, float(value), when))

    def metrics(self, job_id: str, *, limit: int = 5000) -> dict[str, list[list[float | None]]]:
        """Each metric's history, ``[at, step, value]`` rows in the order recorded (the
        last ``limit`` rows of each)."""
        rows = self._read("SELECT name, at, step, value FROM (SELECT * FROM metrics WHERE "
                          "job_id = ? ORDER BY id DESC LIMIT ?) ORDER BY id", (job_id, limit))
        out: dict[str, list[list[float | None]]] = {}
        for name, at, step, value in rows:
            out.setdefault(name, []).append([at, step, value])
        return out

    def set_strikes(self, device: str, count: int) -> None:
        self._write("INSERT OR REPLACE INTO strikes (device, count, updated_at) "
                    "VALUES (?, ?, ?)", (device, count, time.time()))

    def clear_strikes(self, device: str) -> None:
        self._write("DELETE FROM strikes WHERE device = ?", (device,))

    def strikes(self) -> dict[str, int]:
        return {d: int(n) for d, n in self._read("SELECT device, count FROM strikes")}

    def event_counts(self) -> dict[str, int]:
        """How many events of each kind were recorded (faults, strikes, restarts...)."""
        return {k: int(n) for k, n in self._read("SELECT kind, COUNT(*) FROM events "
                                                 "GROUP BY kind")}
