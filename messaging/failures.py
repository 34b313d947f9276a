"""A crawl's failed URLs (issue 42): kept in MongoDB, listed, and re-submitted by ``crawlfleet retry``.

**What is kept.** Every task that ends in failure — an HTTP error status after Scrapy's retries, a timeout, a DNS or
connection error, a page no request could be made for; not a page robots.txt disallows, a blacklisted domain's or a
``noindex`` page (:data:`messaging.counts.UNLISTED_REASONS`), nor an item a pipeline dropped — has one document per
canonical URL in the collection ``<crawlid>.failures`` (beside the crawl's items, as ``<crawlid>.history`` is):
``_id`` (the URL's fingerprint, hex), ``url``, ``reason`` (as counted: ``HTTP 404``, ``TimeoutError``…),
``status`` (the HTTP status, or null), ``attempts`` (downloads tried, over every processing that failed),
``time`` and ``first`` (the latest and the first failure, UTC), ``retry`` (which ``crawlfleet retry`` processed it
last, 0 before any), ``submitted`` (the retry it was last re-submitted by), ``job`` and ``task`` (the task as it was
first submitted, to re-submit it the same: its callback, depth and fields).

**Who decides.** The exact counts do (:mod:`messaging.counts`, ``spiders/worker/lua/count.lua``): the worker's
commit counts a batch's pages, and the count's verdict says which pages enter or stay in the list (``keep``: the
page's first failure while the list holds fewer than CRAWLFLEET_FAILURES_MAX, or a listed page that failed again)
and which leave it (``drop``: a listed page that works now); the commit writes that here (:meth:`FailureStore.apply`,
upserts by fingerprint, so a commit done again writes the same) before the task's lease is acknowledged. Failures
beyond the bound are counted by reason and as ``unlisted``, never stored. A crash between the count and the write
leaves the page's task to be processed again, whose count says ``keep`` or ``drop`` again; a recovered page's
document that outlived such a crash is stale, so :func:`failures` lists only the documents whose page the counts
hold as a listed failure (``crawl:{<id>}:counted``, while the crawl's keys live): the list and the counts agree.

**Retry** (:func:`retry`): the listed failures (of some reasons, or all) that are not re-submitted already go back
into ``seeds`` as tasks of the same crawl, marked with the retry's number (``crawl:<id>`` ``retries``): past the
dedup filter (``seeds`` directly), through pacing and robots.txt as every task. A finished crawl is running again
first (it finishes again: a second ``crawl_finished``, with a new ``event_id``, its ``retries`` and its counts now);
a paused one stays paused (the tasks wait parked); a stopped or expired one is refused.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from messaging import keys
from messaging.bounded import BoundedDict
from messaging.clients import RedisClient, as_text
from messaging.export import batches, csv_header, jsonl_lines, plain
from messaging.scripts import LUA, lua_script
from messaging.tasks import CrawlFields, CrawlState, Task, push_seeds

SUFFIX = ".failures"
FORMATS = ("jsonl", "csv")
COLUMNS = ["url", "reason", "status", "attempts", "time", "first", "retry", "submitted", "job"]
INDEXED_KEPT = 1000  # crawls whose failures index a process remembers having made (a forgotten one: made again)
VERIFY_CHUNK = 500  # fingerprints checked against the counts per round trip
REOPEN = lua_script(LUA / "crawl_reopen.lua")  # a retry's number; a finished crawl running again
KEEP, DROP = "keep", "drop"  # the count's verdicts (spiders/worker/lua/count.lua)


def collection_name(crawlid: str) -> str:
    return f"{crawlid}{SUFFIX}"


@dataclass(frozen=True)
class Failure:
    """A failed page as the worker's commit records it."""

    fingerprint: str  # the canonical URL's fingerprint, hex (the counts' key)
    task: Task
    reason: str
    status: int | None = None
    attempts: int = 1
    at: float = 0.0  # Unix time of the failure
    job: str = ""


class FailureStore:
    """The failures lists in one MongoDB database (``<crawlid>.failures`` per crawl)."""

    def __init__(self, database: Any) -> None:
        self.database = database
        # crawls whose index was made sure of
        self._indexed: BoundedDict[str, bool] = BoundedDict(INDEXED_KEPT, memo="failures_indexed")

    def apply(self, crawlid: str, keep: Sequence[Failure], drop: Iterable[str]) -> None:
        """Write a commit's verdicts: ``keep`` upserted (attempts added up), ``drop`` (fingerprints) deleted."""
        from pymongo import DeleteOne, UpdateOne

        collection = self.database[collection_name(crawlid)]
        operations: list[Any] = []
        for failure in keep:
            at = datetime.fromtimestamp(failure.at, UTC)
            original = dataclasses.replace(failure.task, retry=0).encode()
            operations.append(UpdateOne({"_id": failure.fingerprint}, {
                "$set": {"url": failure.task.url, "reason": failure.reason, "status": failure.status, "time": at,
                         "retry": failure.task.retry, "job": failure.job},
                "$setOnInsert": {"first": at, "task": original, "crawlid": crawlid, "submitted": 0},
                "$inc": {"attempts": failure.attempts}}, upsert=True))
        operations += [DeleteOne({"_id": fingerprint}) for fingerprint in drop]
        if not operations:
            return
        if crawlid not in self._indexed:
            collection.create_index("reason")
            self._indexed[crawlid] = True
        collection.bulk_write(operations, ordered=False)


