"""Item pipelines without services: clean, extract, and the MongoDB pipeline's buffer in simulated time."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import pytest
from pymongo.errors import AutoReconnect
from scrapy.exceptions import DropItem
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from messaging.settings import load
from spiders.pipelines.buffer import Refused, WriteBuffer
from spiders.pipelines.clean import CleanPipeline, clean_text
from spiders.pipelines.extract import ExtractPipeline
from spiders.pipelines.mongo import MongoPipeline, document_of, url_key
from spiders.signals import storage_backlog

pytestmark = pytest.mark.unit


class Stats:
    """Scrapy's stats interface, as a Counter."""

    def __init__(self) -> None:
        self.values: Counter[str] = Counter()

    def inc_value(self, key: str, count: int = 1) -> None:
        self.values[key] += count

    def set_value(self, key: str, value: int) -> None:
        self.values[key] = value


class Counters:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def incr(self, plugin: str, amount: int = 1) -> None:
        self.counts[plugin] += amount


# --- clean -------------------------------------------------------------------------------------------------------
def test_clean_trims_collapses_and_unescapes_text_fields():
    html = "<p>  keep   &amp;  me </p>"
    item = {"url": "http://a.test/x?a=1&copy=2", "crawlid": "c1", "title": "  Hello\n\t  world&nbsp;&amp;\u3000co  ",
            "tags": [" a\n b ", "R&D;"], "status": 200, "etag": None, "_html": html}
    out = CleanPipeline().process_item(item)
    assert out["title"] == "Hello world & co"
    assert out["tags"] == ["a b", "R&D;"]  # an unknown entity is kept as written
    assert out["url"] == "http://a.test/x?a=1&copy=2"  # identifiers are not text
    assert out["_html"] is html and out["status"] == 200 and out["etag"] is None
    assert clean_text("&lt;b&gt; 5 &#8364;") == "<b> 5 €"


def test_clean_drops_items_missing_required_fields_with_the_reason_and_counts_them():
    stats, counters = Stats(), Counters()
    pipeline = CleanPipeline(stats=stats, counters=counters)
    item = {"url": "http://a.test/", "crawlid": "c1", "title": " \n ", "date": None, "body": "x",
            "_required": ["title", "date", "body"]}
    with pytest.raises(DropItem, match=r"^missing required field\(s\) title, date$"):
        pipeline.process_item(item)
    with pytest.raises(DropItem, match=r"^missing required field\(s\) title$"):
        pipeline.process_item({"crawlid": "c2", "_required": ["title"]})
    assert stats.values["clean/dropped"] == 2
    assert stats.values["clean/dropped/c1"] == 1 and stats.values["clean/dropped/c2"] == 1
    assert counters.counts["clean:dropped"] == 2
    kept = pipeline.process_item({"crawlid": "c1", "title": " T ", "_required": ["title"]})
    assert kept["title"] == "T"
    assert stats.values["clean/dropped"] == 2


# --- extract -----------------------------------------------------------------------------------------------------
ARTICLE = """<!doctype html><html><head><title>Rivers rise after storm | Daily Test</title>
<meta property="article:published_time" content="2026-03-14T08:30:00Z"></head>
<body><nav><a href="/">Home</a> <a href="/news">News</a> <a href="/sport">Sport</a></nav>
<article><h1>Rivers rise after storm</h1>
<p>Heavy rain over the weekend pushed the river above its banks in three towns, and the authorities opened the
emergency shelters on Sunday night while volunteers filled sandbags along the embankment.</p>
<p>Forecasters expect the water to fall slowly during the week, although more rain is possible on Thursday, and
residents of the low streets were asked to keep their cars on higher ground until the warning is lifted.</p>
<p>The council said the new flood wall held where it had been finished, and that the remaining section would be
completed before the autumn, two months ahead of the schedule agreed last year.</p>
</article><footer>Copyright Daily Test. <a href="/about">About</a> <a href="/contact">Contact</a></footer>
</body></html>"""


