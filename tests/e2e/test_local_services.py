"""`crawlfleet services up | status | env | down` as a user runs them, on real services."""

import json
import os
import subprocess
import sys

import pytest
from redis.cluster import RedisCluster

from deploy.procs import pid_alive, port_free
from deploy.services import SERVICE_NAMES

pytestmark = pytest.mark.e2e


def crawlfleet(run_dir, *args, timeout=120):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLFLEET_")}
    env["CRAWLFLEET_RUN_DIR"] = str(run_dir)
    return subprocess.run([sys.executable, "-m", "deploy.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_up_status_env_down(tmp_path):
    up = crawlfleet(tmp_path, "services", "up")
    try:
        assert up.returncode == 0, up.stderr
        status = crawlfleet(tmp_path, "services", "status", "--json")
        assert status.returncode == 0, status.stderr
        report = json.loads(status.stdout)
        for name in SERVICE_NAMES:
            assert report[name]["healthy"], (name, report[name])
        assert report["redis_url"].startswith("redis://127.0.0.1:")
        assert report["kafka_bootstrap"].startswith("127.0.0.1:")
        assert report["zk_hosts"].startswith("127.0.0.1:")
        assert report["mongo_uri"].startswith("mongodb://127.0.0.1:")

        exports = crawlfleet(tmp_path, "env").stdout
        assert f"export CRAWLFLEET_REDIS_URL={report['redis_url']}" in exports
        assert f"export CRAWLFLEET_ZK_HOSTS={report['zk_hosts']}" in exports

        again = crawlfleet(tmp_path, "services", "up")  # idempotent: nothing new starts
        assert again.returncode == 0, again.stderr
        assert json.loads(crawlfleet(tmp_path, "services", "status", "--json").stdout)["redis"]["pids"] == \
            report["redis"]["pids"]
    finally:
        down = crawlfleet(tmp_path, "services", "down")
    assert down.returncode == 0, down.stderr
    for name in SERVICE_NAMES:
        for pid in report[name]["pids"]:
            assert not pid_alive(pid), f"{name} pid {pid} still running"
        for port in report[name]["ports"]:
            assert port_free(port), f"{name} port {port} still taken"
    after = crawlfleet(tmp_path, "services", "status", "--json")
    assert after.returncode == 0 and "redis_url" not in json.loads(after.stdout)


def test_a_killed_service_is_reported_and_restarted(tmp_path):
    assert crawlfleet(tmp_path, "services", "up", "--only", "redis").returncode == 0
    try:
        report = json.loads(crawlfleet(tmp_path, "services", "status", "--json").stdout)
        os.kill(report["redis"]["pids"][0], 9)
        status = crawlfleet(tmp_path, "services", "status", "--json")
        assert status.returncode == 1
        assert not json.loads(status.stdout)["redis"]["healthy"]
        assert crawlfleet(tmp_path, "services", "up", "--only", "redis").returncode == 0
        assert json.loads(crawlfleet(tmp_path, "services", "status", "--json").stdout)["redis"]["healthy"]
    finally:
        assert crawlfleet(tmp_path, "services", "down").returncode == 0


def test_redis_cluster_mode(tmp_path):
    up = crawlfleet(tmp_path, "services", "up", "--redis-cluster", "--only", "redis")
    try:
        assert up.returncode == 0, up.stderr
        report = json.loads(crawlfleet(tmp_path, "services", "status", "--json").stdout)
        assert report["redis_cluster"] is True and len(report["redis"]["pids"]) == 3
        client = RedisCluster.from_url(report["redis_url"])
        try:
            assert len(client.get_primaries()) == 3
            for i in range(50):  # keys spread over every master's slots
                client.set(f"{{tag{i}}}:k", i)
            assert {client.get_node_from_key(f"{{tag{i}}}:k").name for i in range(50)} == \
                {node.name for node in client.get_primaries()}
        finally:
            client.close()
    finally:
        assert crawlfleet(tmp_path, "services", "down").returncode == 0
