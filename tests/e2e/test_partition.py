"""Queue partition by host, domain or IP, and a host whose robots.txt is unreachable (issue 37, item 2), as the
site's access log shows it.

Three pairs of hosts, each of one registered domain — ``ok`` and ``bad``, whose robots.txt answers 500 — are
crawled by two workers, each pair in a partition of its own (the crawls' rule field ``partition``): by host
(example.org), by registered domain (example.net: both hosts in one queue and one pace) and by IP (example.com:
both hosts on one loopback address of their own, 127.37.0.3, so one queue again). The bad hosts' start pages wait
at the head of those queues, and whatever the partition only their own URLs are held back: each ok crawl is fetched
at its site's pace and finishes before the bad host's robots.txt is even asked again (the first retry of an
unreachable robots.txt comes 15 s after it), while nothing but robots.txt is ever asked of a bad host. Counted in
the site's access log: no durations are measured."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.throttle import max_in_window
from messaging import keys
from messaging.siteconfig import Rate
from tests.plugins.paced_site import paced_site

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

RATE = Rate(5, 1)
PAGES = 15
PAIRS = {"host": "example.org", "domain": "example.net", "ip": "example.com"}
IP_ADDRESS = "127.37.0.3"
RULE = {"rules": [{"allow": r"/p/[0-9]+\.html$", "follow": True, "extract": {"title": "//h1"}}],
        "required": ["title"]}


def test_an_unreachable_robots_txt_holds_back_only_its_hosts_urls_in_every_partition(fleet: Any, procs: Any,
                                                                                     tmp_path: Path) -> None:
    hosts = {f"{kind}.{domain}": IP_ADDRESS if mode == "ip" else "" for mode, domain in PAIRS.items()
             for kind in ("bad", "ok")}
    site = paced_site(procs, tmp_path / "site", hosts, fleet.env,
                      robots_status={f"bad.{domain}": 500 for domain in PAIRS.values()})
    site.serve_fleet(fleet)
    fleet.start(universal_workers=2, rate=RATE)
    # the bad hosts first: their start pages are at the head of the shared queues when the ok pages land
    fleet.submit(*({"userid": "part", "crawlid": f"bad-{mode}", "spider_type": "universal",
                    "url": site.url(f"bad.{domain}"), "rule": {**RULE, "partition": mode}}
                   for mode, domain in PAIRS.items()))
    fleet.submit(*({"userid": "part", "crawlid": f"ok-{mode}", "spider_type": "universal", "max_pages": PAGES,
                    "url": site.url(f"ok.{domain}"), "rule": {**RULE, "partition": mode}}
                   for mode, domain in PAIRS.items()))
    events = fleet.wait_finished([f"ok-{mode}" for mode in PAIRS], 180)

    queued = {mode: [key for key in fleet.redis.smembers(keys.crawl_domains(f"ok-{mode}"))] for mode in PAIRS}
    assert queued == {"host": [b"ok.example.org"], "domain": [b"example.net"], "ip": [IP_ADDRESS.encode()]}
    log = site.log()
    for mode, domain in PAIRS.items():
        assert events[f"ok-{mode}"]["pages"] >= PAGES, (mode, events[f"ok-{mode}"])
        asked = {path for _, host, path in log if host == f"bad.{domain}"}
        assert asked == {"/robots.txt"}, (mode, asked)
        assert fleet.redis.hget(keys.crawl(f"bad-{mode}"), "pages") in (None, b"0")
        pages = sorted(at for at, host, path in log if host == f"ok.{domain}" and path != "/robots.txt")
        robots = sorted(at for at, host, path in log if host == f"bad.{domain}" and path == "/robots.txt")
        # the ok host never waited for its sibling's robots.txt: every one of its pages came before the bad host's
        # robots.txt was asked again (its first retry comes 15 s after the 500)
        assert robots and pages, (mode, robots, pages)
        retried = robots[1] if len(robots) > 1 else float("inf")
        assert pages[-1] < retried, (mode, f"{sum(at > retried for at in pages)} of {len(pages)} pages came after")
        shared = sorted(at for at, host, _ in log if host in (f"ok.{domain}", f"bad.{domain}"))
        # and never more than the rate in any second: on the key both hosts share (domain, ip), or the host's own
        assert max_in_window(shared if mode != "host" else pages, RATE.window) <= RATE.hits, mode