def test_extract_sets_text_title_published_and_pops_the_html():
    stats = Stats()
    item = {"url": "http://news.test/rivers", "crawlid": "c1", "_html": ARTICLE}
    out = ExtractPipeline(stats=stats).process_item(item)
    assert "_html" not in out
    assert "emergency shelters" in out["text"] and "flood wall" in out["text"]
    assert "Copyright" not in out["text"]
    assert out["title"] == "Rivers rise after storm"
    assert out["published"] and out["published"].startswith("2026-03-14")
    assert stats.values["extract/pages"] == 1


def test_extract_keeps_the_rules_title_and_leaves_items_without_html_alone():
    item = {"url": "http://news.test/rivers", "title": "Title from the rule", "_html": ARTICLE}
    assert ExtractPipeline().process_item(item)["title"] == "Title from the rule"
    plain = {"url": "http://news.test/list", "title": "x"}
    assert ExtractPipeline().process_item(dict(plain)) == plain


def test_extract_survives_garbage_and_a_failing_extractor():
    garbage = {"url": "http://bad.test/", "_html": "<<<>>>\x00<div<p>&&&#xZZ;</ta\udcffble>" * 50}
    out = ExtractPipeline().process_item(garbage)
    assert "_html" not in out and isinstance(out["text"], str)

    def broken(html: str, url: Any) -> dict[str, Any]:
        raise RecursionError("maximum recursion depth exceeded")

    stats, counters = Stats(), Counters()
    pipeline = ExtractPipeline(stats=stats, counters=counters, extractor=broken)
    for _ in range(2):
        item = pipeline.process_item({"url": "http://bad.test/", "title": "kept", "_html": ARTICLE})
        assert item == {"url": "http://bad.test/", "title": "kept"}  # no text, nothing lost
    assert stats.values["extract/failed"] == 2 and counters.counts["extract:failed"] == 2


# --- the MongoDB pipeline's buffer, in simulated time --------------------------------------------------------------
class ManualThread:
    """Stands in for deferToThread: each call waits until the test runs it."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, tuple[Any, ...], Deferred[Any]]] = []

    def __call__(self, function: Any, *args: Any) -> Deferred[Any]:
        done: Deferred[Any] = Deferred()
        self.calls.append((function, args, done))
        return done

    def run(self) -> None:
        function, args, done = self.calls.pop(0)
        try:
            result = function(*args)
        except Exception as exc:
            done.errback(exc)
        else:
            done.callback(result)


class FakeStore:
    """The blocking write: records batches, fails while ``down``."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.down = False
        self.refuse: dict[str, str] = {}

    def __call__(self, batch: Any) -> dict[int, str]:
        if self.down:
            raise AutoReconnect("127.0.0.1:27017: [Errno 111] Connection refused")
        self.batches.append([pending.key for pending in batch])
        return {i: self.refuse[p.key] for i, p in enumerate(batch) if p.key in self.refuse}


def _buffer(store: FakeStore, thread: ManualThread, clock: Clock, **options: Any) -> tuple[WriteBuffer, list]:
    backlog: list[tuple[bool, int]] = []
    settings = {"batch": 3, "flush_seconds": 1.0, "capacity": 100, **options}
    buffer = WriteBuffer(store, clock=clock, run_in_thread=thread, on_backlog=lambda f, w: backlog.append((f, w)),
                         transient=(AutoReconnect,), store="MongoDB", **settings)
    buffer.start()
    return buffer, backlog


def _fired(deferreds: list[Deferred[Any]]) -> list[Any]:
    results: list[Any] = []
    for d in deferreds:
        d.addBoth(results.append)
    return results


def test_a_full_batch_is_written_at_once_and_fires_only_when_acknowledged():
    store, thread, clock = FakeStore(), ManualThread(), Clock()
    buffer, _ = _buffer(store, thread, clock)
    items = [{"n": i} for i in range(5)]
    done = [buffer.add("c1", f"k{i}", {}, item) for i, item in enumerate(items)]
    fired = _fired(done)
    assert len(thread.calls) == 1 and fired == []  # 3 items make a batch; one write at a time
    thread.run()
    assert store.batches == [["k0", "k1", "k2"]] and fired == items[:3] and buffer.written == 3
    assert thread.calls == []  # 2 wait for the timer
    clock.advance(1.0)
    thread.run()
    assert store.batches[-1] == ["k3", "k4"] and fired == items and buffer.waiting == 0


