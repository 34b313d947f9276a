"""The pending queue: jobs waiting for a process slot, in SQLite, so that a restarted manager still runs them.

One table; a job pops by priority (highest first, as scrapyd) and in arrival order within a priority. The manager is
one process and calls this from the reactor thread only; SQLite commits each change, so a crash loses nothing that
was answered ``ok``. ``":memory:"`` serves tests that need no restart.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from zope.interface import implementer

from manager.interfaces import IPendingQueue
from manager.jobs import Job


def connect(path: Path | str) -> sqlite3.Connection:
    if str(path) != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    return connection


@implementer(IPendingQueue)
class SqlitePendingQueue:
    def __init__(self, path: Path | str) -> None:
        self.conn = connect(path)
        self.conn.execute("CREATE TABLE IF NOT EXISTS pending (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
                          "job TEXT UNIQUE NOT NULL, priority REAL NOT NULL, message TEXT NOT NULL)")

    def add(self, job: Job) -> None:
        self.conn.execute("INSERT INTO pending (job, priority, message) VALUES (?, ?, ?)",
                          (job.job, job.priority, json.dumps(job.to_json())))

    def pop(self) -> Job | None:
        row = self.conn.execute("DELETE FROM pending WHERE seq = (SELECT seq FROM pending "
                                "ORDER BY priority DESC, seq ASC LIMIT 1) RETURNING message").fetchone()
        return Job.from_json(json.loads(row[0])) if row else None

    def remove(self, job_id: str) -> bool:
        return self.conn.execute("DELETE FROM pending WHERE job = ?", (job_id,)).rowcount > 0

    def list(self) -> list[Job]:
        rows = self.conn.execute("SELECT message FROM pending ORDER BY priority DESC, seq ASC").fetchall()
        return [Job.from_json(json.loads(row[0])) for row in rows]

    def get(self, job_id: str) -> Job | None:
        row = self.conn.execute("SELECT message FROM pending WHERE job = ?", (job_id,)).fetchone()
        return Job.from_json(json.loads(row[0])) if row else None

    def count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM pending").fetchone()[0])

    def close(self) -> None:
        self.conn.close()
