"""A store that refuses writes (issue 40): the worker's report of it, its reason and kind, and a crawl stalled by it
or by anything else, in words (pure logic and simulated time; the e2e tests run it against a real SecantusDB)."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo.errors import AutoReconnect, BulkWriteError, OperationFailure, ServerSelectionTimeoutError
from twisted.internet.task import Clock

from messaging import storage
from messaging.settings import load
from messaging.stalls import UNKNOWN, crawl_stall
from messaging.waits import describe
from spiders.pipelines.mongo import MongoPipeline, MongoWriter, store_error
from spiders.signals import storage_state
from tests.unit.test_pipelines import FakeCollection, FakeDatabase, ManualThread, _pending

pytestmark = pytest.mark.unit

CACHE_FULL = OperationFailure("internal server error", 1, {"ok": 0, "errmsg": "internal server error", "code": 1,
                                                           "codeName": "InternalError"})


def test_a_store_refusing_writes_is_reported_after_a_few_seconds_with_its_items_by_crawl_then_cleared():
    sent: list[Any] = []

    class Signals:
        def send_catch_log(self, signal: Any, **kwargs: Any) -> None:
            if signal is storage_state:
                sent.append(kwargs["state"])

    db = FakeDatabase()
    db["c1"] = FakeCollection(fail=CACHE_FULL)
    clock, thread = Clock(), ManualThread()
    clock.advance(1_800_000_000)  # the reactor's clock is the epoch
    settings = load({"CRAWLFLEET_MONGO_BATCH": "2", "CRAWLFLEET_MONGO_DB": "items"})
    pipeline = MongoPipeline(settings, signals=Signals(), clock=clock, run_in_thread=thread,
                             client_factory=lambda s: {"items": db})
    pipeline.open_spider()
    for n in range(3):
        pipeline.store({"url": f"http://a.test/{n}", "crawlid": "c1"})
    pipeline.store({"url": "http://b.test/", "crawlid": "c2"})
    thread.run()  # the first batch fails: the outage begins
    started = clock.seconds()
    for _ in range(int(storage.REPORT_AFTER) - 1):
        clock.advance(1)
        while thread.calls:
            thread.run()
    assert sent == [] and pipeline.state() is None  # a few seconds of failures are not reported yet
    clock.advance(2)
    while thread.calls:
        thread.run()
    state = sent[-1]
    assert state.since == started and state.kind == storage.SERVER_ERROR and state.waiting == 4
    assert state.crawls == {"c1": 3, "c2": 1}
    assert state.reason == "OperationFailure: internal server error (InternalError) [code 1]"
    assert storage.StoreState.from_json(state.to_json()) == state

    db["c1"].fail = None  # the store takes writes again: one None, then nothing
    for _ in range(15):
        clock.advance(1)
        while thread.calls:
            thread.run()
    assert sent[-1] is None and sent.count(None) == 1 and pipeline.stored == 4


def test_store_errors_are_told_by_kind_in_the_servers_own_words():
    assert store_error(ServerSelectionTimeoutError("127.0.0.1:27017: [Errno 111] Connection refused"))[1] == \
        storage.UNREACHABLE
    assert store_error(AutoReconnect("connection closed"))[1] == storage.UNREACHABLE
    denied = OperationFailure("command insert requires authentication", 13, {"codeName": "Unauthorized",
                                                                              "errmsg": "requires authentication"})
    assert store_error(denied) == ("OperationFailure: requires authentication (Unauthorized) [code 13]",
                                   storage.AUTHENTICATION)
    full = BulkWriteError({"writeErrors": [{"index": 0, "code": 14031, "errmsg": "No space left on device"}]})
    assert store_error(full) == ("BulkWriteError: No space left on device [code 14031]", storage.FULL)
    cache = OperationFailure("WT_CACHE_FULL: operation would overflow cache", 1)
    assert store_error(cache)[1] == storage.FULL
    assert store_error(CACHE_FULL)[1] == storage.SERVER_ERROR


def test_a_write_error_that_is_the_stores_is_retried_and_only_the_documents_fault_refuses_it():
    db = FakeDatabase()
    writer = MongoWriter(db)
    batch = [_pending("c1", "http://a.test/x"), _pending("c1", "http://a.test/y")]
    for code in (1, 13, 14031, 11000):  # internal error (a full cache), unauthorized, disk full, a concurrent upsert
        db["c1"].fail = BulkWriteError({"writeErrors": [{"index": 0, "code": code, "errmsg": "no"}]})
        with pytest.raises(BulkWriteError):
            writer(batch)
    db["c1"].fail = BulkWriteError({"writeErrors": [{"index": 1, "code": 17280, "errmsg": "key too long"}]})
    assert writer(batch) == {1: "error 17280: key too long"}


def test_a_report_names_the_crawls_with_the_most_waiting_items():
    assert storage.largest({"a": 1, "b": 5, "c": 0, "d": 3}, limit=2) == {"b": 5, "d": 3}
    assert storage.StoreState.from_json("not json") is None
    line = storage.describe(0.0, "OperationFailure: no", 1234, workers=2)
    assert line == "storage refusing writes since 1970-01-01 00:00:00 UTC: OperationFailure: no; 1,234 items " \
                   "waiting in 2 workers"


STORE_WAIT = {"reason": "storage", "since": 100.0, "why": "AutoReconnect: refused", "kind": "unreachable",
              "store": "mongodb", "items": 40, "workers": 1}


def test_a_crawl_is_stalled_at_once_by_its_store_and_after_a_minute_by_anything_else():
    paced = {"reason": "paced", "domain": "a.test", "tasks": 3, "where": "queues", "rate": 10, "window": 60.0,
             "next_slot_in": 4.0}
    no_worker = {"reason": "no_worker", "spider_type": "list", "tasks": 7, "where": "seeds"}
    stall = crawl_stall([paced, STORE_WAIT], progress_since=None, now=110.0, show_after=60.0)
    assert stall == {"reason": "storage", "since": 100.0, "for": 10.0, "items": 40, "text": describe(STORE_WAIT)}
    assert describe(STORE_WAIT).startswith("storage refusing writes since 1970-01-01 00:01:40 UTC: "
                                           "AutoReconnect: refused; 40 items waiting")
    assert crawl_stall([paced, no_worker], progress_since=100.0, now=150.0, show_after=60.0) is None
    stall = crawl_stall([paced, no_worker], progress_since=100.0, now=170.0, show_after=60.0)
    assert stall is not None and stall["reason"] == "no_worker" and stall["for"] == 70.0
    assert stall["text"] == "no progress for 70 s: no worker of type list: 7 tasks wait in seeds"
    stall = crawl_stall([], progress_since=100.0, now=170.0, show_after=60.0)
    assert stall is not None and stall["reason"] == UNKNOWN and "no progress for 70 s" in stall["text"]


def test_an_unreachable_store_is_said_without_pymongo_s_topology_description():
    error = ServerSelectionTimeoutError(
        "127.0.0.1:47109: [Errno 111] Connection refused (configured timeouts: socketTimeoutMS: 5000.0ms, "
        "connectTimeoutMS: 5000.0ms), Timeout: 5.0s, Topology Description: <TopologyDescription id: 6b0c>")
    assert store_error(error) == ("ServerSelectionTimeoutError: 127.0.0.1:47109: [Errno 111] Connection refused",
                                  storage.UNREACHABLE)
