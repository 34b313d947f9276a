"""robots.txt (RFC 9309), meta robots, X-Robots-Tag and rel=nofollow, end to end on the demo web's robots hosts
(``deploy.demoweb.robotsweb``): judged by what the hosts answered when (their own records) and what MongoDB holds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deploy.demoweb.robotsweb import MEMBERS, META_NEVER_FETCHED, META_PAGES, PLAIN_PAGES, robots_hosts
from deploy.demoweb.router import STATS_PATH
from deploy.demoweb.runner import fetch
from deploy.procs import wait_for
from messaging.stats import Stats

pytestmark = pytest.mark.e2e

CRAWL_TIMEOUT = 180
FOLLOW_ALL = {"rules": [{"follow": True, "extract": {"title": "//h1"}}], "required": ["title"]}
HOSTS = {host.kind: host.name for host in robots_hosts()}


def answers(fleet: Any, kind: str) -> list[tuple[float, str, int]]:
    """What a robots host answered so far: (server time, path, status), in order."""
    name = HOSTS[kind]
    _, _, body = fetch(fleet.demoweb["sites"][name], fleet.demoweb["port"], name, STATS_PATH)
    return [tuple(answer) for answer in json.loads(body).get(name, {}).get("answers", [])]


def paths(fleet: Any, kind: str, since: int = 0) -> list[str]:
    return [path for _, path, _ in answers(fleet, kind)[since:]]


def stored(fleet: Any, crawlid: str) -> dict[str, dict[str, Any]]:
    return {item["url"]: item for item in fleet.items(crawlid)}


def crawl(kind: str, crawlid: str, fleet: Any, path: str = "/") -> dict[str, Any]:
    return {"userid": "robots", "crawlid": crawlid, "spider_type": "universal",
            "url": fleet.url(HOSTS[kind], path), "rule": FOLLOW_ALL}


def test_robots_txt_and_robots_meta_as_site_owners_mean_them(fleet: Any) -> None:
    before = {kind: len(answers(fleet, kind)) for kind in HOSTS}
    fleet.env["CRAWLFLEET_ROBOTS_ERROR_TTL"] = "1"  # an unreachable robots.txt is asked again every second
    fleet.start(universal_workers=2)
    crawls = {"moved": "robots-moved", "away": "robots-away", "down": "robots-down", "groups": "robots-groups",
              "meta": "robots-meta", "huge": "robots-huge", "loop": "robots-loop"}
    fleet.submit(*(crawl(kind, crawlid, fleet) for kind, crawlid in crawls.items()))
    events = fleet.wait_finished(list(crawls.values()), CRAWL_TIMEOUT)

    # A robots.txt that redirects (on the host, or three hops across hosts) to "Disallow: /": no page fetched.
    assert paths(fleet, "moved", before["moved"]) == ["/robots.txt", "/policies/robots.txt"]
    assert paths(fleet, "away", before["away"]) == ["/robots.txt", "/policies/moved"]
    assert paths(fleet, "files", before["files"]) == ["/hop", "/away.txt"]
    assert stored(fleet, "robots-moved") == {} and stored(fleet, "robots-away") == {}
    # ... and their start URLs completed unfetched, with the reason counted for the cluster (flushed every second)
    disallowed = Stats(fleet.redis, "politeness")
    wait_for(lambda: disallowed.value("robots_disallowed", "lifetime") >= 2, 10, "2 robots_disallowed counted")

    # A 503 robots.txt: nothing of the host until it answers, then the whole crawl (robots.txt permitting).
    down = answers(fleet, "down")[before["down"]:]
    robots = [(at, status) for at, path, status in down if path == "/robots.txt"]
    recovered = next(at for at, status in robots if status == 200)
    assert [status for _, status in robots if status != 200] and all(s == 503 for at, s in robots if at < recovered)
    pages = [(at, path) for at, path, _ in down if path != "/robots.txt"]
    assert pages and all(at >= recovered for at, _ in pages), f"fetched before robots.txt recovered: {pages}"
    assert sum(status == 200 for _, status in robots) == 1  # once known, not asked again
    expected = {"/"} | {f"/pages/{n}.html" for n in range(PLAIN_PAGES)}
    assert {path for _, path in pages} == expected  # never /private/
    assert {url.split(":", 2)[2].split("/", 1)[1] for url in stored(fleet, "robots-down")} == \
        {path.lstrip("/") for path in expected}

    # Groups: ours (CrawlFleet, case-insensitively) over "*" and over "crawl" (a prefix of our token).
    fetched = paths(fleet, "groups", before["groups"])
    assert fetched.count("/robots.txt") == 1
    assert set(fetched) - {"/robots.txt"} == expected, fetched
    assert len(stored(fleet, "robots-groups")) == len(expected)

    # A robots.txt of 700 KiB: what is past 500 KiB ("Disallow: /") is ignored, the rest obeyed.
    fetched = paths(fleet, "huge", before["huge"])
    assert fetched.count("/robots.txt") == 1 and set(fetched) - {"/robots.txt"} == expected, fetched
    # More than five redirects: unavailable, so everything is allowed; the sixth is never asked for.
    fetched = paths(fleet, "loop", before["loop"])
    assert fetched[:6] == ["/robots.txt"] + [f"/r/{hop}" for hop in range(1, 6)], fetched
    assert set(fetched[6:]) == {"/"} | {f"/pages/{n}.html" for n in range(PLAIN_PAGES)}, fetched

    # Meta robots, X-Robots-Tag, rel=nofollow.
    fetched = set(paths(fleet, "meta", before["meta"]))
    assert not fetched & set(META_NEVER_FETCHED), fetched & set(META_NEVER_FETCHED)
    items = stored(fleet, "robots-meta")
    stored_paths = {url.split(HOSTS["meta"], 1)[1].split("/", 1)[1] for url in items}
    want = {path.lstrip("/") for path in expected} | {path.lstrip("/") for path, page in META_PAGES.items()
                                                      if page[3]}
    assert stored_paths == want
    fetched_not_stored = {path for path, page in META_PAGES.items() if not page[3]} - set(META_NEVER_FETCHED)
    assert fetched_not_stored <= fetched  # fetched (their links followed when allowed), just not stored
    noarchive = next(item for url, item in items.items() if url.endswith("/meta/noarchive.html"))
    assert noarchive["robots_meta"] == ["noarchive"]
    noindex = sum(not page[3] for path, page in META_PAGES.items() if path not in META_NEVER_FETCHED)
    counters = Stats(fleet.redis, "crawler")
    wait_for(lambda: counters.value("robots_noindex", "lifetime") >= noindex, 10, f"{noindex} noindex pages counted")

    # Each crawl's exact counts (crawl_finished, the info answer, the crawl page's breakdown): the tasks robots.txt
    # disallows with reason "robots" (the start URL's, or the /private/ and /members/ links), the pages noindex
    # kept out with reason "noindex", nothing else
    assert {crawlid: events[crawlid]["failures"] for crawlid in crawls.values()} == {
        "robots-moved": {"robots": 1}, "robots-away": {"robots": 1}, "robots-down": {"robots": MEMBERS},
        "robots-groups": {"robots": MEMBERS}, "robots-huge": {"robots": MEMBERS}, "robots-loop": {},
        "robots-meta": {"noindex": noindex}}
    assert events["robots-moved"]["start_failure"] == "robots" and events["robots-meta"]["start_failure"] is None


def test_a_slow_robots_txt_is_fetched_once_by_every_worker_together(fleet: Any) -> None:
    before = len(answers(fleet, "slow"))
    # The claim's TTL (1 s) is much shorter than the robots.txt takes to answer (3 s): only its renewal keeps the
    # other worker from fetching it too.
    fleet.env["CRAWLFLEET_ROBOTS_LOCK_SECONDS"] = "1"
    fleet.start(universal_workers=2)
    starts = [crawl("slow", f"robots-slow-{n}", fleet, f"/pages/{n}.html") for n in range(PLAIN_PAGES)]
    fleet.submit(*starts)  # start URLs of one host in several crawls: both workers need its robots.txt at once
    fleet.wait_finished([request["crawlid"] for request in starts], CRAWL_TIMEOUT)
    fetched = paths(fleet, "slow", before)
    assert fetched.count("/robots.txt") == 1, fetched
    assert not [path for path in fetched if path.startswith("/private/")]
