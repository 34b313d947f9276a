"""Crawl requests (seed 4.1.2.2, "Crawler 插件"): the rule into ``crawl:<crawlid>``, the start URL into ``seeds``.

The crawl hash is written first, for the whole poll in one pipeline of small Lua calls (one per crawl, so each is a
single-key script that works on a Redis Cluster): it refuses a crawl marked stopped — atomically with the write, so a
stop that lands meanwhile is never undone — and otherwise stores the rule once, the spider type, the user and the
limits, and marks the crawl running (a paused one stays paused: :mod:`messaging.pause`). The task itself is queued on
the batch and lands in ``seeds`` by priority, first in first out within a priority.
"""

from __future__ import annotations

import json
from typing import Any

from messaging import keys
from messaging.kafka_monitor.batch import KAFKA_MONITOR_LUA, Batch, Incoming
from messaging.kafka_monitor.plugins import Plugin
from messaging.scripts import lua_script
from messaging.tasks import DEFAULT_PRIORITY, CrawlFields, CrawlState, Task
from messaging.validation import CRAWL, Rejected

UPSERT = lua_script(KAFKA_MONITOR_LUA / "crawl_upsert.lua")  # refuses a stopped crawl, else stores the request

_OPTIONAL = (CrawlFields.MAXDEPTH, CrawlFields.MAX_PAGES, CrawlFields.DOMAIN_MAX_PAGES, CrawlFields.UNTIL)


def crawl_fields(data: dict[str, Any]) -> list[Any]:
    """Field/value pairs of ``crawl:<id>`` from a crawl request (the rule and cookies as JSON)."""
    fields: list[Any] = [
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
    return fields


class CrawlPlugin(Plugin):
    name = "crawl"
    kinds = frozenset({CRAWL})

    def prepare(self, requests: list[Incoming], batch: Batch) -> None:
        latest = {request.data["crawlid"]: request.data for request in requests}  # the last request of a crawl wins
        first_url: dict[str, str] = {}
        for request in requests:
            first_url.setdefault(request.data["crawlid"], request.data["url"])
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
        batch.scratch["stopped"] = {crawlid for crawlid, ok in zip(latest, results, strict=True) if not int(ok)}

    def handle(self, request: Incoming, batch: Batch) -> None:
        data = request.data
        if data["crawlid"] in batch.scratch["stopped"]:
            raise Rejected("$.crawlid", f"crawl {data['crawlid']!r} was stopped; a stopped crawl takes no new requests")
        batch.enqueue(request, Task(url=data["url"], crawlid=data["crawlid"], spider_type=data["spider_type"],
                                    userid=data["userid"], priority=data.get("priority", DEFAULT_PRIORITY)))
