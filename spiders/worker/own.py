"""A worker of one's own Scrapy spider (issue 35): its spider type, the crawl it serves, and its requests as tasks.

A rule spider's worker (``list``, ``universal``: :class:`spiders.spiders.base.FleetSpider`) serves every crawl of
its type; a worker of any other spider serves **one crawl**, because the spider's arguments, its settings and the
egg version it runs are the crawl's. So:

- **its spider type** is ``<project>.<spider>`` (:func:`spider_type_of`): CRAWLFLEET_PROJECT, else the deployed
  project's name (``python -m spiders.runner --project`` sets CRAWLFLEET_PROJECT), else the project's BOT_NAME.
  Politeness per spider type, the registry, the metrics and the ready gauge use it as they use ``list``;
- **its crawl** (:func:`join_crawl`) is CRAWLFLEET_CRAWL (the manager's job id; a crawl that does not exist yet is
  begun with this worker's spider), else the running crawl of its spider type (``spidercrawl:<type>``), begun by
  the first worker when none runs — so ``scrapy crawl S`` on many hosts joins one crawl, as scrapy-redis's workers
  share one queue. A crawl of another spider is refused with the reason; one that has ended closes the spider at
  once (``CloseSpider``: reason ``finished`` or ``cancelled``, exit status 0), as a worker that came late. The worker
  registers the crawl id with its type, and the dispatcher sends that crawl's tasks to its workers only
  (``master.dispatcher.pool_of``);
- **its requests are tasks** (:class:`Traveller`: :func:`spiders.travel.pack` and ``unpack``, the project's request
  fingerprint, the refusals logged and counted).
"""

from __future__ import annotations

import logging
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrapy import Request
from scrapy.exceptions import CloseSpider

from messaging import clients, keys
from messaging.clients import as_text
from messaging.own_crawls import create_crawl, own_crawl_fields, own_spider_type
from messaging.scripts import lua_script
from messaging.settings import Settings
from messaging.tasks import DEFAULT_PRIORITY, CrawlFields, CrawlState, Task
from spiders.travel import CannotTravel, Packed, fingerprint, pack, unpack
from spiders.worker.crawls import CrawlCatalog, CrawlInfo

logger = logging.getLogger(__name__)
LUA = Path(__file__).with_name("lua")
JOIN = lua_script(LUA / "crawl_join.lua")  # compare-and-set of the spider type's current crawl
SPIDER_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}\Z")


class CrawlRefused(RuntimeError):
    """The worker cannot serve the crawl it was given (another spider's, ended, …); the message says why."""


def runs_rules(spider: Any) -> bool:
    """Whether ``spider`` is one of the fleet's rule spiders (it makes requests from tasks itself)."""
    return bool(getattr(spider, "fleet_rules", False))


def project_of(scrapy_settings: Any, settings: Settings) -> str:
    return settings.project or os.environ.get("CRAWLFLEET_PROJECT", "") or str(scrapy_settings.get("BOT_NAME") or "")


def spider_type_of(spider: Any, scrapy_settings: Any, settings: Settings) -> str:
    """A worker's spider type: a rule spider's name, else ``<project>.<spider>`` (ValueError when it cannot be one:
    it names Redis keys and metric labels)."""
    if runs_rules(spider):
        return str(getattr(spider, "spider_type", spider.name))
    name = own_spider_type(project_of(scrapy_settings, settings), spider.name)
    if not SPIDER_TYPE.match(name):
        raise ValueError(f"spider type {name!r} (<project>.<spider>) is not usable: letters, digits, '.', '_' and '-' "
                         "only (set CRAWLFLEET_PROJECT, or rename the spider)")
    return name


def current_crawl(redis: Any, spider_type: str) -> str:
    """The running (or paused) crawl workers of ``spider_type`` started without a crawl id join ("" when none)."""
    crawlid = as_text(redis.get(keys.spider_crawl(spider_type)) or b"")
    state = as_text(redis.hget(keys.crawl(crawlid), CrawlFields.STATE) or b"") if crawlid else ""
    if state in (CrawlState.RUNNING, CrawlState.PAUSED):
        return crawlid
    return ""


def join_crawl(redis: Any, catalog: CrawlCatalog, settings: Settings, spider_type: str, project: str,
               spider: str) -> CrawlInfo:
    """The crawl this worker serves (blocking): see the module docstring. :class:`CrawlRefused` with the reason."""
    crawlid = settings.crawl
    if not crawlid:
        read = as_text(redis.get(keys.spider_crawl(spider_type)) or b"")
        crawlid = current_crawl(redis, spider_type)
        if not crawlid:
            proposal = f"{spider_type}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
            crawlid = as_text(JOIN.on(redis)(keys=[keys.spider_crawl(spider_type)], args=[read, proposal]))
    if create_crawl(redis, crawlid, own_crawl_fields(project, spider, "scrapy")):
        logger.info("began crawl %s of %s", crawlid, spider_type)
    crawl = catalog.load([crawlid], force=True)[crawlid]
    if crawl.spider_type != spider_type:
        raise CrawlRefused(f"crawl {crawlid!r} is a crawl of {crawl.spider_type or 'no spider'!r}, not of "
                           f"{spider_type!r}: a worker serves its own spider's crawls only")
    if crawl.state in (CrawlState.FINISHED, CrawlState.STOPPED):  # joined late: the spider closes as done
        logger.info("crawl %s is %s: nothing to do", crawlid, crawl.state)
        raise CloseSpider("finished" if crawl.state == CrawlState.FINISHED else "cancelled")
    if not crawl.live:  # a paused crawl is joined: its tasks wait parked until it is resumed
        raise CrawlRefused(f"crawl {crawlid!r} is {crawl.state or 'unknown'}: nothing to do")
    return crawl


