"""The manager's SQLite store: migrations, atomic job updates, history, many writers at once."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from pathlib import Path

import pytest

from edgewise.errors import ConfigError
from edgewise.service.store import MIGRATIONS, Store


def test_a_new_store_has_the_latest_schema_in_wal_mode(tmp_path: Path) -> None:
    store = Store(tmp_path / "jobs.db")
    conn = sqlite3.connect(tmp_path / "jobs.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.version == len(MIGRATIONS)


def test_an_older_store_is_migrated_and_keeps_its_jobs(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    old = Store(path, migrations=MIGRATIONS[:1])
    row = old.create_job("update", {"epochs": 2})
    old.put_metric(row.id, "val_accuracy", 0.5, step=1)
    old.put_metric(row.id, "val_accuracy", 0.6, step=1)  # v1 has no unique index: kept twice
    old.close()
    new = Store(path)
    assert new.job(row.id) is not None and new.version == len(MIGRATIONS)
    assert [r[1:] for r in new.metrics(row.id)["val_accuracy"]] == [[1.0, 0.6]]
    new.put_metric(row.id, "loss", 1.0, step=1)
    new.put_metric(row.id, "loss", 0.5, step=1)  # v2: the same step replaces the value
    assert [r[1:] for r in new.metrics(row.id)["loss"]] == [[1.0, 0.5]]


def test_a_newer_store_or_a_file_that_is_no_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    Store(path).close()
    with pytest.raises(ConfigError, match="schema version"):
        Store(path, migrations=MIGRATIONS[:1])
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all, " * 100)
    with pytest.raises(ConfigError, match="job store"):
        Store(junk)


def test_jobs_get_increasing_ids_and_atomic_state_changes(tmp_path: Path) -> None:
    store = Store(tmp_path / "jobs.db")
    first = store.create_job("update", {"epochs": 2}, now=10.0)
    second = store.create_job("pipeline", {"requests": 5}, now=11.0)
    assert (first.id, second.id) == ("job-0001", "job-0002")
    assert first.state == "pending" and first.spec == {"epochs": 2} and first.created_at == 10.0
    assert store.update_job(first.id, only_from=["pending"], state="planning")
    assert not store.update_job(first.id, only_from=["pending"], state="stopped")
    assert store.update_job(first.id, summary={"accuracy": float("nan"), "epoch": 1})
    found = store.job(first.id)
    assert found is not None and found.state == "planning"
    assert found.summary == {"accuracy": None, "epoch": 1}  # strict JSON: NaN stored as null
    assert [j.id for j in store.jobs(kind="pipeline")] == [second.id]
    assert [j.id for j in store.jobs(states=["planning"])] == [first.id]
    assert store.counts() == {("update", "planning"): 1, ("pipeline", "pending"): 1}
    with pytest.raises(ValueError, match="mutable"):
        store.update_job(first.id, kind="other")


def test_events_plans_metrics_and_strikes(tmp_path: Path) -> None:
    store = Store(tmp_path / "jobs.db")
    job = store.create_job("update", {})
    a = store.add_event(job.id, "fault", "lost a worker", {"device": "nano-0"})
    b = store.add_event(None, "strike", "nano-0: strike 1")
    assert [e["id"] for e in store.events(job.id)] == [a]
    assert [e["message"] for e in store.events(None)] == ["nano-0: strike 1"]
    assert store.events(job.id, after=a) == [] and b > a
    store.set_plan(job.id, {"shards": {"nano-0": 3}})
    assert store.plan(job.id) == {"shards": {"nano-0": 3}} and store.plan("job-9") is None
    store.put_metric(job.id, "val_accuracy", float("inf"), step=1)  # not finite: dropped
    store.put_metric(job.id, "throughput_rps", 3.0)
    store.put_metric(job.id, "throughput_rps", 4.0)  # no step: a history of values
    assert [r[2] for r in store.metrics(job.id)["throughput_rps"]] == [3.0, 4.0]
    assert "val_accuracy" not in store.metrics(job.id)
    store.set_strikes("nano-0", 2)
    assert store.strikes() == {"nano-0": 2}
    assert store.event_counts() == {"fault": 1, "strike": 1}


def _write(path: str, writer: int, count: int) -> None:
    store = Store(Path(path))
    for k in range(count):
        job = store.create_job("update", {"writer": writer, "k": k})
        store.update_job(job.id, only_from=["pending"], state="running")
        store.add_event(job.id, "state", "running")
        store.put_metric(job.id, "epoch", float(k), step=1)
    store.close()


def test_many_writers_in_threads_and_processes_lose_and_duplicate_nothing(
        tmp_path: Path) -> None:
    path, count = tmp_path / "jobs.db", 40
    Store(path).close()
    threads = [threading.Thread(target=_write, args=(str(path), w, count)) for w in range(8)]
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=_write, args=(str(path), 100 + w, count)) for w in range(3)]
    for worker in (*threads, *procs):
        worker.start()
    for thread in threads:
        thread.join()
    for proc in procs:
        proc.join()
        assert proc.exitcode == 0
    store = Store(path)
    jobs = store.jobs()
    assert len(jobs) == 11 * count
    assert len({j.id for j in jobs}) == len(jobs)  # no id handed out twice
    assert sorted((j.spec["writer"], j.spec["k"]) for j in jobs) == sorted(
        (w, k) for w in [*range(8), *range(100, 103)] for k in range(count))
    assert all(j.state == "running" for j in jobs)
    assert all(len(store.events(j.id)) == 1 and len(store.metrics(j.id)["epoch"]) == 1
               for j in jobs)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