def test_an_outage_is_retried_with_backoff_and_logged_on_few_lines(caplog):
    caplog.set_level(logging.INFO, logger="spiders.pipelines.buffer")
    store, thread, clock = FakeStore(), ManualThread(), Clock()
    buffer, _ = _buffer(store, thread, clock, batch=2)
    store.down = True
    fired = _fired([buffer.add("c1", f"k{i}", {}, i) for i in range(2)])
    delays = []
    for _ in range(12):  # 12 failed attempts, about 85 s of outage
        thread.run()
        delays.append(buffer._retry.getTime() - clock.seconds())
        clock.advance(delays[-1])
    assert delays == [0.5, 1, 2, 4, 8, 10, 10, 10, 10, 10, 10, 10]
    assert fired == [] and buffer.waiting == 2 and buffer.down
    store.down = False
    thread.run()
    assert fired == [0, 1] and store.batches == [["k0", "k1"]]
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) <= 4, messages  # lost, still down every 30 s of ~80, back
    assert "write failed" in messages[0] and "is back" in messages[-1]
    assert not any(r.exc_info for r in caplog.records)  # an expected error: no traceback


def test_backlog_signal_on_full_and_below_half():
    store, thread, clock = FakeStore(), ManualThread(), Clock()
    buffer, backlog = _buffer(store, thread, clock, batch=2, capacity=4)
    store.down = True
    for i in range(6):
        buffer.add("c1", f"k{i}", {}, i)
    assert backlog == [(True, 4)]  # once per transition
    store.down = False
    thread.run()  # k0, k1 written: 4 wait, not below half yet; the next batch starts at once
    thread.run()  # k2, k3: 2 wait, still not below half
    assert backlog == [(True, 4)]
    thread.run()  # k4, k5: none
    assert backlog == [(True, 4), (False, 0)] and buffer.waiting == 0


def test_close_writes_what_is_left_and_gives_up_after_the_timeout(caplog):
    store, thread, clock = FakeStore(), ManualThread(), Clock()
    buffer, _ = _buffer(store, thread, clock, batch=10)
    fired = _fired([buffer.add("c1", f"k{i}", {}, i) for i in range(3)])
    left = _fired([buffer.close(timeout=30)])
    thread.run()
    assert left == [0] and fired == [0, 1, 2]

    buffer, _ = _buffer(store, thread, clock, batch=10)
    store.down = True
    fired = _fired([buffer.add("c1", f"k{i}", {}, i) for i in range(3)])
    left = _fired([buffer.close(timeout=30)])
    for _ in range(40):
        if thread.calls:
            thread.run()
        clock.advance(1)
    assert left == [3] and fired == []  # never fired: the tasks stay unacknowledged
    assert clock.getDelayedCalls() == []  # no retry left behind


def test_a_refused_document_fails_alone():
    store, thread, clock = FakeStore(), ManualThread(), Clock()
    buffer, _ = _buffer(store, thread, clock)
    store.refuse = {"k1": "document too large"}
    fired = _fired([buffer.add("c1", f"k{i}", {}, i) for i in range(3)])
    thread.run()
    assert fired[0] == 0 and fired[2] == 2 and fired[1].check(Refused)
    assert buffer.written == 2 and buffer.refused == 1


def test_the_pipeline_sends_storage_backlog_and_builds_documents():
    sent: list[dict[str, Any]] = []

    class Signals:
        def send_catch_log(self, signal: Any, **kwargs: Any) -> None:
            sent.append({"signal": signal, **kwargs})

    settings = load({"CRAWLFLEET_MONGO_BATCH": "2", "CRAWLFLEET_MONGO_BUFFER": "2"})
    pipeline = MongoPipeline(settings, signals=Signals(), clock=Clock(), run_in_thread=ManualThread(),
                             client_factory=lambda s: {"crawlfleet": None})
    pipeline.open_spider()
    pipeline.store({"url": "http://a.test/b?y=2&x=1#top", "crawlid": "c1"})
    pipeline.store({"url": "http://a.test/c", "crawlid": "c1"})
    assert sent == [{"signal": storage_backlog, "full": True, "waiting": 2}]
    with pytest.raises(DropItem):
        pipeline.store({"url": "http://a.test/d"})
    item = {"url": "http://a.test/b?y=2&x=1#top", "crawlid": "c1", "title": "T", "_html": "<p>", "_required": []}
    assert url_key(item["url"]) == "http://a.test/b?x=1&y=2"
    assert document_of(item, url_key(item["url"])) == {"url": item["url"], "crawlid": "c1", "title": "T",
                                                       "url_key": "http://a.test/b?x=1&y=2"}


