"""The proxy pool in MongoDB: one document per proxy in CRAWLFLEET_PROXY_COLLECTION (of CRAWLFLEET_MONGO_DB).

A document::

    {"_id": "1.2.3.4:8080", "host": "1.2.3.4", "port": 8080, "scheme": "http", "user": "", "password": "",
     "location": "...", "anonymity": "...", "type": "HTTP", "speed": "...", "alive_time": "...",   # seed table 4-7
     "source": "<list page URL>", "collected_at": <date>,                                          # the collector
     "alive": true, "failures": 0, "speed_seconds": 0.31, "last_success": <date>, "checked_at": <date>,
     "last_error": "..."}                                                                         # the validator

- The collector upserts by ``_id``: a proxy collected again gets the list's current figures and keeps what the
  validator learnt. A new proxy is not alive until the validator has checked it.
- The validator records each check: a success sets ``alive``, ``speed_seconds``, ``last_success`` and resets
  ``failures``; a failure clears ``alive`` and counts one. Workers count a failed request of a crawl too (without
  clearing ``alive``: another worker may do fine with it). A proxy whose failures since its last success reach
  CRAWLFLEET_PROXY_MAX_FAILURES is deleted (the delete is conditional on the count, so concurrent reporters agree).
- Every method blocks on MongoDB: Scrapy components call them from a thread, never on the reactor.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pymongo import UpdateOne

from messaging import clients
from messaging.settings import Settings, load
from spiders.proxies.model import LIST_FIELDS, Proxy, proxy_id, valid_host, valid_port

logger = logging.getLogger(__name__)


def utc_now() -> datetime:
    # MongoDB keeps milliseconds: a date read back equals the one written only when it has no microseconds.
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


@dataclass(frozen=True)
class CheckResult:
    """One validator check of one proxy."""

    proxy_id: str
    ok: bool
    seconds: float | None = None  # how long the fetch took (success only)
    error: str = ""


def document_from_entry(entry: Mapping[str, Any], source: str = "") -> dict[str, Any] | None:
    """The pool document of one list entry (the collector's item), or None when it names no usable proxy."""
    host, port = valid_host(entry.get("ip")), valid_port(entry.get("port"))
    if host is None or port is None:
        return None
    # Scrapy speaks HTTP to every proxy (a list's "HTTPS" proxy gets CONNECT for https URLs); a SOCKS-only proxy
    # fails its checks and leaves the pool.
    doc: dict[str, Any] = {"_id": proxy_id(host, port), "host": host, "port": port, "scheme": "http",
                           "user": str(entry.get("user") or ""), "password": str(entry.get("password") or ""),
                           "source": source or str(entry.get("source") or "")}
    for name in LIST_FIELDS:
        if entry.get(name) is not None:
            doc[name] = str(entry[name]).strip()
    return doc


class ProxyStore:
    def __init__(self, collection: Any, max_failures: int = 3, now: Callable[[], datetime] = utc_now) -> None:
        self.collection = collection
        self.max_failures = max_failures
        self.now = now

    @classmethod
    def from_settings(cls, settings: Settings | None = None, client: Any = None) -> ProxyStore:
        settings = settings if settings is not None else load()
        client = client if client is not None else clients.mongo_client(settings)
        collection = client[settings.mongo_db][settings["CRAWLFLEET_PROXY_COLLECTION"]]
        return cls(collection, settings["CRAWLFLEET_PROXY_MAX_FAILURES"])

    # --- collector ------------------------------------------------------------------------------------------------
    def upsert_collected(self, documents: Sequence[dict[str, Any]]) -> int:
        """Store collected proxies (``document_from_entry``) in one bulk call; returns how many were new."""
        if not documents:
            return 0
        now = self.now()
        operations = []
        for doc in documents:
            fields = {key: value for key, value in doc.items() if key != "_id"}
            fields["collected_at"] = now
            operations.append(UpdateOne({"_id": doc["_id"]},
                                        {"$set": fields, "$setOnInsert": {"alive": False, "failures": 0}},
                                        upsert=True))
        result = self.collection.bulk_write(operations, ordered=False)
        return int(result.upserted_count)

    # --- readers --------------------------------------------------------------------------------------------------
    def proxies(self, live_only: bool = False) -> list[Proxy]:
        """The pool's proxies (live ones only: alive at their last check), fastest first."""
        query = {"alive": True} if live_only else {}
        proxies = [Proxy.from_document(doc) for doc in self.collection.find(query)]
        return sorted(proxies, key=lambda p: (not p.alive, p.speed if p.speed is not None else float("inf"), p.id))

    def get(self, pid: str) -> Proxy | None:
        doc = self.collection.find_one({"_id": pid})
        return Proxy.from_document(doc) if doc else None

    # --- validator and workers ------------------------------------------------------------------------------------
    def record_checks(self, results: Iterable[CheckResult]) -> list[str]:
        """Record validator checks; returns the ids of the proxies that left the pool."""
        now = self.now()
        operations, failed = [], []
        for result in results:
            if result.ok:
                operations.append(UpdateOne({"_id": result.proxy_id}, {"$set": {
                    "alive": True, "failures": 0, "speed_seconds": result.seconds, "last_success": now,
                    "checked_at": now, "last_error": ""}}))
            else:
                failed.append(result.proxy_id)
                operations.append(UpdateOne({"_id": result.proxy_id}, {
                    "$set": {"alive": False, "checked_at": now, "last_error": result.error[:200]},
                    "$inc": {"failures": 1}}))
        if operations:
            self.collection.bulk_write(operations, ordered=False)
        return self._remove_failed(failed)

    def record_failures(self, failures: Mapping[str, tuple[int, str]]) -> list[str]:
        """Count failed requests of a crawl, ``{proxy_id: (count, last reason)}``; returns the ids removed."""
        if not failures:
            return []
        operations = [UpdateOne({"_id": pid}, {"$inc": {"failures": count}, "$set": {"last_error": reason[:200]}})
                      for pid, (count, reason) in failures.items()]
        self.collection.bulk_write(operations, ordered=False)
        return self._remove_failed(list(failures))

    def _remove_failed(self, ids: Sequence[str]) -> list[str]:
        removed = []
        for pid in ids:
            if self.collection.delete_one({"_id": pid, "failures": {"$gte": self.max_failures}}).deleted_count:
                removed.append(pid)
                logger.info("proxy %s left the pool after %d failures", pid, self.max_failures)
        return removed

    def remove(self, pid: str) -> bool:
        return bool(self.collection.delete_one({"_id": pid}).deleted_count)
