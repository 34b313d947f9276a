"""The workers ``crawlfleet up`` runs on this host: jobs the manager did not start, but shows and serves as its own.

``crawlfleet up`` records its processes in the run directory's state file (``fleet.processes``: name, role, pid,
log, job, spider, started). The manager of the same run directory reads that record, so that its *Jobs* page,
``listjobs.json``, ``/logs/`` (with scrapyd's log paths, ``/logs/crawlfleet/<spider>/<job>.log``), a job's stats and
``/items/`` cover these workers too. A worker whose process is gone (respawned under a new job id, or the fleet
stopped) is no longer listed; its log is still served while the record names it. Stopping them is ``crawlfleet
down``'s (the fleet's supervisor would start a worker the manager stopped again).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from messaging.processes import pid_alive

STATE_FILE = "state.json"


@dataclass(frozen=True)
class FleetJob:
    job: str
    spider: str
    pid: int
    log_path: str
    start_time: float  # 0.0 when unknown


def _records(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    try:
        state = json.loads((Path(run_dir) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return []
    fleet = state.get("fleet") or {}
    return [p for p in fleet.get("processes", []) if p.get("role") == "worker" and p.get("job")]


def _process_start(pid: int) -> float:
    """When a process started (Linux ``/proc``), 0.0 when unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return 0.0


def fleet_jobs(run_dir: str | os.PathLike[str], alive_only: bool = True) -> list[FleetJob]:
    """This host's fleet workers (running ones only, unless ``alive_only`` is False), oldest first."""
    jobs = []
    for record in _records(run_dir):
        pid = int(record.get("pid") or 0)
        if alive_only and not (pid and pid_alive(pid)):
            continue
        started = float(record.get("started") or 0.0) or _process_start(pid)
        jobs.append(FleetJob(str(record["job"]), str(record.get("spider") or "list"), pid,
                             str(record.get("log") or ""), started))
    return sorted(jobs, key=lambda job: (job.start_time, job.job))


def fleet_log(run_dir: str | os.PathLike[str], job: str, spider: str | None = None) -> Path | None:
    """The log of a recorded fleet worker (of that spider, when given), or None."""
    for record in _records(run_dir):
        if record["job"] == job and record.get("log") and (spider is None or record.get("spider") == spider):
            return Path(record["log"])
    return None
