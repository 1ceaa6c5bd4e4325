"""The job store's schema, as migrations in order (``PRAGMA user_version``)."""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

MIGRATIONS: tuple[str, ...] = (
    # 1: jobs with their specs, one plan per job, events, metrics history, strikes.
    """
    CREATE TABLE jobs (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        state TEXT NOT NULL,
        spec TEXT NOT NULL,
        progress REAL NOT NULL DEFAULT 0,
        summary TEXT NOT NULL DEFAULT '{}',
        reason TEXT,
        attempts INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL
    );
    CREATE INDEX jobs_state ON jobs(state);
    CREATE TABLE plans (job_id TEXT PRIMARY KEY REFERENCES jobs(id), plan TEXT NOT NULL,
                        created_at REAL NOT NULL);
    CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT, at REAL NOT NULL,
                         kind TEXT NOT NULL, message TEXT NOT NULL, data TEXT NOT NULL);
    CREATE INDEX events_job ON events(job_id, id);
    CREATE TABLE metrics (id INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT NOT NULL,
                          name TEXT NOT NULL, step REAL, value REAL NOT NULL, at REAL NOT NULL);
    CREATE INDEX metrics_job ON metrics(job_id, name, id);
    CREATE TABLE strikes (device TEXT PRIMARY KEY, count INTEGER NOT NULL,
                          updated_at REAL NOT NULL);
    """,
    # 2: one value per (job, metric, step): a step recorded again replaces the old value
    # (of the duplicates a version-1 store may hold, the latest is kept).
    """
    DELETE FROM metrics WHERE step IS NOT NULL AND id NOT IN
        (SELECT MAX(id) FROM metrics WHERE step IS NOT NULL GROUP BY job_id, name, step);
    CREATE UNIQUE INDEX metrics_step ON metrics(job_id, name, step) WHERE step IS NOT NULL;
    """,
)
"""Schema migrations in order; migration ``k`` takes the schema from version k to k+1
(``PRAGMA user_version``). Append only: a released migration never changes."""
