"""`crawlfleet up`'s supervisor, as a user runs the fleet (issue 29, items 1, 7, 8): MongoDB's data on disk; a MongoDB
whose storage fails (ping answers, every write fails) restarted without a person; a worker SIGSTOPped past its
heartbeat (retired and fenced by the master) killed and replaced; a killed process started again; and (issue 37,
item 5) the supervisor itself killed -9, started again by a master within 15 s, replacing a worker killed after."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis as redis_py
from pymongo import MongoClient

from deploy.procs import kill_hard, pid_alive, wait_for
from deploy.state import modify_state
from messaging import keys
from messaging.settings import read_state
from tests.plugins.mongo_faults import MongoFaultProxy
from tests.plugins.services import TEST_ENV

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
FAST = {"CRAWLFLEET_SUPERVISE_INTERVAL": "0.5", "CRAWLFLEET_SUPERVISE_BOUND": "3", "CRAWLFLEET_SUPERVISE_BACKOFF": "1",
        "CRAWLFLEET_HEARTBEAT_INTERVAL": "1", "CRAWLFLEET_HEARTBEAT_TTL": "4"}


def crawlfleet(run_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("CRAWLFLEET_")}
    env.update(TEST_ENV, **FAST, CRAWLFLEET_RUN_DIR=str(run_dir))
    return subprocess.run([sys.executable, "-m", "deploy.cli", *args], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=False)


def fleet_processes(run_dir: Path) -> dict[str, dict]:
    return {p["name"]: p for p in read_state(run_dir)["fleet"]["processes"]}


def test_the_supervisor_heals_storage_replaces_fenced_workers_and_restarts_the_dead(tmp_path: Path) -> None:
    proxy = None
    try:
        up = crawlfleet(tmp_path, "up", "--workers-list", "1", "--workers-universal", "0", "--pages", "10",
                        "--timeout", "180")
        assert up.returncode == 0, up.stdout + up.stderr
        state = read_state(tmp_path)
        mongo = state["services"]["mongo"]
        # 7. MongoDB keeps its data on disk under the run directory
        assert mongo["storage_path"] == str(tmp_path / "mongo" / "data")
        supervisor_log = Path(fleet_processes(tmp_path)["supervisor"]["log"])

        # 1. storage failing behind the address the fleet uses: ping answers, writes fail, until a restart
        proxy = MongoFaultProxy(mongo["ports"][0],
                                server_pid=lambda: read_state(tmp_path)["services"]["mongo"]["pids"][0]).start()
        uri = f"mongodb://127.0.0.1:{proxy.port}/?directConnection=true"
        modify_state(tmp_path, lambda s: s.__setitem__("mongo_uri", uri))
        client = MongoClient(uri, serverSelectionTimeoutMS=5000)
        client["kept"]["items"].insert_one({"_id": "before"})
        proxy.panic()
        wait_for(lambda: "restarting mongo" in supervisor_log.read_text(), 60, "the supervisor restarting MongoDB")
        wait_for(lambda: not proxy.failing, 60, "MongoDB restarted (a new server process)")
        def writes() -> bool:
            try:
                return client["kept"]["items"].insert_one({"_id": "after"}).acknowledged
            except Exception:  # the restart is under way
                return False

        wait_for(writes, 30, "writes again", interval=0.5)
        assert client["kept"]["items"].find_one({"_id": "before"}) is not None  # on disk: kept across the restart
        assert proxy.refused >= 1
        client.close()

        # 8. a worker SIGSTOPped past its heartbeat: retired (fenced) by the master, killed and replaced
        worker = next(p for p in fleet_processes(tmp_path).values() if p["role"] == "worker")
        os.kill(worker["pid"], signal.SIGSTOP)

        def replaced() -> bool:
            workers = [p for p in fleet_processes(tmp_path).values() if p["role"] == "worker"]
            return len(workers) == 1 and workers[0]["job"] != worker["job"] and pid_alive(workers[0]["pid"])

        wait_for(replaced, 120, "the fenced worker replaced")
        assert not pid_alive(worker["pid"])
        redis = redis_py.Redis.from_url(read_state(tmp_path)["redis_url"])
        assert redis.zscore(keys.RETIRED_WORKERS, worker["job"]) is not None
        new_job = next(p for p in fleet_processes(tmp_path).values() if p["role"] == "worker")["job"]
        wait_for(lambda: redis.zscore(keys.WORKERS, new_job) is not None, 60, "the new worker registered")
        redis.close()

        # a process killed outright is started again
        monitor = fleet_processes(tmp_path)["redis-monitor"]["pid"]
        kill_hard(monitor)
        wait_for(lambda: fleet_processes(tmp_path)["redis-monitor"]["pid"] != monitor, 60,
                 "the redis monitor started again")
        log = supervisor_log.read_text()
        assert "replacing worker-" in log and "retired by the master" in log and "replacing redis-monitor" in log

        # issue 37, item 5: the supervisor killed -9 is started again by a master, and then does its work
        supervisor = fleet_processes(tmp_path)["supervisor"]["pid"]
        kill_hard(supervisor)
        wait_for(lambda: fleet_processes(tmp_path)["supervisor"]["pid"] != supervisor
                 and pid_alive(fleet_processes(tmp_path)["supervisor"]["pid"]), 15, "the supervisor started again")
        masters = [Path(p["log"]).read_text() for p in fleet_processes(tmp_path).values() if p["role"] == "master"]
        assert any(f"supervisor (pid {supervisor}) is not running: starting it again" in text for text in masters)
        status = crawlfleet(tmp_path, "fleet", "status", "--json")
        assert json.loads(status.stdout)["supervisor"]["state"] == "ok", status.stdout
        worker = next(p for p in fleet_processes(tmp_path).values() if p["role"] == "worker")
        kill_hard(worker["pid"])
        wait_for(lambda: any(p["role"] == "worker" and p["job"] != worker["job"] and pid_alive(p["pid"])
                             for p in fleet_processes(tmp_path).values()), 60, "the killed worker replaced")
    finally:
        if proxy is not None:
            proxy.stop()
        down = crawlfleet(tmp_path, "down")
    assert down.returncode == 0, down.stdout + down.stderr