# --- reading -----------------------------------------------------------------------------------------------------
def failures(database: Any, redis: RedisClient, crawlid: str, reasons: Sequence[str] = ()) -> Iterator[dict[str, Any]]:
    """The crawl's failures list (of ``reasons``, or all), in fingerprint order, each document whose page the counts
    hold as a listed failure (all of them once the crawl's keys expired: nothing to check against)."""
    where = {"reason": {"$in": list(reasons)}} if reasons else None
    checked = bool(redis.exists(keys.crawl_counted(crawlid)))
    for batch in batches(database[collection_name(crawlid)], where=where, batch_size=VERIFY_CHUNK):
        if checked:
            records = redis.hmget(keys.crawl_counted(crawlid), [document["_id"] for document in batch])
            batch = [document for document, record in zip(batch, records, strict=True)
                     if record is not None and as_text(record).startswith("l:")]
        yield from batch


def row(document: dict[str, Any]) -> dict[str, Any]:
    """A failure as the command line and the manager show it (JSON-ready)."""
    return {name: plain(document.get(name)) for name in ["crawlid", *COLUMNS]}


def export(documents: Iterable[dict[str, Any]], fmt: str) -> Iterator[bytes]:
    """The failures as JSON lines or as CSV (RFC 4180, UTF-8 with a byte order mark, as ``crawlfleet export`` writes
    items), one column per field of :data:`COLUMNS`."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
    if fmt == "csv":
        yield csv_header(COLUMNS)
    chunk: list[dict[str, Any]] = []
    for document in documents:
        chunk.append({name: document.get(name) for name in COLUMNS})
        if len(chunk) >= VERIFY_CHUNK:
            yield _lines(chunk, fmt)
            chunk = []
    if chunk:
        yield _lines(chunk, fmt)


def _lines(chunk: list[dict[str, Any]], fmt: str) -> bytes:
    if fmt == "jsonl":
        return jsonl_lines(chunk)
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(
        [["" if row[name] is None else str(plain(row[name])) for name in COLUMNS] for row in chunk])
    return buffer.getvalue().encode("utf-8")


# --- retry -------------------------------------------------------------------------------------------------------
class NotRetryable(Exception):
    """The crawl's failures cannot be re-submitted (stopped, or its record expired or never existed)."""


@dataclass(frozen=True)
class RetryResult:
    crawlid: str
    retry: int  # the retry's number (0: nothing was re-submitted, no number taken)
    submitted: int  # tasks pushed into seeds
    skipped: int  # listed failures re-submitted by an earlier retry and not processed since
    reopened: bool  # the crawl had finished and runs again
    state: str  # the crawl's state now


def retry(redis: RedisClient, database: Any, crawlid: str, reasons: Sequence[str] = ()) -> RetryResult:
    """Re-submit the crawl's listed failures (see the module docstring); :class:`NotRetryable` when it cannot."""
    wanted, skipped = [], 0
    for document in failures(database, redis, crawlid, reasons):
        if int(document.get("submitted") or 0) > int(document.get("retry") or 0):
            skipped += 1  # its last re-submission is still on its way
        else:
            wanted.append(document)
    state = as_text(redis.hget(keys.crawl(crawlid), CrawlFields.STATE) or b"")
    if not wanted:
        if not state:
            raise NotRetryable(f"no such crawl: {crawlid} (or its record expired after CRAWLFLEET_CRAWL_TTL)")
        return RetryResult(crawlid, 0, 0, skipped, False, state)
    was, number = (as_text(v) for v in REOPEN.on(redis)(
        keys=[keys.crawl(crawlid)], args=[CrawlFields.STATE, CrawlFields.RETRIES, CrawlState.FINISHED,
                                          CrawlState.RUNNING, CrawlState.STOPPED, CrawlFields.FINISH_EVENT,
                                          CrawlFields.FINISHED]))
    if was in ("", CrawlState.STOPPED):
        raise NotRetryable(f"crawl {crawlid} is stopped: a stopped crawl takes no new tasks" if was else
                           f"no such crawl: {crawlid} (its record expired after CRAWLFLEET_CRAWL_TTL)")
    for key in (keys.crawl_counted(crawlid), keys.crawl_totals(crawlid), keys.crawl_domains(crawlid)):
        redis.persist(key)  # the finisher gave them a TTL: they live as long as the crawl again
    tasks = [dataclasses.replace(Task.decode(document["task"]), retry=int(number)) for document in wanted]
    submitted = sum(push_seeds(redis, tasks[n:n + VERIFY_CHUNK]) for n in range(0, len(tasks), VERIFY_CHUNK))
    _mark_submitted(database, crawlid, [document["_id"] for document in wanted], int(number))
    state = CrawlState.RUNNING if was == CrawlState.FINISHED else was
    return RetryResult(crawlid, int(number), submitted, skipped, was == CrawlState.FINISHED, state)


def _mark_submitted(database: Any, crawlid: str, ids: list[str], number: int) -> None:
    from pymongo import UpdateOne

    if ids:
        database[collection_name(crawlid)].bulk_write(
            [UpdateOne({"_id": _id}, {"$set": {"submitted": number}}) for _id in ids], ordered=False)


def summary(documents: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Failures by reason."""
    counts: dict[str, int] = {}
    for document in documents:
        counts[str(document.get("reason"))] = counts.get(str(document.get("reason")), 0) + 1
    return dict(sorted(counts.items()))


def as_json(document: dict[str, Any]) -> str:
    return json.dumps(row(document), ensure_ascii=False, sort_keys=True)
