"""Crawl events reach a webhook receiver on real processes: one signed event per crawl event, also when the receiver
answered 500 the first time; finished, empty, failed and stalled in their scenarios; no token or secret in the logs.

Four crawls on the demo web: one with items (finished), one whose start page yields none (finished, empty), one whose
start URL answers 404 (finished, failed), and one of a spider type no worker runs (its task waits in seeds: stalled
after CRAWLFLEET_STALL_AFTER, 3 s here). The receiver answers 500 to the first delivery of every event.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from deploy.demo_rules import DEMO_LIST_RULE, DEMO_UNIVERSAL_RULE, NEWS_SITE
from deploy.procs import wait_for
from tests.plugins.receiver import Receiver

pytestmark = pytest.mark.e2e

SECRET = "e2e-hook-secret-7f3a"
TOKEN = "HOOK-TOKEN-91b2"
STALL_AFTER = 3.0
EXPECTED = {"full": {"finished": 1}, "empty": {"finished": 1, "empty": 1}, "failed": {"finished": 1, "failed": 1},
            "stalled": {"stalled": 1}}


def test_a_receiver_gets_one_signed_event_per_crawl_event(fleet, procs) -> None:
    receiver = Receiver(answer=lambda event, seen: 500 if seen == 0 else 200)
    try:
        fleet.env.update(CRAWLFLEET_NOTIFY_SECRET=SECRET, CRAWLFLEET_NOTIFY_BACKOFF="0.5",
                         CRAWLFLEET_NOTIFY_INTERVAL="0.2", CRAWLFLEET_STALL_AFTER=str(STALL_AFTER))
        fleet.start(universal_workers=1, masters=1)
        notify = {"url": receiver.url(f"/hooks/crawlfleet?token={TOKEN}")}
        start = fleet.url(NEWS_SITE, "/world/")
        fleet.submit(
            {"userid": "ops", "crawlid": "full", "spider_type": "universal", "url": start,
             "rule": DEMO_UNIVERSAL_RULE, "maxdepth": 1, "notify": notify},
            {"userid": "ops", "crawlid": "empty", "spider_type": "universal", "url": start,
             "rule": DEMO_UNIVERSAL_RULE, "maxdepth": 0, "notify": notify},
            {"userid": "ops", "crawlid": "failed", "spider_type": "universal",
             "url": fleet.url(NEWS_SITE, "/no-such-section/"), "rule": DEMO_UNIVERSAL_RULE, "notify": notify},
            {"userid": "ops", "crawlid": "stalled", "spider_type": "list", "url": start, "rule": DEMO_LIST_RULE,
             "notify": {**notify, "on": ["stalled", "finished"]}})
        finished = fleet.wait_finished(["full", "empty", "failed"], timeout=90)
        assert finished["full"]["items"] > 0 and finished["empty"]["items"] == 0
        assert finished["failed"]["start_failure"] == "HTTP 404"

        def accepted() -> dict[str, Counter[str]]:
            return {crawlid: receiver.kinds(crawlid) for crawlid in EXPECTED}

        wait_for(lambda: accepted() == EXPECTED, 60, f"the events {EXPECTED}, got {accepted()}")
        # the window in which a second copy would show: two more stall periods, some 30 notifier passes
        time.sleep(2 * STALL_AFTER)
        assert accepted() == EXPECTED
        per_event = Counter((d.event["id"], d.status) for d in receiver.received)
        for delivery in receiver.accepted():  # each: one 500, then one 200, and nothing after it
            assert per_event[delivery.event["id"], 500] == 1 and per_event[delivery.event["id"], 200] == 1
            assert delivery.signed_by(SECRET), delivery.headers
            assert delivery.path == f"/hooks/crawlfleet?token={TOKEN}"
            assert delivery.event["attempt"] == 2
        full = next(d.event for d in receiver.accepted() if d.event["crawlid"] == "full")
        assert full["items"] == finished["full"]["items"] and full["pages"] == finished["full"]["pages"]
        stalled = next(d.event for d in receiver.accepted() if d.event["event"] == "stalled")
        assert stalled["stalled_for"] >= STALL_AFTER and stalled["pages"] == 0
        logs = "\n".join(procs.log(proc) for _, proc, _ in procs.started)
        assert "notification finished:full@" in logs and "/hooks/crawlfleet?***" in logs
        assert TOKEN not in logs and SECRET not in logs
    finally:
        receiver.close()
