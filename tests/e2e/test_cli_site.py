"""``crawlfleet site``: the default rate, ``site show`` (rate, spacing, adaptive delay, robots.txt, block) and
``site rate --burst --adaptive`` answered with the spacing, on real ZooKeeper, Redis, Kafka and monitors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from frontier.adaptive import AdaptiveDelay, Sample
from frontier.client import FrontierClient
from frontier.robots_cache import RobotsCache
from messaging.siteconfig import Rate, SiteConfig, SitePaths, read_site, update_site, write_defaults

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def cli(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deploy.cli", *args], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def as_json(result: subprocess.CompletedProcess) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_default_rate_is_printed_and_a_site_shows_what_applies(cf: Any) -> None:
    plain = cli(cf.env, "site")
    assert plain.returncode == 0, plain.stderr
    assert "default rate: 10 per 60 s (one every 6 s)" in plain.stdout  # nothing in ZooKeeper: the built-in one
    zk, redis = cf.zk(), cf.redis()
    paths = SitePaths(cf.settings.zk_root)
    write_defaults(zk, paths, Rate(120, 60))
    assert as_json(cli(cf.env, "site", "--json")) == {"default": {"rate": 120, "window": 60.0, "spacing": 0.5}}

    shown = as_json(cli(cf.env, "site", "show", "www.plain.test", "--json"))
    assert shown["effective"]["default"] and shown["effective"]["spacing"] == 0.5 and shown["spacing_now"] == 0.5
    assert shown["blocked_for"] is None and not shown["robots"]["cached"]

    update_site(zk, paths, "slowsite.com", lambda _: SiteConfig(rate=30, window=60, burst=2, adaptive=True))
    AdaptiveDelay(redis).record([Sample("slowsite.com", 3.0)], {"slowsite.com": 2.0})
    FrontierClient(redis).block("slowsite.com", 120)
    RobotsCache(redis, lambda url: "User-agent: *\nCrawl-delay: 5\n").lookup("http://www.slowsite.com/")
    shown = as_json(cli(cf.env, "site", "show", "www.slowsite.com", "--json"))
    assert shown["domain"] == "slowsite.com"
    assert shown["effective"] == {"rate": 30, "window": 60.0, "burst": 2, "adaptive": True, "spacing": 2.0,
                                  "blacklisted": False, "default": False}
    assert shown["adaptive"]["delay"] == 3.0 and shown["spacing_now"] == 3.0  # the adaptive delay is slower
    assert 100 < shown["blocked_for"] <= 120
    assert shown["robots"]["cached"] and shown["robots"]["crawl_delay"] == 5.0
    human = cli(cf.env, "site", "show", "www.slowsite.com")
    assert human.returncode == 0, human.stderr
    for text in ("30 per 60 s (one every 2 s, burst 2, adaptive)", "spacing:   3 s between hits", "delay 3 s",
                 "Crawl-delay 5", "left (Retry-After)"):
        assert text in human.stdout, human.stdout


def test_a_rate_with_burst_and_adaptive_is_answered_with_its_spacing(cf: Any, procs: Any) -> None:
    env = cf.with_env(CRAWLFLEET_KAFKA_GROUP=cf.name)
    kafka = procs.crawlfleet("kafka-monitor", env=env)
    monitor = procs.crawlfleet("redis-monitor", env=env)
    procs.wait_log(kafka, f"partitions assigned: {cf.settings.topic_incoming}[", 60)
    procs.wait_log(monitor, "redis-monitor: watching", 30)
    answer = as_json(cli(env, "site", "rate", "news.example.com", "30", "--window", "60", "--burst", "3",
                         "--adaptive", "--json"))
    assert answer["effective"]["spacing"] == 2.0 and answer["effective"]["burst"] == 3
    assert answer["effective"]["adaptive"] is True
    config = read_site(cf.zk(), SitePaths(cf.settings.zk_root), "example.com")
    assert (config.rate, config.window, config.burst, config.adaptive) == (30, 60.0, 3, True)
    human = cli(env, "site", "rate", "example.com", "60")  # the window, burst and adaptive flag stay
    assert human.returncode == 0 and "60 per 60 s (one every 1 s, burst 3, adaptive)" in human.stdout, human.stdout
    assert cli(env, "site", "rate", "example.com", "0", "--burst", "0").returncode != 0  # a burst is at least 1
