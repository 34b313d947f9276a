"""``crawl_finished`` exactly once as a consumer of the topic sees it (issue 37, item 4): Kafka is paused (SIGSTOP)
for 30 s across a crawl's end — the master declares the crawl finished and sends its event while the broker holds
every request — and the outbound topic, read with a consumer afterwards, holds one event. Before the fix it held two:
the producer's own retry, and the master's second attempt after the first one timed out."""

from __future__ import annotations

import time
from typing import Any

import pytest

from deploy.demo_rules import DEMO_UNIVERSAL_RULE
from deploy.procs import wait_for
from messaging import keys
from messaging.tasks import CrawlFields
from tests.plugins.services import read_all

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

NEWS = "news.fleet.test"
PAUSE = 30.0


def outbound_events(settings: Any, seconds: float) -> list[dict[str, Any]]:
    """Every crawl_finished event on the outbound topic, read from the beginning for ``seconds``."""
    return [r for r in read_all(settings, settings.topic_outbound, seconds) if r.get("event") == "crawl_finished"]


def test_crawl_finished_once_across_a_kafka_pause(own_kafka: Any, fleet: Any) -> None:
    fleet.start(universal_workers=1)
    # a first crawl ends before the pause: the master's producer is connected and knows the topic
    fleet.submit({"userid": "ops", "crawlid": "before", "spider_type": "universal", "url": fleet.url(NEWS, "/"),
                  "rule": DEMO_UNIVERSAL_RULE, "max_pages": 1})
    fleet.wait_finished(["before"], 120)
    fleet.submit({"userid": "ops", "crawlid": "across", "spider_type": "universal", "url": fleet.url(NEWS, "/"),
                  "rule": DEMO_UNIVERSAL_RULE})
    crawl = keys.crawl("across")
    wait_for(lambda: int(fleet.redis.hget(crawl, CrawlFields.PAGES) or 0) >= 5, 120, "the crawl under way")
    own_kafka.pause()
    paused = time.monotonic()
    try:
        # the crawl ends while the broker is paused: declared finished, its event not acknowledged
        wait_for(lambda: fleet.redis.hmget(crawl, [CrawlFields.STATE, "finish_event"]) == [b"finished", b"pending"],
                 PAUSE - 5, "the crawl to end during the pause", interval=0.2)
        time.sleep(max(0.0, PAUSE - (time.monotonic() - paused)))  # the pause itself: nothing is waited for
    finally:
        own_kafka.resume()
    wait_for(lambda: fleet.redis.hget(crawl, "finish_event") == b"sent", 120, "the event sent after the pause")
    events = [e for e in outbound_events(fleet.cf.settings, 8) if e["crawlid"] == "across"]  # late copies: here now
    assert len(events) == 1, events
    assert events[0]["pages"] == int(fleet.redis.hget(crawl, CrawlFields.PAGES))
