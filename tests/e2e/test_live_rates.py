"""A site's rate changed mid-crawl reaches every worker's walk and politeness step at once, both ways: measured as
the site sees it (the demo web's own count of the pages it served, sampled every 50 ms)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from deploy.demo_rules import DEMO_UNIVERSAL_RULE
from deploy.procs import wait_for
from messaging import keys
from messaging.siteconfig import Rate

pytestmark = pytest.mark.e2e

NEWS = "news.fleet.test"


class Served:
    """Pages the demo web served for a site (robots.txt and its own files aside), sampled on this clock."""

    def __init__(self, fleet: Any) -> None:
        self.fleet = fleet
        self.samples: list[tuple[float, int]] = []
        self.baseline = 0  # the demo web serves the whole session: what earlier tests fetched is not counted
        self.baseline = self.count()

    def count(self) -> int:
        paths = self.fleet.served(NEWS)
        total = sum(n for path, n in paths.items() if path != "/robots.txt" and not path.startswith("/_demoweb/"))
        self.samples.append((time.monotonic(), total - self.baseline))
        return total - self.baseline

    def hits_between(self, start: float, end: float) -> int:
        inside = [n for t, n in self.samples if start <= t <= end]
        return inside[-1] - inside[0] if inside else 0


def set_rate(fleet: Any, hits: int, window: float) -> float:
    """``crawlfleet site rate``; returns this process's time when it answered (the change is in ZooKeeper then)."""
    changer = fleet.procs.crawlfleet("site", "rate", NEWS, str(hits), "--window", str(window), env=fleet.env,
                                     name=f"site-rate-{hits}")
    wait_for(lambda: changer.poll() is not None, 60, "crawlfleet site rate to answer", interval=0.02)
    assert changer.returncode == 0, fleet.procs.log(changer)
    return time.monotonic()


def test_a_raised_rate_is_used_at_once_and_a_lowered_one_too(fleet: Any) -> None:
    fleet.start(universal_workers=2, redis_monitor=True, rate=Rate(2, 120))  # one page a minute
    served = Served(fleet)
    fleet.submit({"userid": "erin", "crawlid": "news-live", "spider_type": "universal", "url": fleet.url(NEWS, "/"),
                  "rule": DEMO_UNIVERSAL_RULE})
    # robots.txt is a paced hit (issue 37, item 6): it takes the first slot, the home page the next, a minute later
    wait_for(lambda: served.count() >= 1, 150, "the home page fetched")
    queued = [keys.queue(job, NEWS) for job in fleet.workers]
    # its share of the workers' queues: 2 minutes of its hits (master.shares); the other links wait in seeds
    wait_for(lambda: sum(fleet.redis.zcard(key) for key in queued) >= 2, 60, "the home page's links queued")
    first = served.count()
    assert first == 1, f"the next page is a minute away: nothing else may have been fetched: {fleet.served(NEWS)}"

    # the bounds below tell "applied" from "not applied" on a loaded machine; the delays the issue asks about (2 s)
    # are printed. Not applied, the next page would be a minute away, and the lowered rate would go on at 2 a second
    raised = set_rate(fleet, 120, 60)  # two a second
    wait_for(lambda: served.count() > first, 20, "the next page, not a minute away", interval=0.05)
    print(f"the raised rate's first page came {served.samples[-1][0] - raised:.2f} s after the answer")
    wait_for(lambda: served.count() >= first + 12, 30, "a dozen pages at the raised rate", interval=0.05)
    assert served.hits_between(raised, time.monotonic()) <= 2 * (time.monotonic() - raised) + 2

    lowered = set_rate(fleet, 30, 60)  # one every 2 s (the window, with some 20 hits in it, does not bind yet)
    wait_for(lambda: served.count() and time.monotonic() >= lowered + 15, 25, "15 s at the lowered rate",
             interval=0.05)
    # from 5 s after the answer, one page every 2 s (five in 10 s), where the raised rate would give 20
    between = served.hits_between(lowered + 5, lowered + 15)
    print(f"{between} pages between 5 and 15 s after the lowered rate's answer")
    assert 1 <= between <= 7
