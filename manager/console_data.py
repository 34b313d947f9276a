"""What the console's pages show beyond :mod:`manager.fleet`: the fleet view, one crawl, the services' health.

Blocking reads (Redis, ZooKeeper, MongoDB, a TCP connect): the pages call these through ``deferToThread``.
"""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from pymongo.errors import PyMongoError

from frontier.metrics import masters
from frontier.registry import WorkerRegistry
from manager import fleet
from manager.failures import failures_view
from manager.registry import ManagerRegistry
from messaging import keys
from messaging.clients import as_text
from messaging.clock import RedisClock
from messaging.counts import BLACKLISTED, NOINDEX, ROBOTS, read_counts
from messaging.siteconfig import SitePaths
from messaging.stalls import stall_of
from messaging.tasks import CrawlFields, CrawlState
from messaging.waits import crawl_waits, describe, zk_rates

ITEMS_PER_PAGE = 25
ITEM_FIELDS_SHOWN = ("fetched_at", "status", "title", "url")
USAGE_FIELDS = ("cpu_percent", "rss_bytes", "pages", "items", "metrics")


class NoSuchCrawl(LookupError):
    """No crawl of that id: no record in Redis and no items in MongoDB."""


def fleet_view(manager: Any) -> dict[str, Any]:
    """Every worker of every host (with heartbeat age, CPU, memory, pages, items), the masters (the leader first),
    the managers, and the services' health."""
    settings = manager.config.settings
    redis = manager.redis
    now = RedisClock(redis).now()
    workers = fleet.workers(redis, settings.weight_window_minutes)
    pipe = redis.pipeline(transaction=False)
    for worker in workers:
        pipe.hmget(keys.worker(worker["job"]), *USAGE_FIELDS)
    for worker, values in zip(workers, pipe.execute() if workers else [], strict=True):
        usage = {name: as_text(value) if value is not None else None for name, value in zip(USAGE_FIELDS, values,
                                                                                                strict=True)}
        worker.update(cpu_percent=_float(usage["cpu_percent"]), rss_bytes=_int(usage["rss_bytes"]),
                      pages=_int(usage["pages"]), items=_int(usage["items"]), metrics=usage["metrics"])
        worker["heartbeat_age"] = None if worker["last_heartbeat"] is None else max(0.0, now - worker["last_heartbeat"])
        worker["alive"] = worker["heartbeat_age"] is not None and worker["heartbeat_age"] <= settings.heartbeat_ttl
    managers = {m.host: m.to_json() for m in ManagerRegistry(redis, manager.config.registry_ttl).live()}
    for worker in workers:
        owner = managers.get(worker["host"])
        worker["log_url"] = f"{owner['url']}/logview/job/{worker['job']}" if owner else None
    contenders = masters(manager.zk, SitePaths(settings.zk_root).election)
    return {"time": now, "workers": workers, "managers": list(managers.values()),
            "leader": contenders[0] if contenders else None, "standbys": contenders[1:],
            "services": services_health(manager)}


def registered_workers(manager: Any, exclude: set[str]) -> list[dict[str, Any]]:
    """Every worker in the registry but ``exclude`` (job, spider type, host), each with its log's page on its host's
    manager (None when that host runs no manager); the Jobs page's workers beyond this host's."""
    redis = manager.redis
    registry = WorkerRegistry(redis)
    infos = registry.infos(registry.live())
    urls = {m.host: m.url for m in ManagerRegistry(redis, manager.config.registry_ttl).live()}
    return [{"job": job, "spider_type": info.spider_type, "host": info.host,
             "log_url": f"{urls[info.host]}/logview/job/{job}" if info.host in urls else None}
            for job, info in sorted(infos.items()) if job not in exclude]


def services_health(manager: Any) -> list[dict[str, str]]:
    """Each service this manager depends on: reachable or not, and what was tried."""
    settings = manager.config.settings
    checks = [("Redis", settings.redis_url, lambda: manager.redis.ping()),
              ("ZooKeeper", settings.zk_hosts, lambda: _zk_ok(manager.zk)),
              ("Kafka", settings.kafka_bootstrap, lambda: _tcp(settings.kafka_bootstrap.split(",")[0], 9092)),
              ("MongoDB", _no_credentials(settings.mongo_uri), lambda: _tcp(_mongo_address(settings.mongo_uri),
                                                                             27017))]
    result = []
    for name, address, check in checks:
        try:
            check()
            result.append({"name": name, "address": address, "state": "up", "detail": ""})
        except Exception as exc:
            result.append({"name": name, "address": address, "state": "down", "detail": str(exc)[:200]})
    return result


def _zk_ok(zk: Any) -> None:
    if not zk.connected:
        raise ConnectionError(f"session {zk.state}")


