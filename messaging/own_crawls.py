"""Crawls of one's own Scrapy spiders (issue 35): their record in ``crawl:<crawlid>``, written alike by whoever begins
one — the manager's ``schedule.json`` for a deployed project, the Kafka monitor for a crawl request that names
``project`` and ``spider``, or the first worker of a spider started with ``scrapy crawl`` and the fleet's add-on.

Such a crawl has no rule and no start URL: its spider type is ``<project>.<spider>`` (:func:`own_spider_type`), its
start requests come from the spider's ``start()`` (pushed once for the crawl by one of its workers:
``spiders.worker.start``), and it pins what every one of its workers runs: the spider's arguments, the Scrapy
settings and, for a deployed project, the egg's version and SHA-256.
"""

from __future__ import annotations

import json
from typing import Any

from messaging import keys
from messaging.scripts import LUA, lua_script
from messaging.tasks import DEFAULT_PRIORITY, CrawlFields, CrawlState

CREATE = lua_script(LUA / "crawl_create.lua")  # a crawl record, unless it exists


def own_spider_type(project: str, spider: str) -> str:
    """The spider type of one's own spider: ``<project>.<spider>``."""
    return f"{project}.{spider}"


def own_crawl_fields(project: str, spider: str, userid: str = "", *, args: dict[str, Any] | None = None,
                     settings: dict[str, Any] | None = None, version: str = "", sha256: str = "",
                     priority: int = DEFAULT_PRIORITY) -> dict[str, str]:
    """``crawl:<id>``'s fields of a crawl of one's own spider (its state: running)."""
    fields = {CrawlFields.SPIDER_TYPE: own_spider_type(project, spider), CrawlFields.PROJECT: project,
              CrawlFields.SPIDER: spider, CrawlFields.USERID: userid, CrawlFields.STATE: CrawlState.RUNNING,
              CrawlFields.RULE: "{}", CrawlFields.URL: "", CrawlFields.PRIORITY: str(priority),
              CrawlFields.ARGS: json.dumps(args or {}, sort_keys=True, ensure_ascii=False),
              CrawlFields.SETTINGS: json.dumps(settings or {}, sort_keys=True, ensure_ascii=False)}
    if version:
        fields[CrawlFields.VERSION] = version
    if sha256:
        fields[CrawlFields.SHA256] = sha256
    return fields


def create_crawl(redis: Any, crawlid: str, fields: dict[str, str]) -> bool:
    """Write ``crawl:<crawlid>`` unless it exists (True: created now; an existing crawl is left as it is)."""
    flat = [value for pair in fields.items() for value in pair]
    return bool(int(CREATE.on(redis)(keys=[keys.crawl(crawlid), keys.CRAWLS], args=[crawlid, *flat])))
