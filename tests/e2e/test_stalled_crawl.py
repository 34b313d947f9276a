"""A crawl whose only worker type is gone says why it waits, within a minute, and goes on by itself when one is back.

A universal crawl of the news site runs on the fleet's one universal worker, paced so that it is far from done when
that worker is stopped. Within a minute of that the crawl's page on the manager (``#crawl-stalled``, reason
``no_worker``), ``crawlfleet info`` and ``crawlfleet fleet status --json`` (which exits 1: the fleet's own reason)
say that the crawl is stalled because no worker of its spider type is left, and the cluster's Prometheus metric
``crawlfleet_crawl_stalled_seconds{reason="no_worker"}`` is there. A new worker of the type is started (and the site's
pace raised): the crawl finishes on its own, every article stored once and nothing fetched twice, and it is no longer
said to be stalled.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from deploy.demoweb.sites import build_sites
from deploy.procs import wait_for
from messaging.siteconfig import Rate
from tests.e2e.test_manager_api import ManagerProcess
from tests.plugins.demoweb import DEMOWEB_PAGES
from tests.plugins.fleet import FAST
from tests.unit.test_rules import DEMO_UNIVERSAL_RULE

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
NEWS = "news.fleet.test"
CRAWLID = "news-no-worker"
SLOW = Rate(60, 60)  # a page a second: the crawl of ~70 pages is under way, not done, when its worker goes
SHOW_AFTER = 10.0  # CRAWLFLEET_STALL_SHOW_AFTER of this test (the default is a minute)
SAID_WITHIN = 60.0  # the bound: a crawl whose only worker type is gone shows why within a minute
ITEMS_BEFORE = 5


def crawlfleet(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deploy.cli", *args], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=60)


def page_says_no_worker(manager: ManagerProcess) -> bool:
    html = requests.get(f"{manager.url}/crawls/{CRAWLID}", timeout=30).text
    return 'id="crawl-stalled"' in html and 'data-reason="no_worker"' in html and "no worker of type universal" in html


def status_says_no_worker(env: dict[str, str]) -> dict[str, Any] | None:
    result = crawlfleet(env, "fleet", "status", "--json")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    stall = next((s for s in report["stalled"] if s["crawlid"] == CRAWLID), None)
    return {**stall, "exit": result.returncode} if stall and stall["reason"] == "no_worker" else None


def test_a_crawl_whose_only_worker_type_is_gone_says_why_and_goes_on_when_one_is_back(fleet, procs, tmp_path):
    site = next(s for s in build_sites(DEMOWEB_PAGES) if getattr(s, "name", None) == NEWS)
    fleet.env.update(CRAWLFLEET_STALL_SHOW_AFTER=str(SHOW_AFTER))
    fleet.start(redis_monitor=True, rate=SLOW)
    before = fleet.served(NEWS)  # the demo web serves the whole session: earlier tests' requests are not this one's
    first = fleet.start_worker("universal", f"{fleet.cf.name}-universal-0")
    manager = ManagerProcess(procs, fleet.env, tmp_path / "manager").start()
    try:
        fleet.submit({"userid": "erin", "crawlid": CRAWLID, "spider_type": "universal", "url": fleet.url(NEWS),
                      "rule": DEMO_UNIVERSAL_RULE})
        wait_for(lambda: fleet.cf.mongo()[CRAWLID].count_documents({}) >= ITEMS_BEFORE, 60,
                 f"{ITEMS_BEFORE} items stored")
        first.terminate()  # the only universal worker goes (its tasks go back to seeds)
        assert first.wait(timeout=60) == 0, procs.log(first)[-3000:]

        wait_for(lambda: page_says_no_worker(manager), SAID_WITHIN, "the crawl page to say no worker is left")
        stall = status_says_no_worker(fleet.env)
        assert stall is not None and stall["exit"] == 1, stall
        assert "no worker of type universal" in stall["text"] and stall["for"] >= SHOW_AFTER, stall
        info = crawlfleet(fleet.env, "info", CRAWLID, "--json")
        answer = json.loads(info.stdout.strip().splitlines()[-1])
        assert answer["stalled"]["reason"] == "no_worker", answer
        metrics = requests.get(f"{manager.url}/metrics", timeout=30).text
        assert f'crawlfleet_crawl_stalled_seconds{{crawlid="{CRAWLID}",reason="no_worker"}}' in metrics

        fleet.set_default_rate(FAST)
        fleet.start_worker("universal", f"{fleet.cf.name}-universal-1")
        event = fleet.wait_finished([CRAWLID], 120)[CRAWLID]
    finally:
        manager.stop()
        fleet.close()

    urls = [item["url"] for item in fleet.items(CRAWLID)]
    assert len(urls) == len(set(urls)) == site.articles == event["items"], (len(urls), len(set(urls)), event)
    twice = {path: n - before.get(path, 0) for path, n in fleet.served(NEWS).items() if n - before.get(path, 0) > 1}
    assert not twice, f"fetched more than once: {twice}"
    assert status_says_no_worker(fleet.env) is None
