"""Continuous crawling end to end on the changing site (``deploy.demoweb.changing``, a compressed clock): conditional
requests answered 304, change detection by main-text digest, intervals that grow and shrink, new articles found on
the revisited list page, a worker killed with SIGKILL (no revisit lost, none doubled), and a stop that purges the
schedule. What is checked is what the site saw (its own counts and fetch log), what Redis holds and what MongoDB
stored."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deploy.demoweb.changing import (
    CHANGING_IP,
    CHANGING_NAME,
    NO_VALIDATORS,
    read_state,
    start_changing,
    stop_changing,
)
from deploy.procs import kill_hard, wait_for
from messaging import keys
from messaging.clients import as_text
from messaging.tasks import Task

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SCALE = 120.0  # a site hour in 30 real seconds
INITIAL = 12
PUBLISH_EVERY = 1200.0  # site seconds: a new article every 10 real seconds
INTERVAL, LOW, HIGH = 4.0, 1.5, 40.0  # real seconds (8, 3 and 80 site minutes)


@pytest.fixture
def changing(tmp_path: Path) -> Iterator[dict[str, Any]]:
    status = start_changing(tmp_path / "changing", scale=SCALE, initial=INITIAL, publish_every=PUBLISH_EVERY)
    try:
        yield status
    finally:
        stop_changing(status)


def crawl_request(crawlid: str, url: str) -> dict[str, Any]:
    rule = {"rules": [{"allow": r"/a/\d+\.html$", "extract": {"title": "//h1"}}], "required": ["title"],
            "revisit": {"pages": "all", "interval": INTERVAL, "min": LOW, "max": HIGH}}
    return {"userid": "rita", "crawlid": crawlid, "spider_type": "universal", "url": url, "rule": rule}


def start(fleet: Any, changing: dict[str, Any], workers: int) -> list[str]:
    fleet.use_demoweb({"hosts_file": changing["hosts_file"], "port": changing["port"],
                       "sites": {CHANGING_NAME: CHANGING_IP}})
    fleet.start(masters=1, redis_monitor=True)
    jobs = [f"{fleet.cf.name}-revisit-{n}" for n in range(workers)]
    fleet.start_workers("universal", jobs)
    return jobs


def states(redis: Any, crawlid: str) -> dict[str, dict[str, Any]]:
    return {as_text(url): json.loads(raw) for url, raw in redis.hgetall(keys.revisit_state(crawlid)).items()}


def path_of(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def test_304_digest_adaptive_intervals_new_articles_info_and_stop(fleet: Any, changing: dict[str, Any]) -> None:
    start(fleet, changing, workers=1)
    crawlid = "changing-1"
    fleet.submit(crawl_request(crawlid, changing["url"]))
    redis = fleet.redis

    def enough() -> bool:
        counts = read_state(changing)["counts"]
        stats = {as_text(k): float(v) for k, v in redis.hgetall(keys.revisit_stats(crawlid)).items()}
        newest = fleet.cf.mongo()[crawlid].count_documents(
            {"url": {"$regex": rf"/a/({INITIAL + 1}|{INITIAL + 2})\.html$"}})
        return counts.get("304", 0) >= 15 and stats.get("changed", 0) >= 4 and stats.get("unchanged", 0) >= 30 \
            and newest >= 1

    wait_for(enough, 150, "304s, changes, unchanged revisits and a new article stored", interval=1.0)
    site = read_state(changing)
    revisits = states(redis, crawlid)
    pages = {path_of(url): state for url, state in revisits.items() if "/a/" in url}
    assert changing["url"] in revisits  # the list page is revisited too

    # 304: only pages with validators get them, and every revisit of an unchanged one did
    for path, page in site["pages"].items():
        statuses = [status for _, status, _ in page["fetches"]]
        if page["validators"] == NO_VALIDATORS:
            assert 304 not in statuses, path
    assert site["counts"]["unchanged_304"] == site["counts"]["unchanged_revisits"] > 0
    # digest: a page without validators that never changes is fetched in full again and again, counted unchanged,
    # and its interval grows; its MongoDB document was written once
    never = [path for path, page in site["pages"].items()
             if page["rate"] == 0 and page["validators"] == NO_VALIDATORS and len(page["fetches"]) >= 3]
    assert never, "no page without validators was revisited twice"
    for path in never:
        assert {status for _, status, _ in site["pages"][path]["fetches"]} == {200}
        assert pages[path]["interval"] > INTERVAL and pages[path]["done"] >= 2
        document = fleet.cf.mongo()[crawlid].find_one({"url": {"$regex": rf"{path}$"}})
        assert document["versions"] == 1 and document["digest"]
    # growth and shrink: never-changing pages sit above the start interval, often-changing ones below theirs
    slow = [pages[p]["interval"] for p, page in site["pages"].items()
            if page["rate"] == 0 and p in pages and pages[p]["done"] >= 1]
    fast = [pages[p]["interval"] for p, page in site["pages"].items()
            if page["rate"] == 4.0 and p in pages and pages[p]["done"] >= 1]
    assert min(slow) > INTERVAL and sum(fast) / len(fast) < sum(slow) / len(slow)
    # each page's last revisit moved its interval the rule's way
    for url, state in revisits.items():
        if state.get("outcome") == "changed":
            assert state["interval"] < state["previous"] or state["interval"] == LOW, (url, state)
        elif state.get("outcome") in ("unchanged", "not_modified"):
            assert state["interval"] > state["previous"] or state["interval"] == HIGH, (url, state)
    assert {state.get("outcome") for state in revisits.values()} >= {"changed", "not_modified", "unchanged"}
    assert all(LOW <= state["interval"] <= HIGH for state in revisits.values())
    # a changed page's document: versions, changed_at, the previous digest
    changed = fleet.cf.mongo()[crawlid].find_one({"versions": {"$gte": 2}})
    assert changed is not None and changed["previous_digest"] != changed["digest"] and changed["changed_at"]
    # new articles came through the revisited list page and the Bloom filter: each stored once
    urls = [item["url"] for item in fleet.items(crawlid)]
    assert len(urls) == len(set(urls)) and len(urls) > INITIAL

    # the info answer and the CLI
    info = cli(fleet.env, "info", crawlid, "--json")
    assert info["state"] == "running" and info["revisit"]["scheduled"] >= len(revisits)
    assert info["revisit"]["not_modified"] >= 15 and info["revisit"]["changed"] >= 4

    # stopping purges the schedule; nothing of the crawl is left to revisit
    fleet.submit({"action": "stop", "userid": "rita", "crawlid": crawlid, "uuid": uuid.uuid4().hex})
    wait_for(lambda: not redis.sismember(keys.REVISIT_CRAWLS, crawlid)
             and not any(redis.exists(key) for key in (keys.revisit_due(crawlid), keys.revisit_out(crawlid),
                                                       keys.revisit_state(crawlid), keys.revisit_stats(crawlid))),
             30, "the revisit schedule purged")
    assert not any(Task.decode(m).crawlid == crawlid for m in redis.zrange(keys.SEEDS, 0, -1))


def test_kill_9_loses_no_revisit_and_doubles_none(fleet: Any, changing: dict[str, Any]) -> None:
    victim, survivor = start(fleet, changing, workers=2)
    crawlid = "changing-crash"
    fleet.submit(crawl_request(crawlid, changing["url"]))
    redis = fleet.redis
    wait_for(lambda: sum(s["gen"] for s in states(redis, crawlid).values()) >= 30, 90, "30 revisits moved")
    kill_hard(fleet.workers[victim].pid)
    at_kill = states(redis, crawlid)

    def partition_holds() -> None:
        due = {as_text(u) for u in redis.zrange(keys.revisit_due(crawlid), 0, -1)}
        out = {as_text(u) for u in redis.zrange(keys.revisit_out(crawlid), 0, -1)}
        assert not due & out and due | out == set(states(redis, crawlid)), (due, out)

    def every_page_revisited_since() -> bool:
        partition_holds()
        now = states(redis, crawlid)
        return all(now[url]["done"] > state["gen"] for url, state in at_kill.items())

    # every URL the crawl revisited before the kill, including those the victim held, is revisited again after
    # it: none lost (the victim's leases come back after CRAWLFLEET_HEARTBEAT_TTL)
    wait_for(every_page_revisited_since, 120, "every page revisited after the kill", interval=0.5)
    # the victim is retired once its heartbeat expires; the survivor may have revisited every page before that (when
    # the victim held none of them), so its retirement is waited for, not assumed to have come first
    wait_for(lambda: redis.zscore(keys.RETIRED_WORKERS, victim) is not None, 60, "the killed worker retired")
    # none doubled: one revisit task at most per URL anywhere, and each generation counted once
    tasks = [Task.decode(m) for key in [keys.SEEDS, *(as_text(k) for k in redis.scan_iter("*:queue")),
                                        *(as_text(k) for k in redis.scan_iter("*:inflight"))]
             for m in redis.zrange(key, 0, -1)]
    revisit_urls = [task.url for task in tasks if task.crawlid == crawlid and task.revisit]
    assert len(revisit_urls) == len(set(revisit_urls))
    stats = {as_text(k): float(v) for k, v in redis.hgetall(keys.revisit_stats(crawlid)).items()}
    counted = stats.get("changed", 0) + stats.get("unchanged", 0) + stats.get("failed", 0)
    assert counted == sum(state["done"] for state in states(redis, crawlid).values())
    urls = [item["url"] for item in fleet.items(crawlid)]
    assert len(urls) == len(set(urls))
    assert fleet.workers[survivor].poll() is None  # the survivor did the revisits and still runs


def cli(env: dict[str, str], *args: str) -> dict[str, Any]:
    result = subprocess.run([sys.executable, "-m", "deploy.cli", *args], env=env, cwd=REPO, capture_output=True,
                            text=True, timeout=90)
    assert result.returncode == 0, result.stderr + result.stdout
    return json.loads(result.stdout.strip().splitlines()[-1])

