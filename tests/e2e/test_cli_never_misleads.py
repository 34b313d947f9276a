"""The CLI never misleads: with the monitors down a request is "sent; not confirmed yet" (exit 3) and says where it
waits — and it does take effect once the monitors run; ``info`` on an unknown crawl fails; ``site show`` finds a
robots.txt cached with a port; a service that is down is one line, not a client library's retries."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deploy.procs import free_port, wait_for
from frontier.robots_cache import RobotsCache
from messaging import keys
from messaging.siteconfig import SitePaths, read_site
from tests.e2e.test_cli_messaging import RULE, cli

pytestmark = pytest.mark.e2e
QUICK = ("--timeout", "2")


def test_with_the_monitors_down_a_change_is_sent_not_confirmed_and_applies_when_they_run(cf: Any, procs: Any) -> None:
    env = cf.with_env(CRAWLFLEET_KAFKA_GROUP=cf.name)
    zk = cf.zk()
    paths = SitePaths(cf.settings.zk_root)

    first = cli(env, "site", "rate", "first.example", "7", "--window", "70", *QUICK)
    assert first.returncode == 3, first.stdout + first.stderr
    assert "sent; not confirmed yet: no answer within 2s" in first.stderr and "Error" not in first.stderr
    assert "waits in Kafka for a Kafka monitor (none is running" in first.stderr
    assert "`crawlfleet site show first.example`" in first.stderr
    stop = cli(env, "stop", "some-crawl", *QUICK)
    assert stop.returncode == 3 and "`crawlfleet info some-crawl` (state: stopped)" in stop.stderr, stop.stderr
    info = cli(env, "info", "some-crawl", *QUICK)
    assert info.returncode == 3 and "it changes nothing (it only reads)" in info.stderr, info.stderr
    crawl = json.dumps({"userid": "u", "crawlid": "later", "spider_type": "universal", "rule": RULE,
                        "url": "http://news.example.com/"})
    submitted = cli(env, "submit", "-", "--json", *QUICK, stdin=crawl)
    assert submitted.returncode == 3, submitted.stdout + submitted.stderr
    assert json.loads(submitted.stdout.splitlines()[0])["status"] == "sent; not confirmed yet"

    kafka = procs.crawlfleet("kafka-monitor", env=env)  # the requests are routed into Redis; nobody answers yet
    procs.wait_log(kafka, f"partitions assigned: {cf.settings.topic_incoming}[", 60)
    second = cli(env, "site", "rate", "second.example", "8", "--window", "80", *QUICK)
    assert second.returncode == 3, second.stdout + second.stderr
    assert "waits in Redis for a Redis monitor (none is running" in second.stderr
    assert read_site(zk, paths, "first.example").rate is None  # not applied: and the CLI never said it was

    redis_monitor = procs.crawlfleet("redis-monitor", env=env)
    procs.wait_log(redis_monitor, "redis-monitor: watching", 30)
    wait_for(lambda: read_site(zk, paths, "first.example").rate == 7 and read_site(zk, paths, "second.example")
             .rate == 8, 30, "both rates applied once the monitors run")  # what "not confirmed yet" promised
    wait_for(lambda: cf.redis().exists(keys.crawl("later")), 30, "the crawl accepted")

    unknown = cli(env, "info", "no-such-crawl", "--json")
    assert unknown.returncode == 1, unknown.stdout + unknown.stderr
    assert "no crawl no-such-crawl" in unknown.stderr and json.loads(unknown.stdout)["exists"] is False
    known = cli(env, "info", "later")
    assert known.returncode == 0 and "crawl later" in known.stdout


def test_site_show_finds_robots_txt_cached_with_its_port(cf: Any) -> None:
    redis = cf.redis()
    RobotsCache(redis, lambda url: "User-agent: *\nCrawl-delay: 4\n").lookup("http://news.ported.test:8123/")
    for asked in ("news.ported.test", "news.ported.test:8123", "http://news.ported.test:8123/world/"):
        shown = cli(cf.env, "site", "show", asked, "--json")
        assert shown.returncode == 0, shown.stderr
        robots = json.loads(shown.stdout)["robots"]
        assert robots["cached"] and robots["crawl_delay"] == 4.0 and set(robots["hosts"]) == {
            "news.ported.test:8123"}, asked
    human = cli(cf.env, "site", "show", "news.ported.test")
    assert "cached for news.ported.test:8123" in human.stdout and "Crawl-delay 4" in human.stdout, human.stdout
    other = cli(cf.env, "site", "show", "news.ported.test:9999")
    assert "not cached for news.ported.test:9999 " in other.stdout, other.stdout


def test_a_service_that_is_down_is_one_line(cf: Any) -> None:
    zk_down = cf.with_env(CRAWLFLEET_ZK_HOSTS=f"127.0.0.1:{free_port()}")
    for args in (("site",), ("site", "show", "example.com")):
        result = cli(zk_down, *args)
        assert result.returncode == 1 and result.stdout == "", result.stdout
        (line,) = result.stderr.strip().splitlines()  # one line, no "Connection dropped" of each retry
        assert line.startswith("Error: cannot reach ZooKeeper at 127.0.0.1:") and "CRAWLFLEET_ZK_HOSTS" in line

    mongo_down = cf.with_env(CRAWLFLEET_MONGO_URI=f"mongodb://user:pw@127.0.0.1:{free_port()}/")
    result = cli(mongo_down, "export", "some-crawl")
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: cannot reach MongoDB at mongodb://127.0.0.1:") and "Topology" not in line
    assert "pw" not in line  # never the credentials

    redis_down = cf.with_env(CRAWLFLEET_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    result = cli(redis_down, "revisits", "some-crawl")
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "cannot reach Redis" in result.stderr and "Traceback" not in result.stderr
