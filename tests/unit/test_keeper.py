"""The watcher watched (issue 37, item 5): how the fleet's supervisor is judged from its process and its heartbeat,
what `crawlfleet fleet status` says of it, and what a master's keeper does about it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from deploy.cli_fleet import supervisor_line
from deploy.keeper import Keeper, beat, supervisor_status
from deploy.procs import pid_alive
from deploy.state import modify_state

pytestmark = pytest.mark.unit

TTL = 10.0


def record_supervisor(run_dir: Path, pid: int | None) -> None:
    processes = [{"name": "master-m1", "role": "master", "argv": [], "pid": 1}]
    if pid is not None:
        processes.append({"name": "supervisor", "role": "supervisor", "argv": [], "pid": pid})
    modify_state(run_dir, lambda state: state.__setitem__("fleet", {"processes": processes}))


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_status_of_the_supervisor(tmp_path: Path) -> None:
    record_supervisor(tmp_path, None)
    assert supervisor_status(tmp_path, TTL)["state"] == "none"
    assert "none" in supervisor_line(supervisor_status(tmp_path, TTL))

    gone = dead_pid()
    record_supervisor(tmp_path, gone)
    status = supervisor_status(tmp_path, TTL)
    assert status["state"] == "missing" and status["pid"] == gone
    assert f"MISSING[/] (pid {gone} is not running)" in supervisor_line(status)

    record_supervisor(tmp_path, 1)  # alive (init), its beat fresh
    beat(tmp_path, pid=1)
    status = supervisor_status(tmp_path, TTL)
    assert status["state"] == "ok" and status["heartbeat_age"] < 2
    assert "running[/] (pid 1, heartbeat" in supervisor_line(status)

    beat(tmp_path, pid=1, now=time.time() - 30)  # alive, silent for 30 s: stopped or stuck
    status = supervisor_status(tmp_path, TTL)
    assert status["state"] == "hung" and "HUNG[/] (pid 1, no heartbeat for 30 s)" in supervisor_line(status)


def test_a_keeper_starts_a_missing_supervisor_and_kills_a_hung_one(tmp_path: Path) -> None:
    started: list[tuple[str, bool]] = []

    def replace(run_dir: Path, name: str, kill: bool, timeout: float) -> str:
        started.append((name, kill))
        record_supervisor(run_dir, 1)
        beat(run_dir, pid=1)
        return name

    keeper = Keeper(tmp_path, TTL, replace=replace)
    record_supervisor(tmp_path, dead_pid())
    assert keeper.check() == "restarted" and started == [("supervisor", False)]
    assert keeper.check() is None  # running and beating now

    hung = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record_supervisor(tmp_path, hung.pid)
        beat(tmp_path, pid=hung.pid, now=time.time() - 30)
        assert keeper.check() == "replaced" and started[-1] == ("supervisor", True)
        hung.wait(timeout=10)
        assert not pid_alive(hung.pid)
    finally:
        hung.kill()
        hung.wait()

    record_supervisor(tmp_path, None)  # a fleet without a supervisor (the demo): nothing to keep
    assert keeper.check() is None and len(started) == 2
