"""Why a crawl waits, in words (issue 37): each reason's line, the next slot of a paced site, and `crawlfleet info`."""

from __future__ import annotations

import pytest

from messaging.siteconfig import Rate
from messaging.waits import _slot_in, describe

pytestmark = pytest.mark.unit

US = 1_000_000


def test_the_next_slot_follows_the_token_bucket() -> None:
    rate = Rate(10, 60)  # one every 6 s
    now = 1000.0
    assert _slot_in(None, None, rate, now) == 0.0  # never hit: due now
    assert _slot_in(int((now - 2) * US), "0.0", rate, now) == pytest.approx(4.0)  # last hit 2 s ago
    assert _slot_in(int((now + 4) * US), "0.0", rate, now) == pytest.approx(10.0)  # a hit reserved 4 s ahead
    assert _slot_in(int((now - 60) * US), "0.0", rate, now) == 0.0  # refilled long ago
    assert _slot_in(int(now * US), "0.0", None, now) is None  # the rate is unknown (ZooKeeper away)
    assert _slot_in(int(now * US), "0.0", Rate(0, 60), now) is None  # no hit allowed at all


def test_each_reason_in_one_line() -> None:
    paced = {"reason": "paced", "domain": "slow.test", "tasks": 280, "where": "seeds", "held": 20, "quota": 20,
             "rate": 10, "window": 60.0, "next_slot_in": 4.83}
    assert describe(paced) == ("paced: slow.test allows 10 per 60 s (one every 6 s); next slot in 4.8 s; 280 wait in "
                               "seeds (20 in the workers' queues, its share is 20)")
    queued = {"reason": "paced", "domain": "slow.test", "tasks": 20, "where": "queues", "next_slot_in": None}
    assert describe(queued) == "paced: slow.test allows ?; next slot unknown; 20 in the workers' queues"
    down = {"reason": "robots", "state": "unreachable", "host": "b.test:8080", "domain": "b.test", "tasks": 7,
            "down_for": 42.2, "retry_in": 17.6, "failures": 3, "why": "HTTP 500"}
    assert describe(down) == ("robots.txt pending: b.test:8080 unreachable for 42 s (HTTP 500, 3 tries), next try in "
                              "18 s; 7 tasks wait")
    fetching = {"reason": "robots", "state": "fetching", "host": "c.test", "tasks": 2}
    assert describe(fetching) == "robots.txt pending: c.test's robots.txt is being fetched; 2 tasks wait"
    blocked = {"reason": "blocked", "domain": "d.test", "tasks": 4, "until_in": 29.7}
    assert describe(blocked) == "blocked: d.test asked for a pause (429/503), 30 s left; 4 tasks wait"
    full = {"reason": "backlog_full", "spider_type": "universal", "tasks": 1500, "held": 288, "bound": 288}
    assert describe(full) == ("backlog full: every universal worker holds its bound (288 tasks held of 288); 1500 "
                              "tasks wait in seeds")
    orphan = {"reason": "no_worker", "spider_type": "list", "tasks": 3}
    assert describe(orphan) == "no worker of type list: 3 tasks wait in seeds"


def test_crawlfleet_info_prints_why_the_crawl_waits(capsys: pytest.CaptureFixture[str]) -> None:
    from deploy.cli_messaging import _render_info

    _render_info({"crawlid": "c", "spider_type": "list", "state": "running", "owner": "o", "pending": 3, "queued": 0,
                  "leased": 0, "total_domains": 0, "pages": 0, "items": 0, "enqueued": 3, "domains": {}, "jobs": {},
                  "waiting": [{"reason": "no_worker", "spider_type": "list", "tasks": 3}]})
    assert "waiting no worker of type list: 3 tasks wait in seeds" in capsys.readouterr().out