class FakeCollection:
    def __init__(self, fail: Exception | None = None) -> None:
        self.fail = fail
        self.operations: list[Any] = []
        self.indexes: list[tuple[str, bool]] = []

    def create_index(self, key: str, unique: bool = False) -> str:
        if isinstance(self.fail, AutoReconnect):
            raise self.fail
        self.indexes.append((key, unique))
        return f"{key}_1"

    def bulk_write(self, operations: list[Any], ordered: bool = True) -> None:
        assert ordered is False
        self.operations.append(operations)
        if self.fail is not None:
            raise self.fail


class FakeDatabase(dict):
    def __missing__(self, name: str) -> FakeCollection:
        self[name] = FakeCollection()
        return self[name]


def _pending(collection: str, url: str, **fields: Any) -> Any:
    from spiders.pipelines.buffer import Pending

    key = url_key(url)
    return Pending(collection, key, document_of({"url": url, **fields}, key), None, Deferred())


def test_the_writer_upserts_one_document_per_canonical_url_and_tells_refusals_from_outages():
    from pymongo.errors import BulkWriteError

    from spiders.pipelines.mongo import MongoWriter

    db = FakeDatabase()
    writer = MongoWriter(db)
    batch = [_pending("c1", "http://a.test/x?b=1&a=2", n=1), _pending("c2", "http://a.test/y", n=2),
             _pending("c1", "http://a.test/x?a=2&b=1#f", n=3)]
    assert writer(batch) == {}
    (operations,) = db["c1"].operations
    assert len(operations) == 1  # one upsert per URL: the newest fetch wins
    assert operations[0]._filter == {"url_key": "http://a.test/x?a=2&b=1"} and operations[0]._doc["n"] == 3
    assert operations[0]._upsert and "stored_at" in operations[0]._doc
    indexes = [("url_key", True), ("job", False)]  # unique by URL; the job for the manager's /items/
    assert db["c1"].indexes == indexes and db["c2"].indexes == indexes
    writer(batch[:1])
    assert db["c1"].indexes == indexes  # once per collection

    too_big = BulkWriteError({"writeErrors": [{"index": 0, "code": 10334, "errmsg": "too large"}]})
    db["c1"].fail = too_big
    assert writer(batch) == {0: "error 10334: too large", 2: "error 10334: too large"}
    db["c1"].fail = BulkWriteError({"writeErrors": [{"index": 0, "code": 11000, "errmsg": "duplicate key"}]})
    with pytest.raises(BulkWriteError):  # a concurrent upsert of the same URL: the batch is retried
        writer(batch)


def test_close_with_mongodb_down_logs_how_many_items_were_not_written(caplog):
    caplog.set_level(logging.INFO)
    db = FakeDatabase()
    db["c1"] = FakeCollection(fail=AutoReconnect("connection refused"))
    clock, thread = Clock(), ManualThread()
    settings = load({"CRAWLFLEET_MONGO_BATCH": "10", "CRAWLFLEET_MONGO_DB": "items"})
    pipeline = MongoPipeline(settings, stats=Stats(), clock=clock, run_in_thread=thread,
                             client_factory=lambda s: {"items": db})
    pipeline.open_spider()
    fired = _fired([pipeline.store({"url": f"http://a.test/{n}", "crawlid": "c1"}) for n in range(3)])
    left = _fired([pipeline.close()])
    for _ in range(40):
        while thread.calls:
            thread.run()
        clock.advance(1)
    assert left == [3] and fired == [] and pipeline.stored == 0
    assert any("closed with 3 items not written" in r.getMessage() for r in caplog.records)
