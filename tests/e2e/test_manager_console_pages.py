"""The console's pages on real services: the fleet view, one crawl (its 404 too, its failed URLs and its pause), a
job's log tail and follow."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
import requests

from deploy.procs import wait_for
from frontier.bloom import url_fingerprint
from frontier.registry import WorkerInfo, WorkerRegistry
from messaging import failures, keys
from messaging.clock import RedisClock
from messaging.tasks import Task
from tests.e2e.test_manager_api import ManagerProcess
from tests.plugins.services import Isolated, Processes

pytestmark = pytest.mark.e2e


def test_fleet_view_shows_every_registered_worker_with_its_usage(cf: Isolated, procs: Processes,
                                                                 tmp_path: Path) -> None:
    redis = cf.redis()
    WorkerRegistry(redis).register(WorkerInfo("far-away-job", "universal", "10.1.2.3", "far-host", 4242))
    redis.hset(keys.worker("far-away-job"), mapping={"cpu_percent": "37.5", "rss_bytes": str(200 * 1048576),
                                                     "pages": "1234", "items": "321"})
    manager = ManagerProcess(procs, cf.env, tmp_path / "m").start()
    page = requests.get(f"{manager.url}/fleet", timeout=30)
    assert page.status_code == 200, page.text
    row = re.search(r'<tr data-job="far-away-job".*?</tr>', page.text, re.S).group(0)
    for shown in ("universal", "far-host", "10.1.2.3", "1234", "321", "38 %", "200 MiB", "s ago"):
        assert shown in row, (shown, row)
    assert "Redis up" in page.text and "Kafka up" in page.text and "ZooKeeper up" in page.text
    assert "no master runs" in page.text  # none started in this test


def test_a_crawls_page_and_an_unknown_crawl(cf: Isolated, procs: Processes, tmp_path: Path) -> None:
    redis = cf.redis()
    redis.sadd(keys.CRAWLS, "shown")
    redis.hset(keys.crawl("shown"), mapping={"state": "running", "spider_type": "list", "userid": "ann",
                                             "url": "http://a.test/", "created": "1", "pages": "60", "items": "60"})
    cf.mongo()["shown"].insert_many([{"url": f"http://a.test/{n}", "title": f"t{n}", "status": 200 if n % 3 else 404,
                                      "fetched_at": f"2026-11-24T07:{n // 10:02d}:00Z", "body": {"n": n}}
                                     for n in range(60)])
    # the exact counts (messaging.counts) and the workers' tally of dropped items
    redis.hset(keys.crawl_totals("shown"), mapping={"pages": 66, "items": 40, "failed:HTTP 404": 20,
                                                    "failed:robots": 4, "failed:noindex": 2})
    redis.hset(keys.crawl_reasons("shown"), mapping={"HTTP 404": 20, "dropped: DropItem": 3})
    # why it waits (issue 37): the dispatcher left 5 of its tasks in seeds, their site holding its share already
    redis.hset(keys.PENDING_SEEDS, "shown", 5)
    redis.hset(keys.DISPATCH_WAITS, "shown", json.dumps({"at": RedisClock(redis).now(), "waits": [
        {"reason": "paced", "domain": "a.test", "tasks": 5, "held": 20, "quota": 20}]}))
    manager = ManagerProcess(procs, cf.env, tmp_path / "m").start()
    page = requests.get(f"{manager.url}/crawls/shown", timeout=30)
    assert page.status_code == 200, page.text
    waiting = re.search(r'<div id="crawl-waiting">.*?</div>', page.text, re.S).group(0)
    assert '<li data-reason="paced">paced: a.test allows 10 per 60 s (one every 6 s); next slot now; 5 wait in ' \
           "seeds (20 in the workers&#39; queues, its share is 20)</li>" in waiting, waiting
    assert "<td>200</td><td>40</td>" in page.text and "<td>404</td><td>20</td>" in page.text
    assert "page 1 of 3" in page.text and 'id="next"' in page.text
    assert "<td>HTTP 404</td><td>20</td>" in page.text and "<td>dropped: DropItem</td><td>3</td>" in page.text
    for reason, count in (("robots", 4), ("noindex", 2), ("dropped", 3), ("errors", 20)):
        assert f'<tr data-reason="{reason}"><td>{reason}</td><td>{count}</td>' in page.text, reason
    assert "/api/crawls/shown/export?format=jsonl" in page.text and "format=csv" in page.text
    assert 'data-confirm="Stop crawl shown?' in page.text
    assert '"total": 60' in page.text  # the progress chart's last point
    fields = requests.get(f"{manager.url}/crawls/shown", params={"page": 3, "item": 0}, timeout=30).text
    assert "every field" in fields
    assert re.search(r'<th>body</th><td><pre>\{\s*"n": \d\s*\}</pre>', fields)  # page 3: the oldest items
    missing = requests.get(f"{manager.url}/crawls/no-such-crawl", timeout=30)
    assert missing.status_code == 404 and "There is no crawl no-such-crawl." in missing.text
    listing = requests.get(f"{manager.url}/crawls", timeout=30).text
    assert 'href="/crawls/shown"' in listing and 'data-live' in listing


def test_a_jobs_log_is_tailed_then_followed(cf: Isolated, procs: Processes, tmp_path: Path) -> None:
    manager = ManagerProcess(procs, cf.env, tmp_path / "m").start()
    manager.post("schedule.json", {"project": "crawlfleet", "spider": "list", "jobid": "followed"})
    manager.wait_state("followed", "running")

    def tail() -> dict:
        return requests.get(f"{manager.url}/api/logs/followed", timeout=10).json()

    first = wait_for(lambda: tail() if tail().get("lines") else None, 60, "the job's first log lines")
    log = manager.base / "logs" / "crawlfleet" / "list" / "followed.log"
    # the job goes on logging: the offset is the file's end when it was read, its last line the one just before it
    text = log.read_bytes()
    assert first["offset"] <= len(text) and text[:first["offset"]].decode().rstrip("\n").endswith(first["lines"][-1])
    with log.open("a") as out:
        out.write("2026-11-26 10:00:00 [probe] WARNING: a line appended by the test\n")
    followed = requests.get(f"{manager.url}/api/logs/followed", params={"offset": first["offset"]}, timeout=10).json()
    assert "2026-11-26 10:00:00 [probe] WARNING: a line appended by the test" in followed["lines"]
    page = requests.get(f"{manager.url}/logview/job/followed", timeout=10)
    assert page.status_code == 200 and 'data-job="followed"' in page.text
    assert requests.get(f"{manager.url}/api/logs/nobody", timeout=10).status_code == 404
    manager.post("cancel.json", {"project": "crawlfleet", "job": "followed"})
    manager.wait_state("followed", "finished")


def test_the_stats_history_is_one_sample_a_minute_in_redis(cf: Isolated) -> None:
    from manager import charts
    from messaging.clock import RedisClock

    redis = cf.redis()
    assert charts.sample(redis, 10, 15) is True
    assert charts.sample(redis, 10, 15) is False  # another manager (or call) in the same minute: one sample
    (point,) = charts.history(redis, RedisClock(redis).now())
    assert point["time"] % 60 == 0 and {"seeds", "queued", "leased", "workers", "pages_per_minute"} <= set(point)
    redis.zadd(keys.STATS_HISTORY, {'{"time": 0}': 0})
    assert len(charts.history(redis, RedisClock(redis).now())) == 1  # older than two hours: not shown


def test_a_crawls_failed_urls_its_retry_and_its_pause_on_its_page_and_api(cf: Isolated, procs: Processes,
                                                                          tmp_path: Path) -> None:
    """The crawl's page says since when it is paused and offers Resume (Stop too); it lists the failed URLs with
    their reasons as a filter; the API gives them as JSON, JSON lines and CSV, and retries them."""
    redis = cf.redis()
    redis.sadd(keys.CRAWLS, "flaky")
    redis.hset(keys.crawl("flaky"), mapping={"state": "paused", "paused": "1700000000.5", "spider_type": "list",
                                             "userid": "ann", "url": "http://b.test/", "created": "1"})
    failed = {"/gone": ("HTTP 404", 404, 1), "/broken": ("HTTP 500", 500, 3), "/slow": ("TimeoutError", None, 3)}
    redis.hset(keys.crawl_totals("flaky"), mapping={"pages": 4, "items": 1, "failed:HTTP 404": 1,
                                                    "failed:HTTP 500": 1, "failed:TimeoutError": 1, "listed": 3})
    store = cf.mongo()[failures.collection_name("flaky")]
    for path, (reason, status, attempts) in failed.items():
        task = Task(url=f"http://b.test{path}", crawlid="flaky", spider_type="list")
        fingerprint = url_fingerprint(task.url).hex()
        redis.hset(keys.crawl_counted("flaky"), fingerprint, f"l:{reason}")
        store.insert_one({"_id": fingerprint, "url": task.url, "reason": reason, "status": status,
                          "attempts": attempts, "time": datetime(2026, 1, 2, tzinfo=UTC), "task": task.encode(),
                          "retry": 0, "submitted": 0})
    manager = ManagerProcess(procs, cf.env, tmp_path / "m").start()
    page = requests.get(f"{manager.url}/crawls/flaky", timeout=30).text
    assert 'id="crawl-state">paused</span> <span id="paused-since">since 2023-11-14 22:13:20 UTC' in page
    assert 'id="resume-crawl"' in page and 'id="stop-crawl"' in page and 'id="pause-crawl"' not in page
    listed = re.search(r'<table id="failures".*?</table>', page, re.S).group(0)
    assert listed.count('<td class="url">http://b.test/') == 3 and "<td>HTTP 500</td><td>500</td><td>3</td>" in listed
    assert "3 listed" in page and ">HTTP 500 (1)</a>" in page and 'id="retry-crawl"' in page
    filtered = requests.get(f"{manager.url}/crawls/flaky", params={"reason": "HTTP 500"}, timeout=30).text
    listed = re.search(r'<table id="failures".*?</table>', filtered, re.S).group(0)
    assert "http://b.test/broken" in listed and "http://b.test/gone" not in listed
    assert '<input type="hidden" name="reason" value="HTTP 500">' in filtered  # the retry of what is shown
    api = requests.get(f"{manager.url}/api/crawls/flaky/failures", params={"reason": "HTTP 404"}, timeout=30).json()
    assert api["status"] == "ok" and [row["url"] for row in api["failures"]] == ["http://b.test/gone"]
    assert api["reasons"] == {"HTTP 404": 1, "HTTP 500": 1, "TimeoutError": 1} and api["listed"] == 3
    csv_text = requests.get(f"{manager.url}/api/crawls/flaky/failures", params={"format": "csv"}, timeout=30)
    assert csv_text.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(csv_text.content.decode("utf-8-sig"))))
    assert rows[0] == failures.COLUMNS and sorted(row[0] for row in rows[1:]) == [
        "http://b.test/broken", "http://b.test/gone", "http://b.test/slow"]
    retried = requests.post(f"{manager.url}/api/crawls/flaky/retry", params={"reason": "TimeoutError"}, timeout=30)
    assert retried.status_code == 200 and retried.json()["submitted"] == 1 and retried.json()["state"] == "paused"
    assert [Task.decode(m).url for m in redis.zrange(keys.SEEDS, 0, -1)] == ["http://b.test/slow"]
    refused = requests.post(f"{manager.url}/api/crawls/no-such/retry", timeout=30)
    assert refused.status_code == 400 and "no such crawl" in refused.json()["message"]
