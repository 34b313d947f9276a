"""The ``universal`` spider (seed 4.3.1.3, "通用网页爬虫"): CrawlSpider-style link rules from the request's JSON.

The rule (``rules``, ``start``, ``required``; :class:`spiders.rules.UniversalRule`): each link rule is a Scrapy
LinkExtractor (allow, deny, allow_domains — by default the start URL's domain — deny_domains, restrict_xpaths);
a page reached through a rule with ``extract`` yields an item of those fields and its main text; ``follow`` says
whether its links are followed. ``start: sitemap`` starts from the site's ``/sitemap.xml`` instead of the URL.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urljoin

from scrapy.http import Response

from messaging.tasks import Task
from spiders.render.modes import NEVER
from spiders.rules import SITEMAP, START, PageResult, UniversalRule
from spiders.spiders.base import FleetSpider
from spiders.worker.crawls import CrawlInfo


class UniversalSpider(FleetSpider):
    name = "universal"

    def build_rule(self, crawl: CrawlInfo) -> UniversalRule:
        return UniversalRule.from_json(crawl.rule, crawl.url)

    def url_for(self, task: Task, rule: UniversalRule) -> str:
        if task.callback == START and rule.start == SITEMAP and task.depth == 0:
            return urljoin(task.url, "/sitemap.xml")
        return task.url

    def render_mode(self, task: Task, crawl: CrawlInfo | None) -> str:
        if task.callback == SITEMAP or (task.callback == START and task.depth == 0 and crawl is not None
                                        and (crawl.rule or {}).get("start") == SITEMAP):
            return NEVER  # a sitemap is no page
        return super().render_mode(task, crawl)

    def apply(self, rule: UniversalRule, response: Response, task: Task) -> tuple[PageResult, bool]:
        if task.callback == SITEMAP or (task.callback == START and rule.start == SITEMAP and task.depth == 0):
            return rule.parse_sitemap(response), False
        return rule.parse_page(response, task.callback), True

    def parse(self, response: Response, **kwargs: Any) -> Any:
        return self.parse_task(response)
