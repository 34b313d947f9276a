"""Pacing as the site's access log shows it, with two workers and robots.txt included (issue 37, items 6 and 7).

Three hosts of a site in a process of its own (``bench.politeness_site``: its log stamps each request as it arrives)
are crawled at once, each at its own rate — 60 per 60 s, 10 per 60 s and 5 per 1 s — by two workers of one spider
type and host (both throttle keys shared). Over the first 65 seconds (the first window of the slow rates, where the
robots.txt used to come on top of N pages) no span of W seconds holds more than N requests of a host, its
robots.txt counted like a page, and the first window holds exactly N: the pace is used, not merely respected."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from bench.throttle import max_in_window
from deploy.procs import wait_for
from messaging.siteconfig import Rate, SiteConfig, SitePaths, update_site
from tests.plugins.paced_site import paced_site

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

RATES = {"p60.pacing.test": Rate(60, 60), "p10.pacing.test": Rate(10, 60), "p5.pacing.test": Rate(5, 1)}
SPAN = 65.0
RULE = {"rules": [{"allow": r"/p/[0-9]+\.html$", "follow": True, "extract": {"title": "//h1"}}],
        "required": ["title"]}


def densest(times: list[float], window: float) -> list[float]:
    """The most hits within ``window`` of the first of them, as offsets from it (for the failure message)."""
    best: list[float] = []
    for n, start in enumerate(times):
        inside = [t for t in times[n:] if t - start < window]
        if len(inside) > len(best):
            best = inside
    return [round(t - best[0], 3) for t in best]


def test_no_window_holds_more_than_its_rate_robots_txt_included(fleet: Any, procs: Any, tmp_path: Path) -> None:
    site = paced_site(procs, tmp_path / "site", {host: "" for host in RATES}, fleet.env)
    site.serve_fleet(fleet)
    fleet.set_default_rate()
    zk, paths = fleet.cf.zk(), SitePaths(fleet.cf.settings.zk_root)
    for host, rate in RATES.items():
        update_site(zk, paths, host, lambda _, r=rate: SiteConfig(rate=r.hits, window=r.window))
    fleet.start(universal_workers=2)
    fleet.submit(*({"userid": "pace", "crawlid": host.split(".")[0], "spider_type": "universal",
                    "url": site.url(host), "rule": RULE} for host in RATES))
    wait_for(lambda: all(site.hits(host) for host in RATES), 60, "every host's first request")
    first = min(site.hits(host)[0] for host in RATES)
    time.sleep(max(0.0, first + SPAN - time.time()))  # the span observed: the slow rates' first window and more

    log = site.log()
    for host, rate in RATES.items():
        times = sorted(at for at, name, _ in log if name == host and at < first + SPAN)
        requested = [path for _, name, path in sorted(log) if name == host]
        assert requested[0] == "/robots.txt" and requested.count("/robots.txt") == 1, (host, requested[:5])
        busiest = max_in_window(times, rate.window)
        assert busiest <= rate.hits, f"{host} at {rate.describe()}: {densest(times, rate.window)}"
        assert busiest == rate.hits, f"{host}: the first window held {busiest} of {rate.hits} ({len(times)} hits)"
