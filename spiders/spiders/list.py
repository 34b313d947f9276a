"""The ``list`` spider (seed 4.3.1.3, "精准爬虫"): list pages lead to detail pages; one item per list entry.

The rule (``first_page_xpath``, ``second_page_xpath``, ``required``; :class:`spiders.rules.ListRule`): a list page's
entries carry fields and a detail link; the item is completed on the detail page (its fields, and the page's main
text), or made on the list page when the entry has no detail link or ``continue`` is false. ``next_page`` links
continue the list.
"""

from __future__ import annotations

from typing import Any

from scrapy.http import Response

from messaging.tasks import Task
from spiders.rules import DETAIL, ListRule, PageResult
from spiders.spiders.base import FleetSpider
from spiders.worker.crawls import CrawlInfo


class ListSpider(FleetSpider):
    name = "list"

    def build_rule(self, crawl: CrawlInfo) -> ListRule:
        return ListRule.from_json(crawl.rule)

    def apply(self, rule: ListRule, response: Response, task: Task) -> tuple[PageResult, bool]:
        if task.callback == DETAIL:
            return rule.parse_detail(response, dict(task.meta)), True
        return rule.parse_list(response), False

    def parse(self, response: Response, **kwargs: Any) -> Any:  # a plain Scrapy request without a task
        return self.parse_task(response)
