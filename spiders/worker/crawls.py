"""What a worker knows of each crawl: its rule, limits, cookies and state, read from ``crawl:<crawlid>``.

The rule is stored once per crawl (docs/architecture.md, step 2), not in every task, so a worker reads it the first time
it meets the crawl and keeps it. The state (running, paused, stopped, finished) and the limits are read again after
CRAWLFLEET_CRAWL_REFRESH seconds, so that a stop or a pause reaches every worker within that time (at once, when the
worker hears it on ``crawls:states``: :meth:`CrawlCatalog.load` with ``force``).

Reads are blocking Redis calls: only the worker's feed thread calls :meth:`CrawlCatalog.load`; the reactor thread
only calls :meth:`CrawlCatalog.get`, which answers from memory.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from messaging import keys
from messaging.bounded import count_evictions, declare_memo
from messaging.clients import RedisClient, as_text
from messaging.domains import PARTITIONS
from messaging.tasks import CrawlFields, CrawlState

logger = logging.getLogger(__name__)
MAX_CRAWLS = 4096  # crawls remembered by one worker; the least recently loaded are forgotten first
MEMO = "crawls"  # its evictions, counted in messaging.bounded.EVICTIONS
MUTABLE_FIELDS = [CrawlFields.STATE, CrawlFields.MAXDEPTH, CrawlFields.MAX_PAGES, CrawlFields.DOMAIN_MAX_PAGES,
                  CrawlFields.PAUSED]


@dataclass(frozen=True)
class CrawlInfo:
    crawlid: str
    spider_type: str = ""
    rule: dict[str, Any] = field(default_factory=dict)
    url: str = ""  # the start URL
    userid: str = ""
    maxdepth: int | None = None
    max_pages: int | None = None
    domain_max_pages: int | None = None
    cookie: dict[str, str] = field(default_factory=dict)
    state: str = ""  # "" when the crawl hash does not exist (expired, or never written)
    paused_since: float | None = None  # Redis time it was paused, while it is (messaging.pause)
    loaded_at: float = 0.0  # this process's monotonic clock
    # a crawl of one's own Scrapy spider (issue 35): project, spider, its arguments and settings, pinned egg
    project: str = ""
    spider: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    version: str = ""
    sha256: str = ""
    priority: int | None = None

    @property
    def own(self) -> bool:
        """A crawl of one's own Scrapy spider (no rule)."""
        return bool(self.spider)

    @property
    def exists(self) -> bool:
        return bool(self.state)

    @property
    def running(self) -> bool:
        return self.state == CrawlState.RUNNING

    @property
    def paused(self) -> bool:
        """Nothing of it is fetched: its tasks are handed back and parked (``spiders.worker.pausing``)."""
        return self.state == CrawlState.PAUSED

    @property
    def live(self) -> bool:
        """Running or paused: its pages' children and revisits are kept (a stopped or finished crawl's are not)."""
        return self.state in (CrawlState.RUNNING, CrawlState.PAUSED)

    @property
    def partition(self) -> str | None:
        """The rule's queue partition (``host``, ``domain``, ``ip``), None when the rule leaves it to the fleet."""
        value = self.rule.get("partition")
        return value if value in PARTITIONS else None

    @classmethod
    def from_hash(cls, crawlid: str, data: dict[Any, Any], loaded_at: float) -> CrawlInfo:
        text = {as_text(k): as_text(v) for k, v in data.items()}
        return cls(
            crawlid=crawlid,
            spider_type=text.get(CrawlFields.SPIDER_TYPE, ""),
            rule=_json_object(text.get(CrawlFields.RULE), crawlid, "rule"),
            url=text.get(CrawlFields.URL, ""),
            userid=text.get(CrawlFields.USERID, ""),
            maxdepth=_int(text.get(CrawlFields.MAXDEPTH)),
            max_pages=_int(text.get(CrawlFields.MAX_PAGES)),
            domain_max_pages=_int(text.get(CrawlFields.DOMAIN_MAX_PAGES)),
            cookie={str(k): str(v) for k, v in _json_object(text.get(CrawlFields.COOKIE), crawlid, "cookie").items()},
            state=text.get(CrawlFields.STATE, ""),
            paused_since=_float(text.get(CrawlFields.PAUSED)),
            loaded_at=loaded_at,
            project=text.get(CrawlFields.PROJECT, ""),
            spider=text.get(CrawlFields.SPIDER, ""),
            args=_json_object(text.get(CrawlFields.ARGS), crawlid, "args"),
            settings=_json_object(text.get(CrawlFields.SETTINGS), crawlid, "settings"),
            version=text.get(CrawlFields.VERSION, ""),
            sha256=text.get(CrawlFields.SHA256, ""),
            priority=_int(text.get(CrawlFields.PRIORITY)),
        )


