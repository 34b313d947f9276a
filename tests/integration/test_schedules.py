"""Schedules on a real Redis: the store's checks and edits, and the leader's firings across a simulated failover.

The firings are driven with explicit times (the cron path is the real one; only the clock is injected), so minutes
of schedule take milliseconds; ``tests/e2e/test_schedules_fire.py`` runs it on the real clock with real masters.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from master.schedules import ScheduleFirer
from master.staging import LeadershipLost
from messaging import keys
from messaging.schedules import InvalidSchedule, ScheduleStore, crawl_id
from messaging.settings import load
from messaging.tasks import Task

pytestmark = pytest.mark.integration

REQUEST = {"url": "http://news.test/", "spider_type": "universal", "userid": "alice", "crawlid": "ignored",
           "rule": {"rules": [{"allow": "/a/", "extract": {"title": "//h1/text()"}}], "start": "url"}}


def seeds_of(redis: Any) -> list[Task]:
    return [Task.decode(member) for member in redis.zrange(keys.SEEDS, 0, -1)]


def firer(cf: Any, epoch: int, **env: str) -> ScheduleFirer:
    return ScheduleFirer(cf.redis(), epoch, load({**cf.env, **env}))


def test_the_store_checks_what_it_stores_and_edits_it(cf) -> None:
    redis = cf.redis()
    store = ScheduleStore(redis)
    bad = [("bad name!", "* * * * *", "UTC", REQUEST, "schedule name"),
           ("n", "61 * * * *", "UTC", REQUEST, "cron expression"),
           ("n", "* * * *", "UTC", REQUEST, "five fields"),
           ("n", "0 0 30 2 *", "UTC", REQUEST, "never comes due"),
           ("n", "* * * * *", "Mars/Olympus", REQUEST, "time zone"),
           ("n", "* * * * *", "UTC", {**REQUEST, "url": "ftp://x.test/"}, "$.url"),
           ("n", "* * * * *", "UTC", {"action": "info", "userid": "a", "crawlid": "c", "uuid": "u"}, "crawl request")]
    for name, cron, tz, request, reason in bad:
        with pytest.raises(InvalidSchedule, match=reason.replace("$", r"\$")):
            store.add(name, cron, tz, request, max_bytes=512 * 1024)
    assert store.all() == []
    added = store.add("nightly", "0 3 * * *", "Europe/Berlin", REQUEST, max_bytes=512 * 1024)
    assert "crawlid" not in added.request and added.tz == "Europe/Berlin"
    with pytest.raises(InvalidSchedule, match="exists"):
        store.add("nightly", "0 4 * * *", "UTC", REQUEST, max_bytes=512 * 1024)
    replaced = store.add("nightly", "0 4 * * *", "UTC", REQUEST, max_bytes=512 * 1024, replace=True)
    assert replaced.cron == "0 4 * * *" and replaced.created == added.created
    upcoming = replaced.to_json()["next"]
    assert upcoming["crawlid"] == crawl_id("nightly", upcoming["due"]) and upcoming["crawlid"].endswith("T040000Z")
    assert store.pause("nightly") and store.get("nightly").to_json()["state"] == "paused"
    assert store.get("nightly").to_json()["next"] is None
    assert store.resume("nightly") and store.get("nightly").paused is None
    assert store.remove("nightly") and store.get("nightly") is None and store.names() == []
    assert not store.pause("nightly") and not store.remove("nightly")


def test_each_due_time_fires_once_as_its_own_crawl_through_the_intake(cf) -> None:
    redis = cf.redis()
    store = ScheduleStore(redis)
    start = store.add("every-minute", "* * * * *", "UTC", REQUEST, max_bytes=512 * 1024).after
    redis.set(keys.MASTER_EPOCH, 1)
    leader = firer(cf, 1)
    first_due = (start // 60 + 1) * 60
    assert leader.round(first_due - 1) == []
    fired = leader.round(first_due + 0.5)
    assert [f.crawlid for f in fired] == [crawl_id("every-minute", first_due)]
    assert fired[0].outcome == "enqueued" and fired[0].late == 0.5
    assert leader.round(first_due + 30) == []  # nothing due: nothing fired again
    fired += leader.round(first_due + 60.2) + leader.round(first_due + 120.1)
    ids = [f.crawlid for f in fired]
    assert ids == [crawl_id("every-minute", first_due + 60 * n) for n in range(3)]
    assert sorted(t.crawlid for t in seeds_of(redis)) == sorted(ids)  # one start task per firing
    for crawlid in ids:  # stored as the Kafka monitor stores a crawl request
        crawl = {k.decode(): v.decode() for k, v in redis.hgetall(keys.crawl(crawlid)).items()}
        assert crawl["state"] == "running" and crawl["userid"] == "alice" and crawl["url"] == REQUEST["url"]
        assert json.loads(crawl["rule"]) == REQUEST["rule"] and crawl["enqueued"] == "1"
        assert redis.sismember(keys.CRAWLS, crawlid)
    shown = store.get("every-minute").to_json()
    assert shown["last"]["crawlid"] == ids[-1] and shown["next"]["crawlid"] == crawl_id("every-minute",
                                                                                          first_due + 180)
    assert [entry["crawlid"] for entry in store.history("every-minute")] == ids[::-1]


def test_a_new_leader_completes_a_begun_firing_once_and_a_stale_leader_is_fenced(cf) -> None:
    redis = cf.redis()
    store = ScheduleStore(redis)
    start = store.add("s", "* * * * *", "UTC", REQUEST, max_bytes=512 * 1024).after
    due = (start // 60 + 1) * 60
    redis.set(keys.MASTER_EPOCH, 1)
    old = firer(cf, 1)
    # the old leader begins the firing and submits the crawl, then dies before recording it
    assert old._begin(keys=[keys.MASTER_EPOCH, keys.schedule("s")], args=[1, repr(due), crawl_id("s", due)]) == 1
    assert old._submit(store.get("s"), due) == "enqueued"
    redis.set(keys.MASTER_EPOCH, 2)  # the election's next leader
    new = firer(cf, 2)
    fired = new.round(due + 8)  # the failover took 8 s
    assert [(f.crawlid, f.outcome) for f in fired] == [(crawl_id("s", due), "redelivered")]
    assert [t.crawlid for t in seeds_of(redis)] == [crawl_id("s", due)]  # pushed once
    assert store.get("s").last_late == 8.0 and store.get("s").pending is None
    with pytest.raises(LeadershipLost):  # the old leader wakes up: it can begin nothing
        old.round(due + 61)
    assert len(seeds_of(redis)) == 1
    assert [f.crawlid for f in new.round(due + 61)] == [crawl_id("s", due + 60)]


def test_missed_due_times_fire_late_within_the_grace_period_and_are_counted_beyond_it(cf) -> None:
    redis = cf.redis()
    store = ScheduleStore(redis)
    start = store.add("s", "* * * * *", "UTC", REQUEST, max_bytes=512 * 1024).after
    first = (start // 60 + 1) * 60
    redis.set(keys.MASTER_EPOCH, 1)
    leader = firer(cf, 1, CRAWLFLEET_SCHEDULE_GRACE="150")
    now = first + 9 * 60 + 1  # ten due times passed without a leader; the last three are within the grace
    fired = leader.round(now)
    assert [f.due for f in fired] == [first + 7 * 60, first + 8 * 60, first + 9 * 60]
    assert [round(f.late) for f in fired] == [121, 61, 1]
    found = store.get("s")
    assert found.missed == 7 and found.last_missed == first + 6 * 60
    assert store.history("s")[-1]["skipped"] == 7
    assert leader.round(now + 1) == []


def test_a_paused_schedule_skips_its_times_without_counting_them_missed(cf) -> None:
    redis = cf.redis()
    store = ScheduleStore(redis)
    start = store.add("s", "* * * * *", "UTC", REQUEST, max_bytes=512 * 1024).after
    redis.set(keys.MASTER_EPOCH, 1)
    leader = firer(cf, 1)
    store.pause("s")
    assert leader.round(start + 300) == []
    store.resume("s")  # from now (the Redis clock): the five minutes passed do not fire
    resumed = store.get("s").after
    assert resumed >= start and leader.round(resumed) == [] and store.get("s").missed == 0
