"""Crawl requests (seed 4.1.2.2, "Crawler 插件"): the rule into ``crawl:<crawlid>``, the start URL into ``seeds``.

The crawl hash is written first, for the whole poll in one pipeline of small Lua calls (one per crawl, so each is a
single-key script that works on a Redis Cluster): it refuses a crawl marked stopped — atomically with the write, so a
stop that lands meanwhile is never undone — and otherwise stores the rule once, the spider type, the user and the
limits, and marks the crawl running (a paused one stays paused: :mod:`messaging.pause`). The task itself is queued on
the batch and lands in ``seeds`` by priority, first in first out within a priority.

A crawl of one's own Scrapy spider (``project`` and ``spider`` instead of ``url``, ``rule`` and ``spider_type``;
issue 35) stores its spider type ``<project>.<spider>``, its ``args`` and ``settings`` (what every worker of the
crawl runs with) and no task: its start requests come from the spider's ``start()``, pushed once by one of its
workers (``spiders.worker.start``), which join it with ``scrapy crawl`` and the fleet's add-on or through a manager.
"""

from __future__ import annotations

import json
from typing import Any

from messaging import keys
from messaging.kafka_monitor.batch import KAFKA_MONITOR_LUA, STORED, Batch, Incoming
from messaging.kafka_monitor.plugins import Plugin
from messaging.own_crawls import own_crawl_fields, own_spider_type
from messaging.scripts import lua_script
from messaging.tasks import DEFAULT_PRIORITY, CrawlFields, CrawlState, Task
from messaging.validation import CRAWL, Rejected

UPSERT = lua_script(KAFKA_MONITOR_LUA / "crawl_upsert.lua")  # refuses a stopped crawl, else stores the request

_OPTIONAL = (CrawlFields.MAXDEPTH, CrawlFields.MAX_PAGES, CrawlFields.DOMAIN_MAX_PAGES, CrawlFields.UNTIL)


def crawl_fields(data: dict[str, Any]) -> list[Any]:
    """Field/value pairs of ``crawl:<id>`` from a crawl request (the rule and cookies as JSON)."""
    if "project" in data:
        own = own_crawl_fields(data["project"], data["spider"], data["userid"], args=data.get("args"),
                               settings=data.get("settings"), priority=data.get("priority", DEFAULT_PRIORITY))
        own.pop(CrawlFields.STATE)  # the upsert sets it (unless the crawl was stopped)
        own.pop(CrawlFields.URL)
        fields: list[Any] = [value for pair in own.items() for value in pair]
    else:
        fields = [
            CrawlFields.RULE, json.dumps(data["rule"], sort_keys=True, ensure_ascii=False),
            CrawlFields.SPIDER_TYPE, data["spider_type"],
            CrawlFields.USERID, data["userid"],
        ]
    for name in _OPTIONAL:
        if name in data:
            fields += [name, data[name]]
    if "cookie" in data:
        fields += [CrawlFields.COOKIE, json.dumps(data["cookie"], sort_keys=True, ensure_ascii=False)]
    if "notify" in data:
        fields += [CrawlFields.NOTIFY, json.dumps(data["notify"], sort_keys=True, ensure_ascii=False)]
    rule = data.get("rule")  # one's own spider's crawl has none: CRAWLFLEET_PARTITION applies
    if isinstance(rule, dict) and "partition" in rule:  # read by the dispatcher (master.placement)
        fields += [CrawlFields.PARTITION, rule["partition"]]
    return fields


class CrawlPlugin(Plugin):
    name = "crawl"
    kinds = frozenset({CRAWL})

    def prepare(self, requests: list[Incoming], batch: Batch) -> None:
        latest = {request.data["crawlid"]: request.data for request in requests}  # the last request of a crawl wins
        first_url: dict[str, str] = {}
        for request in requests:
            first_url.setdefault(request.data["crawlid"], request.data.get("url", ""))
        if not latest:
            batch.scratch["stopped"] = set()
            return
        pipe = batch.redis.pipeline(transaction=False)
        for crawlid, data in latest.items():
            UPSERT.queue_eval(pipe, [keys.crawl(crawlid)],
                              [CrawlFields.STATE, CrawlState.STOPPED, CrawlState.RUNNING, CrawlFields.CREATED,
                               CrawlFields.URL, first_url[crawlid], CrawlState.PAUSED, *crawl_fields(data)])
            pipe.sadd(keys.CRAWLS, crawlid)
        results = pipe.execute()[::2]
        stopped = {crawlid for crawlid, ok in zip(latest, results, strict=True) if not int(ok)}
        batch.scratch["stopped"] = stopped
        own = {crawlid: data for crawlid, data in latest.items() if "project" in data and crawlid not in stopped}
        if own:  # `scrapy crawl <spider>` workers started without a crawl id join the newest crawl of their spider
            pipe = batch.redis.pipeline(transaction=False)
            for crawlid, data in own.items():
                pipe.set(keys.spider_crawl(own_spider_type(data["project"], data["spider"])), crawlid)
            pipe.execute()

    def handle(self, request: Incoming, batch: Batch) -> None:
        data = request.data
        if data["crawlid"] in batch.scratch["stopped"]:
            raise Rejected("$.crawlid", f"crawl {data['crawlid']!r} was stopped; a stopped crawl takes no new requests")
        if "project" in data:  # its start requests come from its spider's start(), pushed by one of its workers
            request.outcome = STORED
            return
        batch.enqueue(request, Task(url=data["url"], crawlid=data["crawlid"], spider_type=data["spider_type"],
                                    userid=data["userid"], priority=data.get("priority", DEFAULT_PRIORITY)))
