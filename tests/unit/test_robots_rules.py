"""robots.txt as RFC 9309 means it: product-token groups, the 500 KiB cap, statuses; the claims' renewal on
simulated time."""

from __future__ import annotations

import pytest

from frontier.robots_cache import Claims
from frontier.robots_rules import (
    MAX_BODY,
    MISSING,
    OK,
    UNREACHABLE,
    BadProductToken,
    RobotsRules,
    cap_body,
    product_token,
    status_kind,
)

pytestmark = pytest.mark.unit

URL = "http://example.test/page"


class SimClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.t = now

    def now(self) -> float:
        return self.t


def test_the_group_of_the_product_token_wins_over_star_case_insensitively() -> None:
    rules = RobotsRules("User-agent: *\nDisallow: /\n\nUser-Agent: CrawlFleet\nDisallow: /private/\n")
    assert rules.allowed(URL, "crawlfleet") and not rules.allowed("http://example.test/private/x", "crawlfleet")
    assert rules.allowed(URL, "CRAWLFLEET")
    assert not rules.allowed(URL, "otherbot")  # the * group


def test_a_group_named_by_a_prefix_of_the_token_is_not_ours() -> None:
    # protego alone would take "crawl" for "crawlfleet" (and a browser's whole User-Agent for "mozilla")
    rules = RobotsRules("User-agent: crawl\nDisallow: /\n\nUser-agent: mozilla\nDisallow: /\n")
    assert rules.allowed(URL, "crawlfleet")
    assert rules.allowed(URL, "Mozilla/5.0 (compatible; crawlfleet/1.0)") is False  # token of that value: mozilla


def test_groups_of_the_token_are_combined_and_versions_ignored() -> None:
    body = ("User-agent: crawlfleet/2.0\nDisallow: /a/\n\nUser-agent: *\nDisallow: /\n\n"
            "User-agent: otherbot\nUser-agent: crawlfleet\nDisallow: /b/\nCrawl-delay: 3\n")
    rules = RobotsRules(body)
    assert not rules.allowed("http://example.test/a/1", "crawlfleet")
    assert not rules.allowed("http://example.test/b/1", "crawlfleet")
    assert rules.allowed("http://example.test/c/1", "crawlfleet")
    assert rules.crawl_delay("crawlfleet") == 3.0


def test_no_matching_group_allows_everything_and_longest_match_decides() -> None:
    assert RobotsRules("User-agent: otherbot\nDisallow: /\n").allowed(URL, "crawlfleet")
    rules = RobotsRules("# hi\nDisallow: /\nUser-agent: *\nDisallow: /p\nAllow: /page$\n")  # first rule: no group
    assert rules.allowed(URL, "crawlfleet") and not rules.allowed("http://example.test/pages", "crawlfleet")
    assert RobotsRules("").allowed(URL, "crawlfleet")


def test_product_token_setting() -> None:
    assert product_token("crawlfleet") == "crawlfleet"
    assert product_token(" CrawlFleet/1.2 ") == "crawlfleet"
    for bad in ("", "Mozilla/5.0 (X11; Linux x86_64)", "crawl fleet", "bot2"):
        with pytest.raises(BadProductToken, match="product token"):
            product_token(bad)


def test_statuses() -> None:
    assert [status_kind(s) for s in (200, 204, 301, 401, 403, 404, 410)] == [OK, OK] + [MISSING] * 5
    assert [status_kind(s) for s in (429, 500, 503, 504)] == [UNREACHABLE] * 4


def test_the_cap_keeps_500_kib_and_ends_at_a_whole_line() -> None:
    line = b"Disallow: /private-directory-of-some-length/\n"
    data = b"User-agent: *\n" + line * (MAX_BODY // len(line) + 100)
    text = cap_body(data)
    assert len(text.encode()) <= MAX_BODY and text.endswith("/\n")
    assert cap_body(b"\xef\xbb\xbfUser-agent: *\n") == "User-agent: *\n"  # no BOM
    rules = RobotsRules(text + "Disallow: /x\n")
    assert not rules.allowed("http://example.test/private-directory-of-some-length/1", "crawlfleet")


def test_a_claim_is_renewed_every_third_of_its_ttl_while_its_fetch_may_run() -> None:
    clock = SimClock()
    claims = Claims(lock_seconds=30.0, fetch_seconds=200.0, clock=clock)
    claims.add("http://a.test/")
    assert claims.due() == ([], [])
    clock.t += 9.9
    assert claims.due() == ([], [])
    clock.t += 0.1  # a third of 30 s
    assert claims.due() == (["http://a.test/"], [])
    assert claims.due() == ([], [])  # renewed now: not due again at once
    renewals = 1
    while clock.t < 1000.0 + 200.0:  # a robots.txt that never answers: renewed all along its fetch
        clock.t += 1.0
        renew, lost = claims.due()
        renewals += len(renew)
        assert not lost
    assert renewals == 20  # every 10 s for 200 s: the claim never lapsed (TTL 30 s)
    clock.t += 1.0
    assert claims.due() == ([], ["http://a.test/"])  # longer than any fetch: the claim is left to expire
    assert len(claims) == 0


def test_a_finished_fetch_is_no_longer_renewed() -> None:
    clock = SimClock()
    claims = Claims(lock_seconds=3.0, fetch_seconds=60.0, clock=clock)
    claims.add("http://a.test/")
    claims.add("http://b.test/")
    clock.t += 1.0
    assert claims.due() == (["http://a.test/", "http://b.test/"], [])
    claims.discard("http://a.test/")
    clock.t += 1.0
    assert claims.due() == (["http://b.test/"], [])
