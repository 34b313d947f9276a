"""Info plugin (seed 4.1.3.1, table 4-3): how far one crawl has got.

The answer: ``pending`` (tasks in ``seeds``), ``queued`` and ``leased`` (in workers' queues and leases), ``parked``
(a paused crawl's tasks, :mod:`messaging.pause`; ``paused``: since when, or null), ``retries`` (runs of ``crawlfleet
retry``), ``total_domains`` and per ``domains`` counts, per ``jobs`` counts, and from the crawl hash its state,
spider type, tasks ever enqueued, and the exact counts of :mod:`messaging.counts` (``pages`` and ``items`` once per
canonical URL, ``restored``, ``retried``, ``failures`` by reason, ``failed_urls``, ``start_failure``);
``items_in_mongodb`` counts the crawl's collection when MongoDB answers. ``dead_letters`` counts the crawl's tasks
that the dispatcher could not place (``master:{seeds}:dead-letter-counts``), with the latest few and their reasons
in ``dead_letter_samples``. ``revisit`` (a crawl whose rule revisits pages, ``frontier.revisit``):
:func:`revisit_summary`. ``waiting``: why the crawl's tasks are not being fetched right now, each reason with its
figures (:mod:`messaging.waits`: paced by its site's rate with the next slot, robots.txt pending, blocked, backlog
full, no worker of its type).
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from typing import Any

from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.counts import read_counts
from messaging.redis_monitor.crawl_tasks import INFLIGHT, PARKED, QUEUE, SEEDS, crawl_members, task_keys
from messaging.redis_monitor.plugins import Context, Plugin
from messaging.siteconfig import SitePaths
from messaging.tasks import CrawlFields
from messaging.waits import crawl_waits, zk_rates

logger = logging.getLogger("crawlfleet.redis_monitor")
_NUMBERS = (CrawlFields.PAGES, CrawlFields.ITEMS, CrawlFields.ENQUEUED, CrawlFields.CREATED, CrawlFields.FINISHED)
_COUNT_NAMES = {SEEDS: "pending", QUEUE: "queued", INFLIGHT: "leased", PARKED: "parked"}
DEAD_LETTER_SAMPLES = 5  # latest dead letters of the crawl shown in the answer
DEAD_LETTER_LOOKBACK = 1000  # records of the dead-letter list searched for them



def crawl_info(redis: RedisClient, crawlid: str) -> dict[str, Any]:
    """Counts of one crawl's tasks by where they wait, by domain and by job."""
    totals = {"pending": 0, "queued": 0, "leased": 0, "parked": 0}
    domains: dict[str, dict[str, int]] = defaultdict(lambda: {"pending": 0, "queued": 0, "leased": 0, "parked": 0})
    jobs: dict[str, dict[str, Any]] = defaultdict(lambda: {"queued": 0, "leased": 0, "parked": 0, "domains": set()})
    for key, where in task_keys(redis, crawlid):
        job = keys.parse_domain_key(key).owner if where != SEEDS and key != keys.parked_seeds(crawlid) else ""
        for _, task in crawl_members(redis, key, crawlid):
            name = _COUNT_NAMES[where]
            totals[name] += 1
            domains[task.domain][name] += 1
            if job:
                jobs[job][name] += 1
                jobs[job]["domains"].add(task.domain)
    return {
        **totals,
        "total_domains": len(domains),
        "domains": dict(sorted(domains.items())),
        "jobs": {job: {**counts, "domains": sorted(counts["domains"])} for job, counts in sorted(jobs.items())},
    }


def dead_letters(redis: RedisClient, crawlid: str, samples: int = DEAD_LETTER_SAMPLES) -> dict[str, Any]:
    """How many of the crawl's tasks the dispatcher could not place, and the latest few with their reasons."""
    count = int(redis.hget(keys.DEAD_LETTER_COUNTS, crawlid) or 0)
    latest: list[dict[str, Any]] = []
    if count:
        for raw in redis.lrange(keys.DEAD_LETTERS, 0, DEAD_LETTER_LOOKBACK - 1):
            record = json.loads(raw)
            if record.get("crawlid") == crawlid:
                latest.append({"reason": record.get("error"), "task": record.get("original"),
                               "time": record.get("time")})
                if len(latest) >= samples:
                    break
    return {"dead_letters": count, "dead_letter_samples": latest}


