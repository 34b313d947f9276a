"""The operator's day on real processes (issue 42, items 3 and 4), judged by a site's access log and MongoDB.

- **Failed URLs and their retry.** A site answers 404, 500 and no answer at all (a timeout) for known pages.
  ``crawlfleet failures`` lists exactly the pages the access log shows failing, with their reasons and as many
  attempts as the log has requests; once the site is fixed, ``crawlfleet retry`` fetches exactly those pages, once
  each, the crawl finishes again (a second ``crawl_finished``) and its counts are exact: every page once, every item
  in MongoDB, no failure left.
- **Pause and resume.** Two crawls on the same site; one is paused mid-crawl by a pause request on Kafka (what
  ``crawlfleet pause`` sends once it has started: tests/e2e/test_cli_messaging.py runs the command): from 2 s
  after the request until it is resumed (through the manager's API) the access log shows no request of it, while
  the other crawl goes on, and ``crawlfleet info`` shows none of its tasks queued or leased; then it completes with
  every page fetched once and its items exact in MongoDB.

One fleet for both (a Kafka monitor, a Redis monitor, a master, one universal worker whose download timeout is 2 s).
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import pytest
import requests

from deploy.procs import wait_for
from messaging.answers import AnswerWaiter
from messaging.siteconfig import Rate
from tests.e2e.test_manager_api import ManagerProcess
from tests.plugins.logged_site import LoggedSite
from tests.plugins.services import REPO

pytestmark = pytest.mark.e2e
CRAWL_TIMEOUT = 90
REASONS = {"404": "HTTP 404", "500": "HTTP 500", "timeout": "DownloadTimeoutError"}  # Scrapy 2.19 names it so


def rule(section: str) -> dict[str, Any]:
    return {"rules": [{"allow": rf"/{section}/\d+$", "extract": {"title": "//h1"}}]}


def ask(fleet: Any, request: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """Send a request as any Kafka client does (the command line's ``ask`` does the same after its start-up):
    when it was sent, and its answer."""
    with AnswerWaiter(fleet.cf.settings) as waiter:
        sent = time.time()
        fleet.submit(request)
        return sent, waiter.wait([request["uuid"]], 60)[request["uuid"]]


def cli(fleet: Any, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deploy.cli", *args], env=fleet.env, cwd=REPO, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def fleet(fleet_module: Any) -> Any:
    fleet_module.start(redis_monitor=True)
    fleet_module.start_workers("universal", [f"{fleet_module.cf.name}-universal-0"], "-s", "DOWNLOAD_TIMEOUT=2")
    return fleet_module


def test_failed_urls_are_listed_as_the_site_saw_them_and_a_retry_fetches_exactly_those(fleet: Any) -> None:
    site = LoggedSite({"f": 12}, failing={"/f/3": "404", "/f/5": "500", "/f/8": "500", "/f/7": "timeout"})
    try:
        fleet.set_default_rate()
        fleet.submit({"userid": "ops", "crawlid": "flaky", "spider_type": "universal", "url": site.url("/f/"),
                      "rule": rule("f")})
        first = fleet.wait_finished(["flaky"], CRAWL_TIMEOUT)["flaky"]
        answers: dict[str, set[str]] = {}
        for hit in site.hits():
            answers.setdefault(hit.path, set()).add(hit.answer)
        failing = {path: found.pop() for path, found in answers.items() if found != {"200"}}
        assert failing == site.failing  # what the site did, as its log says
        assert first["failures"] == {"HTTP 404": 1, "HTTP 500": 2, "DownloadTimeoutError": 1}
        assert first["failed_urls"] == {"listed": 4, "unlisted": 0} and first["retries"] == 0

        listed = cli(fleet, "failures", "flaky", "--format", "jsonl")
        assert listed.returncode == 0, listed.stderr
        rows = {row["url"]: row for row in map(json.loads, listed.stdout.splitlines())}
        attempts = Counter(hit.path for hit in site.hits())
        assert set(rows) == {site.url(path) for path in failing}
        for path, answer in failing.items():
            row = rows[site.url(path)]
            assert row["reason"] == REASONS[answer] and row["attempts"] == attempts[path], (path, row)
            assert row["status"] == (int(answer) if answer.isdigit() else None)
        only = cli(fleet, "failures", "flaky", "--reason", "HTTP 500", "--format", "csv")
        table = list(csv.reader(io.StringIO(only.stdout.lstrip("\ufeff"))))
        assert table[0][:2] == ["url", "reason"] and sorted(r[0] for r in table[1:]) == [site.url("/f/5"),
                                                                                          site.url("/f/8")]
        human = cli(fleet, "failures", "flaky")
        assert human.returncode == 0 and "4 failed URLs listed" in human.stdout

        site.fix()
        fixed_at = time.time()
        retried = cli(fleet, "retry", "flaky", "--json")
        assert retried.returncode == 0, retried.stderr
        outcome = json.loads(retried.stdout)
        assert (outcome["retry"], outcome["submitted"], outcome["reopened"]) == (1, 4, True)
        second = fleet.wait_finished(["flaky"], CRAWL_TIMEOUT, retries=1)["flaky"]
        assert Counter(hit.path for hit in site.hits(since=fixed_at)) == {path: 1 for path in failing}
        assert second["event_id"] != first["event_id"]
        assert (second["pages"], second["items"], second["restored"], second["retried"]) == (13, 12, 0, 4)
        assert second["failures"] == {} and second["failed_urls"] == {"listed": 0, "unlisted": 0}
        assert fleet.cf.mongo()["flaky"].count_documents({}) == 12
        assert cli(fleet, "failures", "flaky", "--format", "jsonl").stdout == ""
    finally:
        site.close()


def test_a_paused_crawl_is_not_fetched_until_resumed_and_then_completes_with_every_page_once(
        fleet: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    site = LoggedSite({"a": 30, "b": 30})
    manager = ManagerProcess(fleet.procs, fleet.env, tmp_path_factory.mktemp("manager")).start()
    try:
        fleet.set_default_rate(Rate(4, 1))  # both crawls share the site's 4 hits a second
        fleet.submit(*({"userid": "ops", "crawlid": f"crawl-{s}", "spider_type": "universal",
                        "url": site.url(f"/{s}/"), "rule": rule(s)} for s in ("a", "b")))
        wait_for(lambda: sum(h.path.startswith("/a/") for h in site.hits()) >= 8, 60, "crawl-a under way")
        commanded, answer = ask(fleet, {"action": "pause", "userid": "ops", "crawlid": "crawl-a", "uuid": "pause-a"})
        assert (answer["status"], answer["state"], answer["changed"]) == ("ok", "paused", True)
        quiet_from = commanded + 2.0
        # the other crawl goes on meanwhile: wait for some of its pages after the paused one went quiet
        wait_for(lambda: sum(h.path.startswith("/b/") for h in site.hits(since=quiet_from)) >= 6, 60,
                 "crawl-b going on while crawl-a is paused")
        info = json.loads(cli(fleet, "info", "crawl-a", "--json").stdout.splitlines()[-1])
        assert info["state"] == "paused" and info["paused"] is not None
        assert info["queued"] == info["leased"] == 0 and info["parked"] > 0  # the worker handed back what it held
        page = requests.get(f"{manager.url}/crawls/crawl-a", timeout=30).text
        assert 'id="paused-since"' in page and 'id="resume-crawl"' in page
        resumed_at = time.time()
        resumed = requests.post(f"{manager.url}/api/crawls/crawl-a/resume", timeout=60).json()
        assert (resumed["status"], resumed["state"], resumed["changed"]) == ("ok", "running", True)
        during = [hit for hit in site.hits(since=quiet_from, until=resumed_at) if hit.path.startswith("/a/")]
        assert during == [], f"crawl-a was fetched while paused: {during}"
        events = fleet.wait_finished(["crawl-a", "crawl-b"], CRAWL_TIMEOUT)
        for section in ("a", "b"):
            served = Counter(hit.path for hit in site.hits() if hit.path.startswith(f"/{section}/"))
            assert served == {path: 1 for path in site.pages(section)}, section  # every page, once
            event = events[f"crawl-{section}"]
            assert (event["pages"], event["items"], event["restored"]) == (31, 30, 0)
            assert fleet.cf.mongo()[f"crawl-{section}"].count_documents({}) == 30
    finally:
        manager.stop()
        site.close()
