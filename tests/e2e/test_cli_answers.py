"""The CLI's answers say what happened: a repeated request is ``duplicate``, a stop of an unknown crawl says so and
blocks nothing, ``submit`` prints each request's outcome."""

from __future__ import annotations

import json

import pytest

from messaging import keys
from tests.e2e.test_cli_messaging import RULE, cli

pytestmark = pytest.mark.e2e


@pytest.fixture
def monitors(cf, procs):
    env = cf.with_env(CRAWLFLEET_KAFKA_GROUP=cf.name)
    kafka = procs.crawlfleet("kafka-monitor", env=env)
    redis_monitor = procs.crawlfleet("redis-monitor", env=env)
    procs.wait_log(kafka, f"partitions assigned: {cf.settings.topic_incoming}[", 60)
    procs.wait_log(redis_monitor, "redis-monitor: watching", 30)
    return env


def test_identical_requests_are_answered_duplicate(cf, monitors):
    request = json.dumps({"userid": "ann", "crawlid": "twice", "spider_type": "universal", "rule": RULE,
                          "url": "http://news.example.com/"})
    first = cli(monitors, "submit", "-", "--json", stdin=request)  # --wait by default: each gets its own uuid
    second = cli(monitors, "submit", "-", "--json", stdin=request)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert json.loads(first.stdout)["status"] == "accepted"
    assert json.loads(second.stdout)["status"] == "duplicate"
    assert cf.redis().zcard(keys.SEEDS) == 1


def test_submit_prints_each_requests_outcome(monitors):
    good = {"userid": "ann", "crawlid": "each", "spider_type": "universal", "rule": RULE}
    lines = [json.dumps({**good, "url": "http://news.example.com/a"}), json.dumps({**good, "url": "ftp://x/"}),
             json.dumps({**good, "url": "http://news.example.com/a"})]
    result = cli(monitors, "submit", "-", stdin="\n".join(lines))
    assert result.returncode == 1  # one is rejected
    # 1 and 3 may land on different partitions: whichever the monitor saw first is accepted, the other duplicate
    said = {line for line in result.stdout.splitlines() if line.startswith("request ")}
    assert said in ({"request 1: accepted (crawl each)", "request 3: duplicate (crawl each)"},
                    {"request 1: duplicate (crawl each)", "request 3: accepted (crawl each)"}), result.stdout
    assert "request 2: rejected" in result.stderr and "$.url" in result.stderr
    assert "1 accepted, 1 duplicate, 1 rejected" in result.stdout


def test_stop_of_an_unknown_crawl_says_so_and_blocks_nothing(cf, monitors):
    stopped = cli(monitors, "stop", "no-such-crawl")
    assert stopped.returncode == 1 and "no such crawl: no-such-crawl" in stopped.stderr
    assert not cf.redis().exists(keys.crawl("no-such-crawl"))  # no ghost row, nothing refused later
    later = json.dumps({"userid": "ann", "crawlid": "no-such-crawl", "spider_type": "universal", "rule": RULE,
                        "url": "http://news.example.com/"})
    submitted = cli(monitors, "submit", "-", "--json", stdin=later)
    assert json.loads(submitted.stdout)["status"] == "accepted", submitted.stdout + submitted.stderr


def test_stats_shows_the_crawlers_alive_from_the_worker_registry(cf):
    from frontier.registry import WorkerInfo, WorkerRegistry
    from messaging.redis_monitor.plugins.stats import module_stats

    redis = cf.redis()
    registry = WorkerRegistry(redis)
    registry.register(WorkerInfo("job-a", "universal", "10.0.0.7", "crawler-7", 42))
    registry.register(WorkerInfo("job-b", "list", "10.0.0.7", "crawler-7", 43))
    alive = module_stats(redis, "crawler", heartbeat_ttl=15)["alive"]
    assert alive == {"10.0.0.7": {"host": "crawler-7", "expires_in": alive["10.0.0.7"]["expires_in"], "workers": 2}}
    assert 0 < alive["10.0.0.7"]["expires_in"] <= 15
    registry.leave("job-a")
    registry.leave("job-b")
    assert module_stats(redis, "crawler", heartbeat_ttl=15)["alive"] == {}
