"""Every long-running process is seen alive, serves /metrics, and stops cleanly on SIGTERM."""

import signal
import urllib.request

import pytest

from deploy.procs import wait_for
from messaging import keys

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(("command", "module"), [("master", "master"), ("kafka-monitor", "kafka-monitor"),
                                                 ("redis-monitor", "redis-monitor")])
def test_heartbeat_metrics_and_clean_stop(cf, procs, command, module):
    redis = cf.redis()
    proc = procs.crawlfleet(command, env=cf.with_env(CRAWLFLEET_WORKER_IP="10.9.8.7"))
    wait_for(lambda: redis.exists(keys.stats_alive(module, "10.9.8.7")), 30, f"{command} to heartbeat")
    endpoints = wait_for(lambda: redis.keys(keys.metrics_endpoint(module, "*", proc.pid)), 10,
                         f"{command} to register its /metrics")
    url = redis.get(endpoints[0]).decode()
    body = urllib.request.urlopen(url, timeout=5).read().decode()
    assert "python_info" in body or "process_cpu_seconds_total" in body
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, procs.log(proc)[-2000:]
    assert f"{module}: stopped" in procs.log(proc)
