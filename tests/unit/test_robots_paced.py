"""A robots.txt download is a paced hit (issue 37, item 6; spiders.worker.robots): it goes out at the slot reserved
in the pass that claimed it, past the scheduler; a slot beyond the horizon is asked for again nearer the time, a
missed one (the reactor was busy) and one a block overtook are withdrawn and reserved again. Time is a Twisted
``task.Clock`` that only the test moves."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy import Spider
from scrapy.utils.test import get_crawler
from twisted.internet.task import Clock

from frontier.client import SendSlot
from spiders.worker.robots import RobotsFetcher, RobotsHit

pytestmark = pytest.mark.unit
URL, SITE = "http://a.site.test/page", "site.test"


class NoRedis:
    def register_script(self, source: str) -> object:
        return object()


class Time:
    def __init__(self, reactor: Clock) -> None:
        self.reactor = reactor

    def now(self) -> float:
        return self.reactor.seconds()


@pytest.fixture
def reactor() -> Clock:
    clock = Clock()
    clock.advance(1_000.0)
    return clock


@pytest.fixture
def fetcher(reactor: Clock) -> Any:
    fetcher = RobotsFetcher(get_crawler(Spider), NoRedis(), Time(reactor))  # type: ignore[arg-type]
    fetcher.call_later = reactor.callLater
    fetcher.fetched_urls, fetcher.asked = [], []  # type: ignore[attr-defined]
    fetcher.fetch = lambda url, proxy=None: fetcher.fetched_urls.append(url)  # type: ignore[attr-defined,method-assign]
    fetcher.ask_slot = lambda hit, domain, withdrawn: fetcher.asked.append((hit, domain, withdrawn))
    fetcher.cache.claims.add(URL)  # this process claimed the fetch
    return fetcher


def test_it_goes_out_at_its_slot_not_before(fetcher: Any, reactor: Clock) -> None:
    fetcher._slotted(RobotsHit(URL, SITE), SendSlot(SITE, 1_000.3, 0.2, "h1"))
    reactor.advance(0.29)
    assert fetcher.fetched_urls == []
    reactor.advance(0.01)
    assert fetcher.fetched_urls == [URL] and fetcher.asked == []
    assert fetcher.crawler.stats.get_value("fleet/robots/paced") == 1


def test_a_missed_slot_and_a_block_are_withdrawn_and_reserved_again(fetcher: Any, reactor: Clock) -> None:
    hit = RobotsHit(URL, SITE)
    fetcher._at_slot(hit, SendSlot(SITE, 999.8, 0.2, "late"))  # the reactor came back 0.2 s after the slot
    assert fetcher.fetched_urls == [] and fetcher.asked == [(hit, SITE, "late")]
    fetcher.blocked_until = lambda domain: 1_030.0 if domain == SITE else 0.0  # a 429 of the site meanwhile
    fetcher._at_slot(hit, SendSlot(SITE, 1_000.0, 0.2, "blocked"))
    reactor.advance(29.9)
    assert len(fetcher.asked) == 1
    reactor.advance(0.1)
    assert fetcher.asked[-1] == (hit, SITE, "blocked") and fetcher.fetched_urls == []


def test_a_slot_beyond_the_horizon_is_asked_for_again_nearer_the_time(fetcher: Any, reactor: Clock) -> None:
    hit = RobotsHit(URL, SITE)
    fetcher._slotted(hit, SendSlot(SITE, 1_000.5 + fetcher.horizon, 0.2, ""))  # not recorded
    reactor.advance(0.49)
    assert fetcher.asked == []
    reactor.advance(0.01)
    assert fetcher.asked == [(hit, SITE, "")]
    fetcher.reserved(hit, SendSlot(SITE, 1_000.6, 0.2, "h2"))  # the feed's answer
    reactor.advance(0.1)
    assert fetcher.fetched_urls == [URL]


def test_a_claim_given_up_while_waiting_is_not_fetched(fetcher: Any, reactor: Clock) -> None:
    fetcher._slotted(RobotsHit(URL, SITE), SendSlot(SITE, 1_000.3, 0.2, "h1"))
    fetcher.cache.claims.discard(URL)  # the claim outlived any fetch, or was released: another may claim it
    reactor.advance(1.0)
    assert fetcher.fetched_urls == [] and fetcher.asked == []