def revisit_summary(redis: RedisClient, crawlid: str, now: float | None = None) -> dict[str, Any] | None:
    """A revisiting crawl's schedule: URLs ``scheduled``; ``due`` (due now: waiting for the master, or out as a
    revisit task); ``overdue`` (due more than the crawl's ``min`` interval ago); ``waiting`` (not due yet);
    ``mean_interval`` (seconds); revisits ``changed``, ``unchanged`` (of which ``not_modified``: answered 304),
    ``failed``. None when the crawl has no schedule."""
    if not redis.exists(keys.revisit_state(crawlid)) and not redis.sismember(keys.REVISIT_CRAWLS, crawlid):
        return None
    if now is None:
        seconds, micros = redis.time()
        now = seconds + micros / 1e6
    rule = redis.hget(keys.crawl(crawlid), CrawlFields.RULE)
    revisit = (json.loads(rule) if rule else {}).get("revisit") or {}
    grace = float(revisit.get("min", max(1.0, float(revisit.get("interval", 4)) / 4)))
    pipe = redis.pipeline(transaction=False)
    pipe.hgetall(keys.revisit_stats(crawlid))
    pipe.zcount(keys.revisit_due(crawlid), "-inf", now)
    pipe.zcard(keys.revisit_out(crawlid))
    pipe.zcount(keys.revisit_due(crawlid), "-inf", now - grace)
    pipe.zcount(keys.revisit_out(crawlid), "-inf", now - grace)
    pipe.zcount(keys.revisit_due(crawlid), f"({now}", "+inf")
    raw, due_in, out, late_in, late_out, waiting = pipe.execute()
    stats = {as_text(k): float(v) for k, v in raw.items()}
    urls = int(stats.get("urls", 0))
    return {"scheduled": urls, "due": int(due_in) + int(out), "overdue": int(late_in) + int(late_out),
            "waiting": int(waiting),
            "mean_interval": round(stats.get("interval_sum", 0.0) / urls, 3) if urls else None,
            **{name: int(stats.get(name, 0)) for name in ("changed", "unchanged", "not_modified", "failed")}}


class InfoPlugin(Plugin):
    name = "info"
    kind = "info"

    def handle(self, key: str, request: dict[str, Any], context: Context) -> dict[str, Any]:
        crawlid = request["crawlid"]
        raw = {as_text(field): as_text(value) for field, value in context.redis.hgetall(keys.crawl(crawlid)).items()}
        answer: dict[str, Any] = {"crawlid": crawlid, "exists": bool(raw), "state": raw.get(CrawlFields.STATE),
                                  "spider_type": raw.get(CrawlFields.SPIDER_TYPE), "url": raw.get(CrawlFields.URL),
                                  "owner": raw.get(CrawlFields.USERID),
                                  "paused": float(raw[CrawlFields.PAUSED]) if raw.get(CrawlFields.PAUSED) else None,
                                  "retries": int(raw.get(CrawlFields.RETRIES) or 0)}
        for field in _NUMBERS:
            answer[field] = int(float(raw[field])) if raw.get(field) else 0
        if raw:  # the exact counts (messaging.counts): pages, items, restored, failures by reason, start_failure
            answer.update(read_counts(context.redis, crawlid).as_dict())
        answer.update(crawl_info(context.redis, crawlid))
        answer.update(dead_letters(context.redis, crawlid))
        answer["waiting"] = crawl_waits(context.redis, crawlid, self._rates(context)) if raw else []
        revisit = revisit_summary(context.redis, crawlid)
        if revisit is not None:
            answer["revisit"] = revisit
        answer["items_in_mongodb"] = self._mongo_count(context, crawlid)
        return answer

    @staticmethod
    def _rates(context: Context) -> Any:
        try:
            zk = context.zk()
        except Exception as exc:  # ZooKeeper away: the reasons come without their rates
            logger.warning("redis-monitor: no site rates for the info answer (ZooKeeper: %s)", exc)
            return lambda domain: None
        return zk_rates(zk, SitePaths(context.settings.zk_root))

    @staticmethod
    def _mongo_count(context: Context, crawlid: str) -> int | None:
        try:
            database = context.mongo()
            if crawlid not in database.list_collection_names(filter={"name": crawlid}):
                return 0
            return int(database[crawlid].estimated_document_count())
        except Exception as exc:  # MongoDB away: the Redis counts still answer
            logger.warning("redis-monitor: cannot count the items of %s in MongoDB: %s", crawlid, exc)
            return None