def crawl_to_apply(redis: Any, settings: Settings, spider_type: str) -> CrawlInfo | None:
    """The existing crawl a starting worker will serve, if it can be told now (for its arguments and settings)."""
    crawlid = settings.crawl or current_crawl(redis, spider_type)
    if not crawlid:
        return None
    data = redis.hgetall(keys.crawl(crawlid))
    return CrawlInfo.from_hash(crawlid, data, 0.0) if data else None


def apply_crawl(crawler: Any, scrapy_settings: Any) -> None:
    """A worker joining a crawl that names settings and arguments (a Kafka crawl request's, the manager's) runs with
    them: the settings at the command line's priority (the crawl decides), the arguments as the spider's attributes
    (as ``scrapy.Spider.__init__`` sets them). Called by the add-on while the crawler is being set up (blocking;
    before the reactor runs). A spider that computes from its arguments in ``__init__`` must be started with them
    (``-a``), which the manager does."""
    spider = getattr(crawler, "spider", None)
    if spider is None:
        return
    from spiders.fleet_settings import crawlfleet_settings

    settings = crawlfleet_settings(scrapy_settings)
    try:
        redis = clients.redis_client(settings)
        try:
            crawl = crawl_to_apply(redis, settings, spider_type_of(spider, scrapy_settings, settings))
        finally:
            redis.close()
    except Exception as exc:  # Redis away or a bad name: the worker's start says so with the reason
        logger.warning("could not read the crawl to join: %s", exc)
        return
    if crawl is None or crawl.spider_type != own_spider_type(project_of(scrapy_settings, settings), spider.name):
        return
    for name, value in crawl.settings.items():
        if scrapy_settings.get(name) != value:
            logger.info("crawl %s sets %s=%r", crawl.crawlid, name, value)
        scrapy_settings.set(name, value, "cmdline")
    for name, value in crawl.args.items():
        if getattr(spider, name, None) != value:
            logger.info("crawl %s gives the spider %s=%r", crawl.crawlid, name, value)
            setattr(spider, name, value)


@dataclass
class Traveller:
    """A worker's requests as tasks of its crawl, and back (:mod:`spiders.travel`)."""

    spider: Any
    fingerprinter: Any  # the crawler's request fingerprinter (the project's REQUEST_FINGERPRINTER_CLASS)
    crawl: CrawlInfo
    max_bytes: int
    stats: Any = None

    def fingerprint(self, request: Request) -> bytes:
        return fingerprint(self.fingerprinter, request)

    def task(self, request: Request, parent: Task | None = None) -> Task:
        """The task of a request the spider yielded on ``parent``'s page (``None``: a start request);
        :class:`~spiders.travel.CannotTravel` when it cannot travel."""
        packed: Packed = pack(request, self.spider, self.fingerprinter, self.max_bytes)
        crawl = self.crawl
        if parent is None:
            return Task(url=packed.url, crawlid=crawl.crawlid, spider_type=crawl.spider_type, userid=crawl.userid,
                        priority=crawl.priority if crawl.priority is not None else DEFAULT_PRIORITY,
                        depth=packed.depth or 0, callback=packed.callback, meta=packed.meta, request=packed.request)
        return Task(url=packed.url, crawlid=parent.crawlid, spider_type=parent.spider_type, userid=parent.userid,
                    priority=parent.priority, depth=packed.depth if packed.depth is not None else parent.depth + 1,
                    callback=packed.callback, referer=parent.url, meta=packed.meta, request=packed.request)

    def refuse(self, request: Request, problem: CannotTravel, where: str) -> tuple[str, str]:
        """Say why ``request`` cannot travel (the job's log, its stats); the (fingerprint, reason) to count."""
        logger.warning("refused %s %s yielded %s: %s", request.method, request.url, where, problem)
        if self.stats is not None:
            self.stats.inc_value(f"fleet/request/refused/{problem.what}")
        try:
            fp = self.fingerprint(request).hex()
        except Exception:  # a fingerprinter that fails on it: count it under its URL's digest
            fp = uuid.uuid5(uuid.NAMESPACE_URL, request.url).hex
        return fp, problem.reason

    def request(self, task: Task) -> Request:
        """The leased task's Request again (ValueError: a callback or class this spider does not have)."""
        request = unpack(task.url, task.callback, task.meta, task.request, self.spider)
        if task.depth or task.referer:  # Scrapy's DepthMiddleware counts the children from it; a start request has
            request.meta["depth"] = task.depth  # none, so that its response counts as depth 0, as in plain Scrapy
        return request
