"""``crawlfleet up | fleet status | down`` as a user runs them, in a temporary run directory, on real services.

The fleet here has no workers (``--workers-list 0 --workers-universal 0``), so that it does not depend on the Scrapy
worker; with no worker of its spider type, an accepted crawl request stays in ``seeds``, where the Redis restart
test looks for it.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis as redis_py

from deploy.demo_rules import DEMO_LIST_RULE
from deploy.procs import kill_hard, pid_alive, wait_for
from messaging import keys
from messaging.settings import read_state
from tests.plugins.services import TEST_ENV

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
COMMAND_TIMEOUT = 240  # seconds for one `crawlfleet` command (up starts four services and four processes)
NO_WORKERS = ("--workers-list", "0", "--workers-universal", "0", "--pages", "10", "--timeout", "120")


def crawlfleet(run_dir, *args, stdin=None):
    env = {key: value for key, value in os.environ.items() if not key.startswith("CRAWLFLEET_")}
    env.update(TEST_ENV, CRAWLFLEET_RUN_DIR=str(run_dir))
    return subprocess.run([sys.executable, "-m", "deploy.cli", *args], env=env, cwd=REPO, input=stdin,
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False)


def pids(run_dir):
    """name -> pid of every recorded process: the fleet's, the demo web's and the services'."""
    state = read_state(run_dir)
    found = {process["name"]: process["pid"] for process in state.get("fleet", {}).get("processes", [])}
    if "demoweb" in state:
        found["demoweb"] = state["demoweb"]["pid"]
    for name, record in state.get("services", {}).items():
        found.update({f"{name}-{n}": pid for n, pid in enumerate(record["pids"])})
    return found


def test_up_records_every_process_up_again_is_a_no_op_and_down_stops_them_all(tmp_path):
    seen: set[int] = set()
    try:
        up = crawlfleet(tmp_path, "up", *NO_WORKERS)
        assert up.returncode == 0, up.stdout + up.stderr
        state = read_state(tmp_path)
        processes = {process["name"]: process for process in state["fleet"]["processes"]}
        assert sorted(processes) == ["kafka-monitor", "master-m1", "master-m2", "redis-monitor", "supervisor"]
        assert processes["master-m1"]["argv"][1:] == ["-m", "deploy.cli", "master", "--id", "m1", "--keep-supervisor"]
        for process in processes.values():
            assert pid_alive(process["pid"]), process
            log = Path(process["log"])
            assert log.parent == tmp_path / "logs" and process["ready"] in log.read_text()
        assert set(state["services"]) == {"redis", "zookeeper", "kafka", "mongo"} and "demoweb" in state
        assert state["fleet"]["redis_aof"] is True
        first = pids(tmp_path)
        seen |= set(first.values())
        assert all(pid_alive(pid) for pid in first.values()), first

        status = crawlfleet(tmp_path, "fleet", "status", "--json")
        assert status.returncode == 0, status.stdout + status.stderr
        report = json.loads(status.stdout)
        assert all(process["alive"] for process in report["processes"])
        assert report["supervisor"]["state"] == "ok" and report["supervisor"]["pid"] == first["supervisor"]

        again = crawlfleet(tmp_path, "up", *NO_WORKERS)
        assert again.returncode == 0 and "already runs" in again.stdout, again.stdout + again.stderr
        assert pids(tmp_path) == first  # nothing new started

        kill_hard(first["redis-monitor"])  # a crashed process: `up` starts it again, and only it
        healed = crawlfleet(tmp_path, "up", *NO_WORKERS)
        assert healed.returncode == 0, healed.stdout + healed.stderr
        now = pids(tmp_path)
        seen |= set(now.values())
        assert now["redis-monitor"] != first["redis-monitor"] and pid_alive(now["redis-monitor"])
        assert {k: v for k, v in now.items() if k != "redis-monitor"} == \
            {k: v for k, v in first.items() if k != "redis-monitor"}
        down_status = crawlfleet(tmp_path, "up", "--status")
        assert down_status.returncode == 0 and "master-m2" in down_status.stdout
    finally:
        down = crawlfleet(tmp_path, "down")
    assert down.returncode == 0, down.stdout + down.stderr
    still = [pid for pid in seen if pid_alive(pid)]
    assert not still, f"still running after down: {still}"
    state = read_state(tmp_path)
    assert "fleet" not in state and not state.get("services") and "demoweb" not in state
    assert crawlfleet(tmp_path, "fleet", "status").returncode == 1  # no fleet


def test_a_request_accepted_before_a_redis_crash_is_still_in_seeds_after(tmp_path):
    try:
        up = crawlfleet(tmp_path, "up", *NO_WORKERS)
        assert up.returncode == 0, up.stdout + up.stderr
        state = read_state(tmp_path)
        redis_record = state["services"]["redis"]
        client = redis_py.Redis.from_url(state["redis_url"], socket_timeout=5)
        config = client.config_get("append*")
        assert (config["appendonly"], config["appendfsync"]) == ("yes", "everysec")

        url = f"http://news.fleet.test:{state['demoweb']['port']}/world/"
        request = {"userid": "u1", "crawlid": "survivor", "url": url, "spider_type": "list", "rule": DEMO_LIST_RULE}
        submit = crawlfleet(tmp_path, "submit", "--wait", "--timeout", "90", "--json", "-", stdin=json.dumps(request))
        assert submit.returncode == 0, submit.stdout + submit.stderr
        assert json.loads(submit.stdout.splitlines()[-1])["status"] == "accepted"
        assert client.zcard(keys.SEEDS) == 1 and client.hget(keys.PENDING_SEEDS, "survivor") == b"1"

        # everysec: the request is on disk within about a second; wait for it there, then crash Redis
        aof = Path(redis_record["data_dir"])
        wait_for(lambda: any(b"survivor" in path.read_bytes() for path in aof.rglob("*.aof")), 15,
                 "the request in Redis's append-only file")
        client.close()
        kill_hard(redis_record["pids"][0])

        # `up` starts Redis again the same way (same port, same data directory): it replays its AOF
        healed = crawlfleet(tmp_path, "up", *NO_WORKERS)
        assert healed.returncode == 0, healed.stdout + healed.stderr
        restarted = read_state(tmp_path)["services"]["redis"]
        assert restarted["ports"] == redis_record["ports"] and restarted["pids"] != redis_record["pids"]
        client = redis_py.Redis.from_url(state["redis_url"], socket_timeout=5)
        assert client.zcard(keys.SEEDS) == 1
        assert json.loads(client.zrange(keys.SEEDS, 0, 0)[0])["crawlid"] == "survivor"
        assert client.hget(keys.crawl("survivor"), "state") == b"running"
        client.close()
    finally:
        down = crawlfleet(tmp_path, "down")
    assert down.returncode == 0, down.stdout + down.stderr
