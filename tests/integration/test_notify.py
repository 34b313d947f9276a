"""Crawl-event webhooks on a real Redis and a real HTTP receiver: once per event, signed, retried with back-off, the
state in Redis (a new leader neither resends a delivered event nor drops a pending one), stalls once per stall.

Times are explicit (counted from the Redis clock), so back-offs and stall periods take no wall-clock time; the whole
path on real processes is tests/e2e/test_alerts.py."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from master.notifier import Notifier
from master.stalls import StallWatch
from messaging import keys
from messaging.clock import RedisClock
from messaging.notify import Outbox
from messaging.settings import load
from messaging.tasks import CrawlFields, CrawlState, Task, push_seeds
from tests.plugins.receiver import Receiver

pytestmark = pytest.mark.integration
SECRET = "test-secret-0123"


@pytest.fixture
def receiver():
    found = Receiver()
    try:
        yield found
    finally:
        found.close()


def notifier(cf: Any, **env: str) -> Notifier:
    settings = load({**cf.env, "CRAWLFLEET_NOTIFY_SECRET": SECRET, "CRAWLFLEET_NOTIFY_BACKOFF": "1",
                     "CRAWLFLEET_NOTIFY_TIMEOUT": "5", **env})
    redis = cf.redis()
    return Notifier(redis, settings, RedisClock(redis))


def finished(crawlid: str, at: float, items: int = 3) -> dict[str, Any]:
    return {"event": "crawl_finished", "event_id": f"{crawlid}@{at!r}", "crawlid": crawlid, "userid": "u",
            "spider_type": "list", "pages": 4, "items": items, "restored": 0, "failures": {}, "start_failure": None,
            "finished": at, "duration": 2.0}


def start_crawl(redis: Any, crawlid: str, notify: dict[str, Any] | None) -> None:
    fields = {CrawlFields.STATE: CrawlState.RUNNING, CrawlFields.USERID: "u"}
    if notify is not None:
        fields[CrawlFields.NOTIFY] = json.dumps(notify)
    redis.hset(keys.crawl(crawlid), mapping=fields)
    redis.sadd(keys.CRAWLS, crawlid)


def test_a_finished_crawl_is_delivered_once_signed_after_a_500_and_never_again(cf, receiver, caplog) -> None:
    caplog.set_level(logging.INFO)
    redis = cf.redis()
    token_url = receiver.url("/hook?token=SECRET-TOKEN-42")
    receiver.answer = lambda event, seen: 500 if seen == 0 else 200
    start_crawl(redis, "c1", {"url": token_url, "on": ["finished", "empty", "failed"]})
    leader = notifier(cf)
    at = RedisClock(redis).now()
    leader.crawl_finished(finished("c1", at))
    t0 = RedisClock(redis).now()  # steps from after the enqueue
    assert leader.step(t0) == 1 and [d.status for d in receiver.received] == [500]
    assert leader.step(t0 + 0.5) == 0  # the back-off: due again after 1 s
    assert leader.step(t0 + 1.5) == 1 and [d.status for d in receiver.received] == [500, 200]
    leader.crawl_finished(finished("c1", at))  # the finisher announced it again (a crash before marking it sent)
    successor = notifier(cf)  # a new leader, with the state in Redis only
    successor.crawl_finished(finished("c1", at))
    assert leader.step(t0 + 100) == 0 and successor.step(t0 + 100) == 0
    first, second = receiver.received
    assert first.path == second.path == "/hook?token=SECRET-TOKEN-42"
    assert second.signed_by(SECRET) and first.signed_by(SECRET) and not second.signed_by("another-secret")
    assert second.event["id"] == first.event["id"] == f"finished:c1@{at!r}"
    assert (first.event["attempt"], second.event["attempt"]) == (1, 2)
    assert second.event["pages"] == 4 and second.event["crawlid"] == "c1"
    assert receiver.kinds("c1") == {"finished": 1}
    assert Outbox(redis, 60).get(second.event["id"])["state"] == "delivered"
    assert not redis.zcard(keys.NOTIFY_DUE)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "delivered to http://127.0.0.1" in logged and "SECRET-TOKEN-42" not in logged and SECRET not in logged


def test_a_pending_event_held_by_a_dead_leader_is_sent_once_its_claim_expires(cf, receiver) -> None:
    redis = cf.redis()
    start_crawl(redis, "c2", {"url": receiver.url()})
    old, new = notifier(cf), notifier(cf)
    t0 = RedisClock(redis).now()
    old.crawl_finished(finished("c2", t0, items=0))  # finished and empty
    event_id = f"finished:c2@{t0!r}"
    t0 = RedisClock(redis).now()
    assert old.outbox.claim(event_id, t0 + 25, t0) is not None  # the old leader claimed it, then died mid-post
    assert new.step(t0 + 1) == 1  # only the empty event: the finished one is held by the claim
    assert new.step(t0 + 30) == 1  # the claim expired: the new leader sends it
    assert new.step(t0 + 60) == 0
    assert receiver.kinds("c2") == {"finished": 1, "empty": 1} and len(receiver.received) == 2


def test_a_refusing_receiver_and_a_failing_one_are_given_up(cf, receiver, caplog) -> None:
    redis = cf.redis()
    receiver.answer = lambda event, seen: 404 if event["crawlid"] == "refused" else 503
    for crawlid in ("refused", "down"):
        start_crawl(redis, crawlid, {"url": receiver.url(), "on": ["finished"]})
    leader = notifier(cf, CRAWLFLEET_NOTIFY_ATTEMPTS="3")
    t0 = RedisClock(redis).now()
    leader.crawl_finished(finished("refused", t0))
    leader.crawl_finished(finished("down", t0))
    at, t0 = t0, RedisClock(redis).now()
    for step in range(10):
        leader.step(t0 + step * 10)
    statuses = [(d.event["crawlid"], d.status) for d in receiver.received]
    assert statuses.count(("refused", 404)) == 1 and statuses.count(("down", 503)) == 3
    outbox = Outbox(redis, 60)
    assert outbox.get(f"finished:refused@{at!r}")["state"] == outbox.get(f"finished:down@{at!r}")["state"] == "failed"
    assert "given up: the receiver refused it" in caplog.text and "given up: 3 attempts failed" in caplog.text


def test_the_fleet_default_receiver_and_the_events_a_crawl_asked_for(cf, receiver) -> None:
    redis = cf.redis()
    start_crawl(redis, "default", None)
    start_crawl(redis, "picky", {"url": receiver.url("/picky"), "on": ["failed"]})
    leader = notifier(cf, CRAWLFLEET_NOTIFY_URL=receiver.url("/default"), CRAWLFLEET_NOTIFY_ON="finished")
    t0 = RedisClock(redis).now()
    leader.crawl_finished(finished("default", t0, items=0))  # finished and empty: the default wants finished only
    leader.crawl_finished({**finished("picky", t0, items=0), "start_failure": "HTTP 404"})
    leader.step(RedisClock(redis).now())
    assert sorted((d.path, d.event["event"]) for d in receiver.received) == [("/default", "finished"),
                                                                             ("/picky", "failed")]


def test_a_stall_raises_one_event_per_stall_across_leaders(cf) -> None:
    redis = cf.redis()
    events: list[tuple[str, dict[str, Any]]] = []

    def emit(crawlid: str, notify: str, payloads: list[dict[str, Any]]) -> None:
        events.extend((crawlid, payload) for payload in payloads)

    start_crawl(redis, "slow", None)
    push_seeds(redis, [Task(url="http://slow.test/", crawlid="slow", spider_type="list")])  # work, never taken
    start_crawl(redis, "revisiting", None)  # between revisits: nothing to do, never stalled
    redis.sadd(keys.REVISIT_CRAWLS, "revisiting")
    t0 = RedisClock(redis).now()
    watch = StallWatch(redis, 10, emit)
    assert watch.check(t0) == [] and watch.check(t0 + 5) == []
    assert watch.check(t0 + 11) == ["slow"]
    assert StallWatch(redis, 10, emit).check(t0 + 30) == []  # a new leader: the same stall, announced already
    redis.hincrby(keys.crawl_totals("slow"), "pages", 1)  # progress: the next stall is a new one
    assert watch.check(t0 + 31) == [] and watch.check(t0 + 40) == []
    assert watch.check(t0 + 42) == ["slow"]
    assert [(c, p["event"], p["since"]) for c, p in events] == [("slow", "stalled", t0), ("slow", "stalled", t0 + 31)]
    assert events[0][1]["id"] != events[1][1]["id"] and events[0][1]["stalled_for"] == 11.0
    redis.hset(keys.crawl("slow"), CrawlFields.STATE, CrawlState.FINISHED)
    watch.check(t0 + 50)
    assert not redis.hexists(keys.NOTIFY_PROGRESS, "slow")
