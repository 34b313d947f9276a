"""The ``proxy`` spider (seed ``ProxySpider``): collects proxies from proxy-list pages into the pool.

Not a fleet spider: it crawls a handful of configured pages once, with Scrapy's own scheduler and dupefilter, and
needs neither Redis nor the master. ``start()`` yields the list pages (CRAWLFLEET_PROXY_LIST_URLS, or the spider
argument ``urls``); each page is read with the rule (CRAWLFLEET_PROXY_LIST_RULE, or the argument ``rule``; see
:mod:`spiders.proxies.collect`), every entry becomes an item (with ``source``: the page it came from) that
:class:`~spiders.proxies.collect.ProxyStorePipeline` upserts into the pool, and ``next_page`` links are followed.
``crawlfleet proxies collect`` runs it::

    scrapy crawl proxy -a urls=https://lists.example/free/ -a rule=@proxy-rule.json
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import scrapy
from scrapy.http import Response

from spiders.proxies.collect import build_rule, load_rule

logger = logging.getLogger(__name__)


class ProxySpider(scrapy.Spider):
    name = "proxy"
    # Without the fleet's add-on (spiders.addon): Scrapy's own scheduler and dupefilter, none of the fleet's
    # middlewares and pipelines, which need the fleet's services; the pool's pipeline stores what the pages list.
    custom_settings = {
        "ADDONS": {"spiders.addon.FleetAddon": None},
        "ITEM_PIPELINES": {"spiders.proxies.collect.ProxyStorePipeline": 900},
        "ROBOTSTXT_OBEY": False,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 2,
        "DOWNLOAD_DELAY": 0.5,  # a list site is one site: fetch its pages gently
    }

    def __init__(self, urls: str | list[str] | None = None, rule: str | dict[str, Any] | None = None,
                 *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._urls_argument = urls
        self._rule_argument = rule
        self.list_urls: list[str] = []
        self.rule: Any = None

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> ProxySpider:
        from spiders.fleet_settings import crawlfleet_settings

        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawlfleet_settings(crawler.settings)
        urls = spider._urls_argument if spider._urls_argument is not None else settings["CRAWLFLEET_PROXY_LIST_URLS"]
        spider.list_urls = [u.strip() for u in (urls.split(",") if isinstance(urls, str) else urls) if u.strip()]
        raw_rule = spider._rule_argument if spider._rule_argument is not None else settings[
            "CRAWLFLEET_PROXY_LIST_RULE"]
        spider.rule = build_rule(load_rule(raw_rule))
        if not spider.list_urls:
            logger.warning("no proxy-list pages to read: set CRAWLFLEET_PROXY_LIST_URLS or -a urls=...")
        return spider

    async def start(self) -> AsyncIterator[Any]:
        for url in self.list_urls:
            yield scrapy.Request(url, callback=self.parse)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        result = self.rule.parse_list(response)
        for error in result.errors:
            logger.warning("%s: %s", response.url, error)
        for fields in result.items:
            yield {**fields, "source": response.url}
        for link in result.links:
            yield scrapy.Request(link.url, callback=self.parse)
        logger.info("%s: %d proxy entries", response.url, len(result.items))
