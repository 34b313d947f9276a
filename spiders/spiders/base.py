"""What the fleet's spiders share: a task becomes a request, a response becomes items and child links.

A fleet spider never starts from ``start()`` (Scrapy 2.19 calls only that; it yields nothing here): its work is the
tasks the scheduler leases from this job's queues (:mod:`spiders.worker.scheduler`). For each task the scheduler asks
:meth:`FleetSpider.request_for`; the response comes back to :meth:`FleetSpider.parse_task`, which applies the crawl's
rule (read once per crawl from ``crawl:<crawlid>`` by the worker, asked of it with :meth:`FleetSpider.crawl_for`;
built once per crawl here) and yields

- items: the rule's fields plus what every item carries (``url``, ``crawlid``, ``spider_type``, ``job`` — the
  worker's job id, set by the scheduler —, ``fetched_at``, ``status``, ``encoding``, ``etag``, ``last_modified``,
  ``depth``, ``referer``; ``_html`` on content pages for the main-text extraction, ``_outputs`` (the rule's
  ``outputs``) when the rule chooses them, ``_required`` for the clean pipeline);
- requests for the links to follow, which :class:`spiders.worker.output.TaskOutputMiddleware` turns into child tasks.

A rule that fails on a page (an XPath error at run time, a rule that cannot be built) is logged and counted in the
crawler stats (``fleet/rule_errors``), never a crash.

What the page tells robots (:mod:`spiders.robots_meta`, unless the crawl's rule says ``"ignore_robots_meta": true``):
``noindex`` drops its items, ``nofollow`` its links, ``noarchive`` is recorded in each item's ``robots_meta``; the
pages and links left out are counted in the crawler stats (``fleet/robots_meta/noindex``, ``.../nofollow``,
``.../rel_nofollow``) and in the cluster's counters (``stats:crawler:robots_noindex`` ...); a noindex page is
also counted in its crawl's exact counts with reason ``noindex`` (:mod:`messaging.counts`, by the task tracker).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

import scrapy
from scrapy import Request
from scrapy.http import Response
from scrapy.http.request import CookiesT

from frontier.robots_rules import product_token
from messaging.bounded import BoundedDict
from messaging.regexes import install_exslt_functions
from messaging.tasks import Task
from spiders.fleet_settings import crawlfleet_settings
from spiders.middlewares.conditional import unchanged
from spiders.pipelines import cluster_counters
from spiders.render.modes import render_mode
from spiders.robots_meta import NOINDEX_META, robots_meta
from spiders.rules import PageResult
from spiders.worker.crawls import CrawlInfo
from spiders.xpaths import bound_library_xpaths

logger = logging.getLogger(__name__)
MAX_RULES = 1024  # built rules kept per process


class FleetSpider(scrapy.Spider):
    name = ""
    fleet_rules = True  # a rule spider: it makes the requests of tasks itself (spiders.worker.own.runs_rules)

    @property
    def spider_type(self) -> str:
        return self.name

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rules: BoundedDict[str, Any] = BoundedDict(MAX_RULES, memo="rules")  # least recently built first
        install_exslt_functions()  # XPath's re:test / re:match / re:replace run in RE2, as the rules' regexes do
        bound_library_xpaths()  # which makes every evaluation log a message: the libraries' evaluators bounded too

    async def start(self) -> AsyncIterator[Any]:
        """Nothing: tasks come from Redis through the scheduler."""
        return
        yield  # an async generator that yields nothing

    def crawl_for(self, task: Task) -> CrawlInfo | None:
        """The crawl ``task`` belongs to (its rule, limits and state), as the worker read it: asked of the crawler's
        scheduler (``FleetScheduler.crawl_for``); ``None`` when the crawl is unknown, or outside a fleet worker. A
        spider run otherwise (one process, no Redis) overrides this."""
        crawl_for = getattr(self._scheduler(), "crawl_for", None)
        return crawl_for(task.crawlid) if crawl_for is not None else None

    @property
    def fleet_job(self) -> str | None:
        """The job id of the worker that runs this spider (every item carries it: the manager's items of a job), as
        its scheduler knows it (``FleetScheduler.job``); ``None`` outside a fleet worker."""
        return getattr(self._scheduler(), "job", None)

    def _scheduler(self) -> Any:
        """The crawler's scheduler (Scrapy's ``crawler.engine.scheduler``), if the spider runs in a crawler."""
        return getattr(getattr(getattr(self, "crawler", None), "engine", None), "scheduler", None)

    # --- task -> request ------------------------------------------------------------------------------------------
    def request_for(self, task: Task, crawl: CrawlInfo | None) -> Request | None:
        rule = self.rule_for(crawl)
        if rule is None:
            return None
        url = self.url_for(task, rule)
        # a copy per request (Scrapy's cookie types are wider than the crawl's names and values)
        cookies: CookiesT | None = dict(crawl.cookie.items()) if crawl and crawl.cookie else None
        return Request(url, callback=self.parse_task, priority=task.priority, dont_filter=True, cookies=cookies)

    def url_for(self, task: Task, rule: Any) -> str:
        return task.url

    def render_mode(self, task: Task, crawl: CrawlInfo | None) -> str:
        """The rule's ``render`` for this task's page (``spiders.render``): never, always or auto."""
        return render_mode(crawl.rule if crawl is not None else None)

    def rule_for(self, crawl: CrawlInfo | None) -> Any:
        """The crawl's rule object, built once; ``None`` (logged) when the crawl or its rule cannot be used."""
        if crawl is None or not crawl.rule:
            return None
        rule = self._rules.get(crawl.crawlid)
        if rule is None:
            try:
                rule = self.build_rule(crawl)
            except Exception as exc:  # a rule that passed the schema but cannot be built (e.g. a bad XPath)
                logger.error("crawl %s: its rule cannot be used: %s", crawl.crawlid, exc)
                self._count("fleet/rule_errors")
                return None
            self._rules[crawl.crawlid] = rule
        return rule

    def build_rule(self, crawl: CrawlInfo) -> Any:
        raise NotImplementedError

    def apply(self, rule: Any, response: Response, task: Task) -> tuple[PageResult, bool]:
        """The rule's result for the response, and whether its items are content pages (main text wanted)."""
        raise NotImplementedError

    # --- response -> items and links ------------------------------------------------------------------------------
    def parse_task(self, response: Response) -> Iterator[Any]:
        task: Task = response.meta["task"]
        if unchanged(response):  # a revisit found the page as it was (304 or the same main text): nothing new
            return
        crawl = self.crawl_for(task)
        rule = self.rule_for(crawl)
        if rule is None:
            return
        result, content = self.apply(rule, response, task)
        for error in result.errors:
            logger.warning("crawl %s, %s: %s", task.crawlid, response.url, error)
            self._count("fleet/rule_errors")
        recorded = self._obey_robots_meta(rule, response, result)
        for link in result.links:
            try:
                yield Request(link.url, meta={"fleet_callback": link.callback, "fleet_meta": link.meta})
            except ValueError as exc:  # a link the page gives that is no URL
                logger.debug("skipped link %r: %s", link.url, exc)
        outputs = crawl.rule.get("outputs") if content and crawl is not None else None
        for fields in result.items:
            item = self.item(response, task, fields, getattr(rule, "required", ()), content)
            if recorded:
                item["robots_meta"] = recorded
            if outputs is not None:  # the crawl's choice of extracted fields (text, markdown, metadata)
                item["_outputs"] = list(outputs)
            yield item

    def _obey_robots_meta(self, rule: Any, response: Response, result: PageResult) -> list[str]:
        """Drop what the page's robots directives forbid (counted); returns the directives an item records."""
        if getattr(rule, "ignore_robots_meta", False):
            return []
        if result.nofollow:
            self._count_meta("rel_nofollow", result.nofollow)
        meta = robots_meta(response, self.robots_token)
        if meta.nofollow and result.links:
            self._count_meta("nofollow")
            result.links = []
        if meta.noindex and result.items:
            logger.debug("%s says noindex: %d item(s) not stored", response.url, len(result.items))
            self._count_meta("noindex")
            response.meta[NOINDEX_META] = True  # the task tracker counts the page with reason noindex
            result.items = []
        return meta.recorded

    @cached_property
    def robots_token(self) -> str:
        crawler = getattr(self, "crawler", None)
        settings = crawlfleet_settings(crawler.settings if crawler is not None else None)
        return product_token(settings.robotstxt_user_agent)

    def _count_meta(self, what: str, n: int = 1) -> None:
        self._count(f"fleet/robots_meta/{what}", n)
        if getattr(self, "crawler", None) is not None:
            cluster_counters(self.crawler).incr(f"robots_{what}", n)

    def item(self, response: Response, task: Task, fields: dict[str, Any], required: Any,
             content: bool) -> dict[str, Any]:
        headers = response.headers
        item: dict[str, Any] = dict(fields)
        item.update({
            "url": response.url,
            "crawlid": task.crawlid,
            "spider_type": task.spider_type,
            "job": self.fleet_job,
            "fetched_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "status": response.status,
            "encoding": response.meta.get("page_encoding") or getattr(response, "encoding", None),
            "etag": _header(headers, b"ETag"),
            "last_modified": _header(headers, b"Last-Modified"),
            "depth": task.depth,
            "referer": task.referer or None,
            "_required": list(required),
        })
        if content and hasattr(response, "text"):
            item["_html"] = response.text
        revisit = response.meta.get("revisit")
        if revisit:  # a revisiting crawl's page: the MongoDB pipeline updates its document (changed_at, versions)
            item["_revisit"] = {"digest": revisit.get("digest"), "previous_digest": revisit.get("previous_digest"),
                                "changed": revisit.get("outcome") in ("changed", "fetched")}
        return item

    def _count(self, key: str, n: int = 1) -> None:
        crawler = getattr(self, "crawler", None)  # a spider made without a crawler (tests) counts nothing
        if crawler is not None and crawler.stats is not None:
            crawler.stats.inc_value(key, n)


def _header(headers: Any, name: bytes) -> str | None:
    value = headers.get(name)
    return value.decode("latin-1") if value else None
