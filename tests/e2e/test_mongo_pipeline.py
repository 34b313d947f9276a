"""The MongoDB pipeline against a real SecantusDB: batches, acknowledged Deferreds, exactly-once, an outage.

The pipeline runs where it runs in production: under Twisted's asyncio reactor, behind Scrapy's own
``ItemPipelineManager`` (so Scrapy 2.19's calling convention and its deprecation warnings are exercised too), but
without a whole crawl. A reactor cannot be restarted within a process and pytest here has no pytest-twisted, so
each scenario runs in a child process (:data:`DRIVER`, started with ``procs``) that reports on its log: ``PHASE
<name>`` lines to synchronise with the test (the outage test stops and restarts MongoDB between phases) and one
``RESULT <json>`` line at the end. The test then checks MongoDB itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from messaging.stats import Stats
from tests.plugins.mongo import OwnMongo

pytestmark = pytest.mark.e2e

DRIVER = r'''
import asyncio, json, logging, os, signal, sys, time, warnings
from pathlib import Path

print(f"DRIVER TOP {os.getpid()}", flush=True)  # no main guard: a child that imported this script would say so too

from scrapy.utils.reactor import install_reactor

install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

from pymongo import MongoClient
from scrapy.exceptions import ScrapyDeprecationWarning
from scrapy.pipelines import ItemPipelineManager
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler
from twisted.internet import task
from w3lib.url import canonicalize_url

from spiders.addon import ITEM_PIPELINES
from spiders.pipelines.pagework import PageWorkPipeline
from spiders.signals import storage_backlog

logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="LOG %(name)s %(levelname)s %(message)s")
deprecations = []  # Scrapy's warnings about how the pipeline is written (signature, returned Deferreds)
warnings.simplefilter("always", ScrapyDeprecationWarning)
_show = warnings.showwarning
def showwarning(message, category, *args, **kwargs):
    if issubclass(category, ScrapyDeprecationWarning):
        deprecations.append(str(message))
    return _show(message, category, *args, **kwargs)
warnings.showwarning = showwarning

scenario, params = sys.argv[1], json.loads(sys.argv[2])
backlog = []


def on_backlog(full, waiting):
    backlog.append([full, waiting])
    print(f"PHASE backlog-{'full' if full else 'drained'} {waiting}", flush=True)


def item(crawlid, n, url=None):
    return {"url": url or f"http://shop.fleet.test/p/{n}?b=2&a=1", "crawlid": crawlid, "spider_type": "list",
            "title": f"Product {n}", "status": 200, "depth": 1, "_required": ["title"], "_html": "<p>x</p>"}


async def until(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def main():
    crawler = get_crawler(settings_dict={"ITEM_PIPELINES": ITEM_PIPELINES, **params["settings"]})
    crawler.signals.connect(on_backlog, signal=storage_backlog)
    manager = build_from_crawler(ItemPipelineManager, crawler)
    pipeline = manager.middlewares[-1]
    batches = []
    write = pipeline.buffer.write
    def recording(batch):
        batches.append(len(batch))
        return write(batch)
    pipeline.buffer.write = recording
    check = MongoClient(params["settings"]["CRAWLFLEET_MONGO_URI"])[params["settings"]["CRAWLFLEET_MONGO_DB"]]
    early = []  # items whose Deferred fired before their document was in MongoDB (must stay empty)
    fired = []
    failed = []

    def feed(it):
        def done(result):
            # A blocking read on the reactor: fine in this test driver, it proves the write came first.
            if check[it["crawlid"]].count_documents({"url_key": canonicalize_url(it["url"])}) != 1:
                early.append(it["url"])
            fired.append(it["url"])
            return result
        def fail(failure):
            failed.append([it["url"], failure.type.__name__, failure.getErrorMessage()])
        return deferred_from_coro(manager.process_item_async(it)).addCallbacks(done, fail)

    await manager.open_spider_async()
    result = {}
    if scenario == "batches":
        size = params["batch"]
        firsts = [feed(item("c1", n)) for n in range(size - 1)]
        # Every item has passed the pipelines before MongoDB's and waits in its buffer (not "some time went by"):
        # a batch that is not full yet is not written before the flush timer (2 s) says so.
        await until(lambda: pipeline.buffer.waiting == size - 1, 10, "the first items in the buffer")
        result["fired_before_batch_full"] = len(fired)
        result["stored_before_batch_full"] = check["c1"].count_documents({})
        firsts.append(feed(item("c1", size - 1)))
        await until(lambda: len(fired) == size, 10, "the first batch")
        result["batches_after_first"] = list(batches)
        for n in range(size, 2 * size + 2):
            feed(item("c1", n))
        feed(item("c1", 0, url="http://shop.fleet.test/p/0?a=1&b=2#reviews"))  # the same page, spelled otherwise
        for n in range(3):
            feed(item("c2", n))
        feed({**item("c2", 3), "title": " "})  # a required field missing: dropped by the clean pipeline
        feed({**item("c2", 4), "sizes": {1, 2}})  # BSON has no sets: refused, the rest of its batch is stored
        await until(lambda: len(fired) + len(failed) == 2 * size + 8, 10, "the timer's flush")
    elif scenario == "pool":
        pagework = next(m for m in manager.middlewares if isinstance(m, PageWorkPipeline))
        pool = pagework.pool
        result["pids"] = list(pool.pids)
        page = Path(params["page"]).read_text()
        for n in range(params["first"]):
            feed({**item("c1", n), "_html": page})
        await until(lambda: len(fired) == params["first"], 30, "the first items")
        victim = pool.pids[0]
        os.kill(victim, signal.SIGSTOP)  # it takes pages but cannot answer: they are in its hand when it dies
        for n in range(params["first"], params["total"]):
            feed({**item("c1", n), "_html": page})
        await until(lambda: pool.pages_in_hand == params["total"] - params["first"], 10, "pages in the pool")
        print(f"PHASE killing {victim}", flush=True)
        os.kill(victim, signal.SIGKILL)
        await until(lambda: len(fired) + len(failed) == params["total"], 30, "every item")
        result.update(victim=victim, pids_after=list(pool.pids), in_reactor=pool.in_reactor)
    elif scenario == "outage":
        crawl, total = "c1", params["total"]
        fed = 0
        for _ in range(params["first"]):
            feed(item(crawl, fed)); fed += 1
        await until(lambda: len(fired) == fed, 20, "the first items")
        print("PHASE first-stored", flush=True)
        await until(lambda: Path(params["stopped_file"]).exists(), 60, "the test to stop MongoDB")
        feed(item(crawl, 0, url="http://shop.fleet.test/p/0?a=1&b=2"))  # a redelivered task's item, mid-outage
        while fed < total:
            if backlog and backlog[-1][0]:
                await asyncio.sleep(0.02)  # like the scheduler: no new tasks while the buffer is full
                continue
            feed(item(crawl, fed)); fed += 1
            await asyncio.sleep(0.01)
        await until(lambda: len(fired) == total + 1, 90, "every item")
    result.update(fired=len(fired), failed=failed, early=early, backlog=backlog, batches=batches,
                  stored=pipeline.stored,
                  stats={k: v for k, v in crawler.stats.get_stats().items()
                         if k.split("/")[0] in ("mongo", "clean", "extract")})
    await manager.close_spider_async()
    result["deprecations"] = deprecations
    print("RESULT " + json.dumps(result), flush=True)


task.react(lambda reactor: deferred_from_coro(main()))
'''


def _driver(procs: Any, cf: Any, tmp_path: Path, scenario: str, params: dict[str, Any]) -> Any:
    script = tmp_path / "pipeline_driver.py"
    script.write_text(DRIVER)
    return procs.python(str(script), scenario, json.dumps(params), env=cf.env, name=f"driver-{scenario}")


def _result(procs: Any, proc: Any, timeout: float) -> dict[str, Any]:
    procs.wait_log(proc, "RESULT ", timeout)
    line = next(line for line in procs.log(proc).splitlines() if line.startswith("RESULT "))
    assert proc.wait(timeout=15) == 0, procs.log(proc)[-3000:]
    return json.loads(line.removeprefix("RESULT "))


def _settings(cf: Any, **overrides: Any) -> dict[str, Any]:
    return {"CRAWLFLEET_MONGO_URI": cf.settings.mongo_uri, "CRAWLFLEET_MONGO_DB": cf.settings.mongo_db,
            "LOG_LEVEL": "INFO", **overrides}


def test_batches_land_acknowledged_once_per_url_one_collection_per_crawl(cf, procs, tmp_path):
    batch = 5
    params = {"batch": batch, "settings": _settings(cf, CRAWLFLEET_MONGO_BATCH=batch,
                                                     CRAWLFLEET_MONGO_FLUSH_SECONDS=2.0)}
    proc = _driver(procs, cf, tmp_path, "batches", params)
    result = _result(procs, proc, timeout=90)
    log = procs.log(proc)

    assert result["fired_before_batch_full"] == 0 and result["stored_before_batch_full"] == 0
    assert result["batches_after_first"] == [batch]  # a full batch goes at once, in one write
    assert result["early"] == []  # no Deferred fired before its document was in MongoDB
    assert result["fired"] == 2 * batch + 6
    assert [(url.rsplit("/", 1)[1], kind) for url, kind, _ in result["failed"]] == [
        ("3?b=2&a=1", "DropItem"), ("4?b=2&a=1", "Refused")]
    assert "missing required field(s) title" in result["failed"][0][2]
    assert all(size <= batch for size in result["batches"]) and sum(result["batches"]) == 2 * batch + 7
    assert result["stored"] == result["stats"]["mongo/stored"] == 2 * batch + 6
    assert result["deprecations"] == [], result["deprecations"]
    assert "Traceback" not in log

    db = cf.mongo()
    assert sorted(db.list_collection_names()) == ["c1", "c2"]
    assert db["c1"].count_documents({}) == 2 * batch + 2  # the page fetched twice is stored once
    assert db["c2"].count_documents({}) == 3
    for name in ("c1", "c2"):
        indexes = db[name].index_information()
        assert any(spec["key"] == [("url_key", 1)] and spec.get("unique") for spec in indexes.values()), indexes
    doc = db["c1"].find_one({"url_key": "http://shop.fleet.test/p/0?a=1&b=2"}, {"_id": 0})
    assert doc["url"] == "http://shop.fleet.test/p/0?a=1&b=2#reviews"  # the newest fetch wins
    assert doc["title"] == "Product 0" and doc["stored_at"] is not None
    assert not [key for key in doc if key.startswith("_")]
    assert doc["text"] == "x" and "published" in doc  # through the extraction pipeline
    assert Stats(cf.redis(), "crawler").value("clean:dropped", "lifetime") == 1  # BufferedStats flushed at close


def test_an_outage_is_waited_out_without_loss_or_duplicates(cf, procs, tmp_path):
    mongo = OwnMongo(procs, cf, tmp_path)
    mongo.start()
    stopped_file = tmp_path / "mongo-stopped"
    first, total, buffer = 10, 40, 8
    params = {"first": first, "total": total, "stopped_file": str(stopped_file),
              "settings": _settings(cf, CRAWLFLEET_MONGO_URI=mongo.uri, CRAWLFLEET_MONGO_BATCH=4,
                                    CRAWLFLEET_MONGO_FLUSH_SECONDS=0.2, CRAWLFLEET_MONGO_BUFFER=buffer)}
    proc = _driver(procs, cf, tmp_path, "outage", params)

    procs.wait_log(proc, "PHASE first-stored", 60)
    mongo.stop()
    stopped_file.touch()
    procs.wait_log(proc, "PHASE backlog-full", 60)  # the driver stops feeding, as the scheduler would
    procs.wait_log(proc, "MongoDB write failed", 60)  # the pipeline noticed, and retries with back-off
    mongo.start()
    result = _result(procs, proc, timeout=120)
    log = procs.log(proc)

    assert result["fired"] == total + 1 and result["early"] == []
    assert result["backlog"][0][0] is True and result["backlog"][0][1] >= buffer
    assert result["backlog"][-1][0] is False and result["backlog"][-1][1] < buffer / 2
    assert result["stored"] == total + 1  # every acknowledged write, the redelivered item's too
    assert result["deprecations"] == []
    client = MongoClient(mongo.uri)
    try:
        docs = list(client[cf.settings.mongo_db]["c1"].find({}, {"url_key": 1}))
    finally:
        client.close()
    keys = [doc["url_key"] for doc in docs]
    assert len(keys) == len(set(keys)) == total  # every item exactly once
    assert set(keys) == {f"http://shop.fleet.test/p/{n}?a=1&b=2" for n in range(total)}
    outage_lines = [line for line in log.splitlines() if "spiders.pipelines.buffer" in line]
    assert 2 <= len(outage_lines) <= 4, outage_lines  # lost, perhaps still down, back: no flood
    assert "is back" in outage_lines[-1]
    assert "Traceback" not in log


def test_a_script_without_a_main_guard_stores_its_items_through_the_page_pool_even_when_a_process_dies(
        cf, procs, tmp_path):
    first, total = 12, 20
    page = tmp_path / "page.html"
    page.write_text("<html><head><title>Storm</title></head><body><article><h1>Storm hits the coast</h1>"
                    + "<p>The storm reached the coast on Monday night and the town held its breath.</p>" * 12
                    + "</article></body></html>")
    params = {"first": first, "total": total, "page": str(page),
              "settings": _settings(cf, CRAWLFLEET_PAGE_PROCESSES=2, CRAWLFLEET_MONGO_BATCH=4,
                                    CRAWLFLEET_MONGO_FLUSH_SECONDS=0.2)}
    proc = _driver(procs, cf, tmp_path, "pool", params)
    result = _result(procs, proc, timeout=90)
    log = procs.log(proc)

    assert [line for line in log.splitlines() if line.startswith("DRIVER TOP")] == [f"DRIVER TOP {proc.pid}"]
    assert len(result["pids"]) == 2 and proc.pid not in result["pids"]
    assert result["fired"] == total and result["failed"] == [] and result["early"] == []
    died = [line for line in log.splitlines() if "died" in line and "spiders.pipelines.pagepool" in line]
    assert len(died) == 1 and f"process {result['victim']} died" in died[0], died
    assert f"with {total - first} page(s) in hand: they are processed in the reactor" in died[0]
    assert result["in_reactor"] == total - first
    assert result["victim"] not in result["pids_after"] and len(result["pids_after"]) == 2  # replaced
    assert result["stats"]["extract/pages"] == total and "extract/failed" not in result["stats"]
    assert "Traceback" not in log
    docs = list(cf.mongo()["c1"].find({}, {"url": 1, "text": 1, "title": 1}))
    assert len(docs) == total  # every item stored once, with its extracted text
    assert all("The storm reached the coast" in doc["text"] for doc in docs), docs[0]
