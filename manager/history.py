"""Finished jobs: the last CRAWLFLEET_MANAGER_FINISHED_TO_KEEP runs, in SQLite (they survive a restart).

Each row is a :class:`manager.jobs.JobRecord`: project, spider, job, pid, start and end time, exit status, log path
(seed table 4-12). Older rows are dropped as new ones arrive, so the history is bounded.
"""

from __future__ import annotations

import json
from pathlib import Path

from zope.interface import implementer

from manager.interfaces import IJobHistory
from manager.jobs import JobRecord
from manager.queue import connect


@implementer(IJobHistory)
class SqliteJobHistory:
    def __init__(self, path: Path | str, keep: int = 100) -> None:
        self.keep = max(1, keep)
        self.conn = connect(path)
        self.conn.execute("CREATE TABLE IF NOT EXISTS finished (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
                          "job TEXT NOT NULL, record TEXT NOT NULL)")

    def add(self, record: JobRecord) -> None:
        self.conn.execute("INSERT INTO finished (job, record) VALUES (?, ?)",
                          (record.job, json.dumps(record.to_json())))
        self.conn.execute("DELETE FROM finished WHERE seq NOT IN (SELECT seq FROM finished ORDER BY seq DESC "
                          "LIMIT ?)", (self.keep,))

    def list(self) -> list[JobRecord]:
        rows = self.conn.execute("SELECT record FROM finished ORDER BY seq DESC").fetchall()
        return [JobRecord.from_json(json.loads(row[0])) for row in rows]

    def get(self, job_id: str) -> JobRecord | None:
        row = self.conn.execute("SELECT record FROM finished WHERE job = ? ORDER BY seq DESC LIMIT 1",
                                (job_id,)).fetchone()
        return JobRecord.from_json(json.loads(row[0])) if row else None

    def __len__(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM finished").fetchone()[0])

    def close(self) -> None:
        self.conn.close()
