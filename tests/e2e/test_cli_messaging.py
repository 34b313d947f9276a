"""``crawlfleet submit | info | stats | site | stop`` end to end: both monitors running, answers on Kafka."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deploy.procs import wait_for
from messaging import keys
from messaging.siteconfig import SitePaths, read_site
from messaging.tasks import CrawlFields, Task

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
RULE = {"rules": [{"allow": r"/news/\d+", "follow": True, "extract": {"title": "//h1/text()"}}], "start": "url"}


def cli(env: dict[str, str], *args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deploy.cli", *args], env=env, cwd=REPO, input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def last_json(result: subprocess.CompletedProcess) -> dict[str, Any]:
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_every_command_gets_its_answer(cf, procs, tmp_path):
    env = cf.with_env(CRAWLFLEET_KAFKA_GROUP=cf.name)
    kafka = procs.crawlfleet("kafka-monitor", env=env)
    redis_monitor = procs.crawlfleet("redis-monitor", env=env)
    procs.wait_log(kafka, f"partitions assigned: {cf.settings.topic_incoming}[", 60)
    procs.wait_log(redis_monitor, "redis-monitor: watching", 30)
    redis = cf.redis()

    requests = tmp_path / "requests.jsonl"
    good = {"userid": "bob", "crawlid": "daily", "spider_type": "universal", "rule": RULE}
    requests.write_text("\n".join([
        json.dumps({**good, "url": "http://news.example.com/"}),
        json.dumps({**good, "url": "https://news.example.com/world", "priority": 7}),
        json.dumps({**good, "url": "javascript:alert(1)"}),
        "{not json",
    ]) + "\n")
    submitted = cli(env, "submit", str(requests), "--wait", "--json")
    assert submitted.returncode == 1, submitted.stderr  # two of four are rejected
    outcomes = [json.loads(line) for line in submitted.stdout.splitlines()]
    assert [outcome["status"] for outcome in outcomes] == ["accepted", "accepted", "rejected", "rejected"]
    assert outcomes[2]["reason"].startswith("$.url: ") and "invalid JSON" in outcomes[3]["reason"]
    assert redis.zcard(keys.SEEDS) == 2
    plain = cli(env, "submit", "-", stdin=json.dumps({**good, "url": "http://news.example.com/sports"}))
    assert plain.returncode == 0 and "request 1: accepted (crawl daily)" in plain.stdout
    wait_for(lambda: redis.zcard(keys.SEEDS) == 3, 20, "the piped request in seeds")

    info = cli(env, "info", "daily", "--userid", "bob", "--json")
    assert info.returncode == 0, info.stderr
    answer = last_json(info)
    assert answer["pending"] == 3 and answer["domains"] == {"example.com": {"pending": 3, "queued": 0, "leased": 0,
                                                                                 "parked": 0}}
    human = cli(env, "info", "daily")
    assert human.returncode == 0 and "example.com" in human.stdout and "pending 3" in human.stdout

    stats = cli(env, "stats", "kafka-monitor", "--json")
    assert stats.returncode == 0, stats.stderr
    assert last_json(stats)["modules"]["kafka-monitor"]["plugins"]["crawl"]["lifetime"] == 3
    assert "kafka-monitor" in cli(env, "stats").stdout

    zk = cf.zk()
    paths = SitePaths(cf.settings.zk_root)
    rate = subprocess.Popen([sys.executable, "-m", "deploy.cli", "site", "rate", "news.example.com", "6",
                             "--window", "20"], env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: read_site(zk, paths, "example.com").rate == 6, 30, "the new rate in ZooKeeper")
    assert rate.wait(timeout=30) == 0
    assert read_site(zk, paths, "example.com").window == 20.0
    listed = cli(env, "site", "blacklist", "example.com")
    assert listed.returncode == 0 and "blacklisted" in listed.stdout
    assert read_site(zk, paths, "example.com").blacklisted
    assert cli(env, "site", "rate", "example.com", "--remove").returncode == 0
    assert cli(env, "site", "blacklist", "example.com", "--remove").returncode == 0
    assert read_site(zk, paths, "example.com") == read_site(zk, paths, "never-configured.example")

    paused = cli(env, "pause", "daily", "--json")  # the request kinds pause and resume, through Kafka
    assert paused.returncode == 0, paused.stderr
    assert (last_json(paused)["state"], last_json(paused)["parked"]) == ("paused", 3) and redis.zcard(keys.SEEDS) == 0
    resumed = cli(env, "resume", "daily")
    assert resumed.returncode == 0 and "crawl daily resumed" in resumed.stdout and redis.zcard(keys.SEEDS) == 3

    stopped = cli(env, "stop", "daily", "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert last_json(stopped)["purged"]["seeds"] == 3 and redis.zcard(keys.SEEDS) == 0
    assert redis.hget(keys.crawl("daily"), CrawlFields.STATE) == b"stopped"
    refused = cli(env, "submit", "-", "--wait", stdin=json.dumps({**good, "url": "http://news.example.com/late"}))
    assert refused.returncode == 1 and "was stopped" in refused.stderr
    assert not any(Task.decode(member).crawlid == "daily" for member in redis.zrange(keys.SEEDS, 0, -1))


def test_no_answer_within_the_timeout_is_sent_and_not_confirmed(cf):
    result = cli(cf.env, "info", "nobody-home", "--timeout", "1.5")
    assert result.returncode == 3  # not "failed": the request is in Kafka
    assert "sent; not confirmed yet: no answer within 1.5s" in result.stderr and "Kafka monitor" in result.stderr


def test_invalid_requests_are_refused_before_sending(cf):
    result = cli(cf.env, "site", "rate", "not a domain!", "3")
    assert result.returncode == 1 and "$.domain" in result.stderr