def _tcp(address: str, default_port: int) -> None:
    parts = urlsplit(f"//{address.strip()}")
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or default_port), timeout=2):
        pass


def _mongo_address(uri: str) -> str:
    netloc = urlsplit(uri).netloc.rpartition("@")[2]
    return netloc.split(",")[0]


def _no_credentials(uri: str) -> str:
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"


def crawl_view(manager: Any, crawlid: str, page: int, reasons: list[str] | None = None) -> dict[str, Any]:
    """One crawl: its record, its place in the queues, its items' HTTP statuses, progress by minute, a page of its
    items, its failed URLs (of ``reasons``, or all: :func:`manager.failures.failures_view`), why it waits and whether it
    is stalled. :class:`NoSuchCrawl` when neither Redis nor MongoDB knows the id. A MongoDB that does not answer
    leaves the stored figures out (``mongo_error`` says why): the page must still say what Redis knows, a store
    refusing writes above all."""
    redis = manager.redis
    raw = {as_text(k): as_text(v) for k, v in redis.hgetall(keys.crawl(crawlid)).items()}
    try:
        stored, mongo_error = _stored(manager.mongo_db(), crawlid, bool(raw), max(1, page)), None
    except PyMongoError as exc:
        stored, mongo_error = {"stored": None, "statuses": {}, "progress": [], "items": []}, \
            f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    if not raw and not stored["stored"]:
        if mongo_error:
            raise NoSuchCrawl(f"{crawlid} (MongoDB does not answer: {mongo_error})")
        raise NoSuchCrawl(crawlid)
    row = next((c for c in fleet.crawls(redis) if c["crawlid"] == crawlid), None)
    waits = waiting(manager, crawlid)
    stall = stall_of(redis, crawlid, waits, manager.config.settings.stall_show_after) \
        if raw.get(CrawlFields.STATE) == CrawlState.RUNNING else None
    items = stored["items"]
    workers, scrapy_stats = summed_scrapy_stats(redis, crawlid)
    return {
        "crawlid": crawlid, "record": raw, "row": row, **stored, "mongo_error": mongo_error,
        "waiting": waits, "stalled": stall, "scrapy_workers": workers, "scrapy_stats": scrapy_stats,
        "reasons": reason_rows(redis, crawlid, raw.get(CrawlFields.STATE) == "stopped"),
        "item_page": max(1, page), "item_pages": max(1, -(-(stored["stored"] or 0) // ITEMS_PER_PAGE)),
        "columns": _columns(items),
        "failures": _failures(manager, crawlid, reasons or [], mongo_error is None),
        "paused_since": _float(raw.get(CrawlFields.PAUSED)), "retries": _int(raw.get(CrawlFields.RETRIES)) or 0,
    }


def _failures(manager: Any, crawlid: str, reasons: list[str], mongo_up: bool) -> dict[str, Any]:
    """:func:`manager.failures.failures_view`, or its counts without rows when MongoDB does not answer."""
    try:
        if mongo_up:
            return failures_view(manager, crawlid, reasons)
    except PyMongoError:
        pass
    return failures_view(manager, crawlid, reasons, limit=0)


def _stored(database: Any, crawlid: str, known: bool, page: int) -> dict[str, Any]:
    """What MongoDB holds of the crawl: the count, HTTP statuses, items per minute, a page of items."""
    collection = database[crawlid]
    stored = collection.estimated_document_count() if known or crawlid in database.list_collection_names(
        filter={"name": crawlid}) else 0
    statuses = {str(doc["_id"]): doc["count"] for doc in collection.aggregate(
        [{"$group": {"_id": "$status", "count": {"$sum": 1}}}, {"$sort": {"_id": 1}}])}
    progress = [(doc["_id"], doc["count"]) for doc in collection.aggregate([
        {"$group": {"_id": {"$substrBytes": [{"$ifNull": ["$fetched_at", ""]}, 0, 16]}, "count": {"$sum": 1}}},
        {"$sort": {"_id": 1}}]) if doc["_id"]]
    cursor = collection.find({}, {"_id": 0}).sort("fetched_at", -1).skip((page - 1) * ITEMS_PER_PAGE) \
        .limit(ITEMS_PER_PAGE)
    return {"stored": stored, "statuses": statuses, "progress": _cumulative(progress),
            "items": [dict(doc) for doc in cursor]}


def waiting(manager: Any, crawlid: str) -> list[dict[str, Any]]:
    """Why the crawl's tasks are not being fetched right now (:mod:`messaging.waits`), each with a line for people."""
    rates = zk_rates(manager.zk, SitePaths(manager.config.settings.zk_root))
    return [{**wait, "text": describe(wait)} for wait in crawl_waits(manager.redis, crawlid, rates)]


def summed_scrapy_stats(redis: Any, crawlid: str) -> tuple[int, list[tuple[str, float]]]:
    """A crawl of one's own spider: how many workers wrote their Scrapy stats, and each numeric stat over them
    (``crawl:<id>:scrapystats``, written by each worker's metrics extension): summed, but the greatest of a stat
    Scrapy keeps with ``max_value`` (:func:`is_max_stat`: ``request_depth_max``, ``memusage/max``, the elapsed time)."""
    totals: dict[str, float] = {}
    written = redis.hgetall(keys.crawl_scrapy_stats(crawlid)) or {}
    for raw in written.values():
        try:
            stats = json.loads(raw)
        except ValueError:
            continue
        for name, value in stats.items() if isinstance(stats, dict) else ():
            if isinstance(value, int | float) and not isinstance(value, bool):
                before = totals.get(name)
                totals[name] = value if before is None else max(before, value) if is_max_stat(name) else before + value
    return len(written), sorted((name, round(value, 3)) for name, value in totals.items())


def is_max_stat(name: str) -> bool:
    """A Scrapy stat whose crawl-wide value is the greatest of its workers', not their sum: one kept with
    ``max_value`` (``request_depth_max``, ``memusage/max``, ``…_max``), a time span, a start-up figure."""
    return name.endswith(("_max", "/max", "elapsed_time_seconds", "/startup"))


def reason_rows(redis: Any, crawlid: str, stopped: bool = False) -> list[dict[str, Any]]:
    """The crawl page's breakdown of pages and items left out, by reason: ``robots`` (tasks robots.txt disallows,
    dropped unfetched), ``noindex`` (pages whose robots directives kept their items out), ``dropped`` (items the
    pipelines dropped), ``errors`` (failed pages: HTTP error statuses, download errors), each group followed by its
    detailed reasons. Pages come from the crawl's exact counts (:mod:`messaging.counts`); dropped items and spider
    errors from the workers' tally of what happened (``crawl:<id>:reasons``, written with each registration)."""
    counts = read_counts(redis, crawlid)
    failures = dict(counts.failures)
    left_out = {reason: failures.pop(reason, 0) for reason in (ROBOTS, NOINDEX, BLACKLISTED)}
    tallied = {as_text(k): int(v) for k, v in redis.hgetall(keys.crawl_reasons(crawlid)).items()}
    dropped = {reason: n for reason, n in sorted(tallied.items()) if reason.startswith("dropped:")}
    spider_errors = {reason: n for reason, n in sorted(tallied.items()) if reason.startswith("spider error:")}
    rows = [_reason_row(ROBOTS, "tasks robots.txt disallows (not fetched)", left_out[ROBOTS]),
            _reason_row(NOINDEX, "pages not stored: their robots directives say noindex", left_out[NOINDEX])]
    if left_out[BLACKLISTED]:
        rows.append(_reason_row(BLACKLISTED, "tasks of a blacklisted domain (not fetched)", left_out[BLACKLISTED]))
    rows.append(_reason_row("dropped", "items dropped by the pipelines", sum(dropped.values())))
    rows += [_reason_row(reason, "", n, detail=True) for reason, n in dropped.items()]
    rows.append(_reason_row("errors", "failed pages (HTTP errors, download errors)", sum(failures.values())))
    rows += [_reason_row(reason, "", n, detail=True) for reason, n in sorted(failures.items())]
    rows += [_reason_row(reason, "", n, detail=True) for reason, n in spider_errors.items()]
    if counts.start_failure:
        rows.append(_reason_row("start URL failed", counts.start_failure, 1))
    rows += [_reason_row("restored", "pages processed again after a fault (counted once)", counts.restored),
             _reason_row("retried", "pages processed again by a retry of the failed URLs", counts.retried),
             _reason_row("dead letters", "tasks that could not be placed",
                         int(redis.hget(keys.DEAD_LETTER_COUNTS, crawlid) or 0)),
             _reason_row("stopped", "stopped by an operator", int(stopped))]
    return rows


def _reason_row(reason: str, meaning: str, count: int, detail: bool = False) -> dict[str, Any]:
    return {"reason": reason, "meaning": meaning, "count": int(count), "detail": detail}


def _cumulative(per_minute: list[tuple[str, int]], now: datetime | None = None) -> list[dict[str, Any]]:
    """Items per minute and in total; the current minute, not over yet, is marked ``partial`` (the chart draws it
    apart: a full minute's line would dip to it)."""
    current = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M")  # fetched_at is UTC, to the second
    total = 0
    points = []
    for minute, count in per_minute:
        total += count
        points.append({"minute": minute, "items": count, "total": total, "partial": minute >= current})
    return points


def _columns(items: list[dict[str, Any]]) -> list[str]:
    present = {name for item in items for name in item}
    return [name for name in ITEM_FIELDS_SHOWN if name in present]


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _int(value: str | None) -> int | None:
    number = _float(value)
    return None if number is None else int(number)
