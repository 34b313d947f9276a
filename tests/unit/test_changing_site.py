"""The changing demo site's model (deploy.demoweb.changing.ChangingSite): deterministic Poisson changes on a
compressed clock, validators by page, 304 by RFC 9110's rules, a list that grows, and the site's own counts."""

from __future__ import annotations

import pytest

from deploy.demoweb.changing import DATE_ONLY, ETAG_AND_DATE, NO_VALIDATORS, RATES, ChangingSite

pytestmark = pytest.mark.unit


def site_at(seconds: list[float], seed: str = "s") -> ChangingSite:
    return ChangingSite(seed=seed, scale=120.0, initial=12, publish_every=1200.0, clock=lambda: seconds[0])


def test_changes_are_a_function_of_the_seed_and_the_rate() -> None:
    a, b, other = site_at([0.0]), site_at([0.0]), site_at([0.0], seed="t")
    horizon = 200 * 3600.0  # 200 site hours
    assert a.page(0, horizon).changes == b.page(0, horizon).changes != other.page(0, horizon).changes
    fast = [t for t in a.page(0, horizon).changes if t <= horizon]
    assert 600 < len(fast) < 1000  # 4 a site hour
    for number, rate in enumerate(RATES):
        assert a.page(number, horizon).rate == rate
    assert a.page(3, horizon).changes == []  # never changes


def test_validators_and_conditional_answers() -> None:
    clock = [0.0]
    site = site_at(clock)
    kinds = {n: site.page(n, 0.0).validators for n in range(3)}
    assert kinds == {0: ETAG_AND_DATE, 1: DATE_ONLY, 2: NO_VALIDATORS}
    status, headers, _ = site.answer("/a/3.html", {})  # 3 % 3 == 0: ETag and Last-Modified, never changes
    headers = dict(headers)
    assert status == 200 and {"ETag", "Last-Modified"} <= set(headers)
    clock[0] = 50.0
    assert site.answer("/a/3.html", {"if-none-match": headers["ETag"]})[0] == 304
    # If-None-Match decides when sent: a wrong one means a full answer even with a matching date
    assert site.answer("/a/3.html", {"if-none-match": '"x"', "if-modified-since": headers["Last-Modified"]})[0] == 200
    status, headers, _ = site.answer("/a/4.html", {})  # Last-Modified only
    assert "ETag" not in dict(headers)
    assert site.answer("/a/4.html", {"if-modified-since": dict(headers)["Last-Modified"]})[0] == 304
    assert site.answer("/a/5.html", {"if-modified-since": "Thu, 01 Jan 2099 00:00:00 GMT"})[0] == 200  # none
    counts = site.counts
    assert counts["304"] == 2 and counts["unchanged_revisits"] == 3 and counts["unchanged_304"] == 2


def test_the_list_grows_and_unknown_articles_are_404() -> None:
    clock = [0.0]
    site = site_at(clock)
    assert site.answer("/a/12.html", {})[0] == 404
    clock[0] = 10.0  # 1200 site seconds: one new article
    assert site.answer("/a/12.html", {})[0] == 200
    assert b'href="/a/12.html"' in site.answer("/", {})[2]
    state = site.state(site.now())
    assert state["pages"]["/a/12.html"]["published"] == 1200.0 and len(state["list_fetches"]) == 1
