"""Info plugin (seed 4.1.3.1, table 4-3): how far one crawl has got.

The answer: ``pending`` (tasks in ``seeds``), ``queued`` and ``leased`` (in workers' queues and leases),
``total_domains`` and per ``domains`` counts, per ``jobs`` counts, and from the crawl hash its state, spider type,
pages processed, tasks ever enqueued and ``items`` stored (the hash's counter; ``items_in_mongodb`` counts the crawl's
collection when MongoDB answers). ``dead_letters`` counts the crawl's tasks that the dispatcher could not place
(``master:{seeds}:dead-letter-counts``), with the latest few and their reasons in ``dead_letter_samples``.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from typing import Any

from messaging import keys
from messaging.clients import as_text
from messaging.redis_monitor.crawl_tasks import INFLIGHT, QUEUE, SEEDS, crawl_members, task_keys
from messaging.redis_monitor.plugins import Context, Plugin
from messaging.tasks import CrawlFields

logger = logging.getLogger("crawlfleet.redis_monitor")
_NUMBERS = (CrawlFields.PAGES, CrawlFields.ITEMS, CrawlFields.ENQUEUED, CrawlFields.CREATED, CrawlFields.FINISHED)
_COUNT_NAMES = {SEEDS: "pending", QUEUE: "queued", INFLIGHT: "leased"}
DEAD_LETTER_SAMPLES = 5  # latest dead letters of the crawl shown in the answer
DEAD_LETTER_LOOKBACK = 1000  # records of the dead-letter list searched for them



def crawl_info(redis: Any, crawlid: str) -> dict[str, Any]:
    """Counts of one crawl's tasks by where they wait, by domain and by job."""
    totals = {"pending": 0, "queued": 0, "leased": 0}
    domains: dict[str, dict[str, int]] = defaultdict(lambda: {"pending": 0, "queued": 0, "leased": 0})
    jobs: dict[str, dict[str, Any]] = defaultdict(lambda: {"queued": 0, "leased": 0, "domains": set()})
    for key, where in task_keys(redis):
        job = keys.parse_domain_key(key).owner if where != SEEDS else ""
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


def dead_letters(redis: Any, crawlid: str, samples: int = DEAD_LETTER_SAMPLES) -> dict[str, Any]:
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


class InfoPlugin(Plugin):
    name = "info"
    kind = "info"

    def handle(self, key: str, request: dict[str, Any], context: Context) -> dict[str, Any]:
        crawlid = request["crawlid"]
        raw = {as_text(field): as_text(value) for field, value in context.redis.hgetall(keys.crawl(crawlid)).items()}
        answer: dict[str, Any] = {"crawlid": crawlid, "exists": bool(raw), "state": raw.get(CrawlFields.STATE),
                                  "spider_type": raw.get(CrawlFields.SPIDER_TYPE), "url": raw.get(CrawlFields.URL),
                                  "owner": raw.get(CrawlFields.USERID)}
        for field in _NUMBERS:
            answer[field] = int(float(raw[field])) if raw.get(field) else 0
        answer.update(crawl_info(context.redis, crawlid))
        answer.update(dead_letters(context.redis, crawlid))
        answer["items_in_mongodb"] = self._mongo_count(context, crawlid)
        return answer

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