class CrawlCatalog:
    """The crawls this worker has met (see the module docstring)."""

    def __init__(self, redis: RedisClient, refresh_seconds: float = 2.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.redis = redis
        self.refresh_seconds = refresh_seconds
        self.clock = clock
        self._crawls: dict[str, CrawlInfo] = {}
        declare_memo(MEMO)
        self._lock = threading.Lock()

    def get(self, crawlid: str) -> CrawlInfo | None:
        """The crawl as last read (never touches Redis)."""
        return self._crawls.get(crawlid)

    def stale(self, crawlids: Iterable[str]) -> list[str]:
        now = self.clock()
        return [c for c in set(crawlids)
                if (info := self._crawls.get(c)) is None or now - info.loaded_at >= self.refresh_seconds]

    def load(self, crawlids: Iterable[str], force: bool = False) -> dict[str, CrawlInfo]:
        """Read the given crawls that are unknown or stale (all of them with ``force``) in one round trip."""
        wanted = sorted(set(crawlids)) if force else sorted(self.stale(crawlids))
        if wanted:
            # a crawl already known only has its state and limits read again: its rule does not change
            known = {crawlid: self._crawls[crawlid] for crawlid in wanted
                     if crawlid in self._crawls and (self._crawls[crawlid].rule or self._crawls[crawlid].own)}
            pipe = self.redis.pipeline(transaction=False)
            for crawlid in wanted:
                if crawlid in known:
                    pipe.hmget(keys.crawl(crawlid), MUTABLE_FIELDS)
                else:
                    pipe.hgetall(keys.crawl(crawlid))
            now = self.clock()
            fresh = {}
            for crawlid, data in zip(wanted, pipe.execute(), strict=True):
                if crawlid in known:
                    values = dict(zip(MUTABLE_FIELDS, (as_text(v) if v is not None else None for v in data),
                                      strict=True))
                    fresh[crawlid] = replace(
                        known[crawlid], state=values[CrawlFields.STATE] or "", loaded_at=now,
                        maxdepth=_int(values[CrawlFields.MAXDEPTH]), max_pages=_int(values[CrawlFields.MAX_PAGES]),
                        domain_max_pages=_int(values[CrawlFields.DOMAIN_MAX_PAGES]),
                        paused_since=_float(values[CrawlFields.PAUSED]))
                else:
                    fresh[crawlid] = CrawlInfo.from_hash(crawlid, data or {}, now)
            with self._lock:
                crawls = {**self._crawls, **fresh}
                if len(crawls) > MAX_CRAWLS:
                    oldest = sorted(crawls.values(), key=lambda info: info.loaded_at)[:len(crawls) - MAX_CRAWLS]
                    for info in oldest:
                        crawls.pop(info.crawlid, None)
                    count_evictions(MEMO, len(oldest))
                self._crawls = crawls  # replaced, never mutated: readers on the reactor thread need no lock
        return {crawlid: self._crawls[crawlid] for crawlid in set(crawlids) if crawlid in self._crawls}

    def refresh_known(self) -> None:
        """Re-read every stale crawl this worker knows (stops and limits reach it within the refresh time)."""
        self.load(list(self._crawls))

    def paused(self) -> set[str]:
        """The crawls this worker knows as paused, as last read."""
        return {crawlid for crawlid, info in self._crawls.items() if info.paused}


def _int(value: str | None) -> int | None:
    return int(value) if value not in (None, "") else None


def _float(value: str | None) -> float | None:
    return float(value) if value not in (None, "") else None


def _json_object(raw: str | None, crawlid: str, what: str) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        logger.error("crawl %s: unreadable %s in Redis", crawlid, what)
        return {}
    return value if isinstance(value, dict) else {}
