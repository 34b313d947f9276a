"""Which downloads are renders: ``DOWNLOADER_MIDDLEWARES = {"spiders.render.middleware.RenderMiddleware": 580}``.

For a task's request it reads the crawl rule's ``render`` (``spider.render_mode(task, crawl)``):

- ``never``: a static fetch, nothing else happens here;
- ``always``: the download is a render (``meta["fleet_render"]``, see :mod:`spiders.render.handler`);
- ``auto``: a static fetch first; its 200 HTML response is judged (:func:`spiders.render.detect.needs_render`, with
  the rule applied to it as the spider would); a page that lacks what the rule needs is replaced by the same request
  as a render, which the scheduler hands out at once as a follow-up of the same task (no second lease, no second
  throttle hit: the render is the page's download, the static fetch its first sub-request). The render's result is
  compared with the static one, and :class:`spiders.render.learn.SiteLearner` learns the site (a site learned as
  *browser* is rendered first thing).

Order 580: on the way in after the User-Agent (500) and before the proxy middleware (740), so the render has both; on
the way out after DecodeMiddleware (585) decoded the page, before RetryAfterMiddleware (560) and RetryMiddleware
(550), so a 429 or 500 is theirs (only a 200 HTML page is judged).

Counts: the crawler stats ``render/rendered``, ``render/static`` (pages of ``always``/``auto`` crawls),
``render/reason/<why>``, ``render/learned/<verdict>``; in the cluster's counters (``stats:crawler:<spider type>:
rendered|static:<window>``, where the HTTP statuses are counted, so ``crawlfleet stats`` shows the share).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.http import Response, TextResponse
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread

from messaging import modules
from messaging.clients import redis_client
from messaging.stats import BufferedStats, Stats
from spiders.fleet_settings import crawlfleet_settings
from spiders.render import detect
from spiders.render.handler import RENDER_META
from spiders.render.learn import NEEDED, STATIC, VAIN, SiteLearner
from spiders.render.modes import ALWAYS, AUTO, NEVER

logger = logging.getLogger(__name__)

Judged = tuple[detect.PageFacts, Any, tuple[str, ...], bool]  # page facts, rule result, required, content page
PROBE_META = "fleet_render_probe"  # an auto request's static fetch, to be judged
STATIC_OUTCOME_META = "fleet_render_static"  # what the static fetch gave, to judge the render by
REASON_META = "fleet_render_reason"


class RenderMiddleware:
    def __init__(self, crawler: Any, learner: SiteLearner, min_text: int, counters: BufferedStats | None) -> None:
        self.crawler = crawler
        self.learner = learner
        self.min_text = min_text
        self.counters = counters

    @classmethod
    def from_crawler(cls, crawler: Any) -> RenderMiddleware:
        s = crawlfleet_settings(crawler.settings)
        counters = BufferedStats(Stats(redis_client(s), modules.CRAWLER))
        middleware = cls(crawler, SiteLearner(s.render_learn_pages, s.render_recheck), s.render_min_text, counters)
        crawler.signals.connect(middleware.spider_closed, signal=signals.spider_closed)
        return middleware

    # --- on the way in --------------------------------------------------------------------------------------------
    def process_request(self, request: Request, spider: Any = None) -> None:
        if RENDER_META in request.meta or PROBE_META in request.meta:
            return None  # decided already (a retry, a redirect or the render of a probe)
        mode = self._mode(request)
        if mode == ALWAYS:
            request.meta[RENDER_META] = True
            request.meta[REASON_META] = "always"
        elif mode == AUTO:
            if self.learner.render_first(_site(request.url)):
                request.meta[RENDER_META] = True
                request.meta[REASON_META] = "learned"
            else:
                request.meta[PROBE_META] = True
        return None

    def _mode(self, request: Request) -> str:
        task = request.meta.get("task")
        crawl_for = getattr(self._spider(), "crawl_for", None)  # a fleet spider's (spiders.spiders.base)
        if task is None or crawl_for is None:
            return NEVER
        try:
            return self._spider().render_mode(task, crawl_for(task))
        except ValueError as exc:
            logger.error("crawl %s: %s; its pages are fetched statically", task.crawlid, exc)
            return NEVER

    # --- on the way out -------------------------------------------------------------------------------------------
    def process_response(self, request: Request, response: Response, spider: Any = None) -> Request | Response:
        if request.meta.get(RENDER_META):
            self._rendered(request, response)
            return response
        if not request.meta.get(PROBE_META):
            return response
        reason = self._judge_static(request, response)
        if reason:
            self._inc(f"render/reason/{reason}")
            meta = {**request.meta, RENDER_META: True, REASON_META: reason}
            return request.replace(meta=meta, dont_filter=True)
        self._count(request, "static")
        return response

    def _judge_static(self, request: Request, response: Response) -> str:
        """Why this static page must be rendered, or ``""`` (keep it); records what the site showed."""
        if response.status != 200 or not isinstance(response, TextResponse) or "html" not in _content_type(response):
            return ""
        judged = self._apply(request, response)
        if judged is None:
            return ""
        facts, result, required, content = judged
        site = _site(request.url)
        reason = detect.needs_render(facts, result, required, content, self.min_text)
        if not reason:
            self._learn(site, STATIC)
            return ""
        if not self.learner.may_render(site):
            self._inc("render/skipped_learned_static")
            return ""
        request.meta[STATIC_OUTCOME_META] = detect.outcome(facts, result, required)
        return reason

    def _rendered(self, request: Request, response: Response) -> None:
        self._count(request, "rendered")
        before = request.meta.get(STATIC_OUTCOME_META)
        if before is None or response.status != 200 or not isinstance(response, TextResponse):
            return
        judged = self._apply(request, response)
        if judged is not None:
            facts, result, required, _ = judged
            after = detect.outcome(facts, result, required)
            self._learn(_site(request.url), NEEDED if after.improves_on(before, self.min_text) else VAIN)

    def _apply(self, request: Request, response: Response) -> Judged | None:
        """The rule's result on the page, as the spider will compute it (None: no rule to judge by)."""
        spider = self._spider()
        task = request.meta.get("task")
        crawl_for = getattr(spider, "crawl_for", None)
        if task is None or crawl_for is None:
            return None
        rule = spider.rule_for(crawl_for(task))
        if rule is None:
            return None
        if response.request is None:  # tied to its request only later by the engine; the rule may read meta
            response = response.replace(request=request)
        try:
            result, content = spider.apply(rule, response, task)
        except Exception as exc:  # the spider will meet (and count) the same error: judge by the page alone
            logger.debug("judging %s: %s", response.url, exc)
            return None
        return detect.page_facts(response.text), result, tuple(getattr(rule, "required", ())), content

    # --- counts ---------------------------------------------------------------------------------------------------
    def _learn(self, site: str, verdict: str) -> None:
        self.learner.record(site, verdict)
        self._inc(f"render/learned/{verdict}")

    def _count(self, request: Request, how: str) -> None:
        self._inc(f"render/{how}")
        if self.counters is not None:
            spider_type = request.meta.get("spider_type") or getattr(self._spider(), "name", "unknown")
            self.counters.incr(f"{spider_type}:{how}")

    def _inc(self, key: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key)

    def _spider(self) -> Any:
        return self.crawler.spider

    async def spider_closed(self) -> None:
        if self.counters is not None:
            await maybe_deferred_to_future(deferToThread(self.counters.close))


def _site(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def _content_type(response: Response) -> str:
    return (response.headers.get(b"Content-Type") or b"text/html").decode("latin-1").lower()
