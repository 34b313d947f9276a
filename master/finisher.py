"""Crawl finished: the master notices when a crawl has no task left anywhere and says so once, on Kafka.

How the master knows, at any scale, without scanning every queue: **per-crawl pending counts kept per hash slot**,
each changed in the same atomic call that moves the tasks, so a count is never lower than the tasks it stands for:

- ``pending:{seeds}`` (crawlid -> tasks in ``seeds`` or a dispatcher staging area): ``messaging.tasks.push_seeds``
  adds, the dispatcher's settle step (``master.staging``) subtracts what landed, the requeue of a dead job adds back;
- ``pending:{<domain>}`` (crawlid -> tasks in any job's queue, leases or requeue outbox of the domain): the landing
  step adds, :func:`master.registry.record_completion` (called after an acknowledged lease) and the requeue's
  release step subtract.

Moves always add at the destination before they subtract at the source, and children are pushed before their
parent is acknowledged, so a crawl's counts are all zero only when it really has nothing left. A lost subtraction
(a worker crashing between its ack and ``record_completion``) leaves a count too high: the crawl is then late, never
early. When its ``seeds`` count drops to zero the settle step adds the crawl to ``finish:{seeds}:candidates``; the
finisher (:meth:`Finisher.check`, run by the leading master) then reads the crawl's domain counts
(``crawl:<id>:domains``), reads its ``seeds`` count again, and verifies with one ``ZSCAN`` of ``seeds`` that no task
of the crawl was pushed without ``push_seeds``. Only then does it declare the crawl finished.

Once: the state moves ``running`` -> ``finished`` in one script on ``crawl:<id>`` that also marks the event pending;
the ``crawl_finished`` event (crawlid, userid, pages, items, duration) is produced to the outbound topic, flushed,
and then marked sent; only then does the crawl leave the candidates. A master that dies between producing and
marking makes the next leader produce it again (at least once; exactly once without a crash in that gap). Stopped
crawls and crawls without a ``crawl:<id>`` hash are never declared finished. The crawl's keys then expire after
CRAWLFLEET_CRAWL_TTL, and so do the keys of its own Bloom filter (``master.bloom.crawl_namespace``), whose TTL
otherwise only slides with activity.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from master.bloom import crawl_namespace, expire_filter
from messaging import keys
from messaging.tasks import CrawlFields, CrawlState

logger = logging.getLogger(__name__)

EVENT = "crawl_finished"
EVENT_FIELD = "finish_event"  # crawl hash field: pending | sent
CHECK_BATCH = 200  # candidates looked at per check
SCAN_COUNT = 5000

# KEYS: crawl hash. ARGV: now, state field, running, finished, finished-time field, event field.
# Reply: 1 when this call finished the crawl.
_FINISH = """
if redis.call('HGET', KEYS[1], ARGV[2]) ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[4], ARGV[5], ARGV[1], ARGV[6], 'pending')
return 1
"""


class Finisher:
    """Checks candidate crawls and produces one ``crawl_finished`` event per crawl (see the module docstring)."""

    def __init__(self, redis: Any, send: Callable[[dict[str, Any]], None], crawl_ttl: float = 0) -> None:
        """``send`` produces an event and returns once it is acknowledged (e.g. produce + flush)."""
        self.redis = redis
        self.send = send
        self.crawl_ttl = crawl_ttl
        self._finish = redis.register_script(_FINISH)

    def check(self, now: float) -> list[str]:
        """One pass over the candidates; returns the crawls whose event was produced now."""
        produced = []
        candidates = [_text(c) for c in self.redis.srandmember(keys.FINISH_CANDIDATES, CHECK_BATCH) or []]
        for crawlid in candidates:
            try:
                if self._check_one(crawlid, now):
                    produced.append(crawlid)
            except Exception:  # one bad crawl must not stop the others (nor the master)
                logger.exception("checking whether crawl %s finished", crawlid)
        return produced

    def _check_one(self, crawlid: str, now: float) -> bool:
        crawl_key = keys.crawl(crawlid)
        state, event = (_text(v) if v is not None else None
                        for v in self.redis.hmget(crawl_key, [CrawlFields.STATE, EVENT_FIELD]))
        if state is None or state == CrawlState.STOPPED or (state == CrawlState.FINISHED and event != "pending"):
            self.redis.srem(keys.FINISH_CANDIDATES, crawlid)
            return False
        if state == CrawlState.RUNNING:
            if self._seeds_count(crawlid) > 0:
                self.redis.srem(keys.FINISH_CANDIDATES, crawlid)  # settle adds it again when it reaches zero
                return False
            if self._domain_count(crawlid) > 0 or self._seeds_count(crawlid) > 0:
                return False  # still in worker queues: look again later
            stray = self._scan_seeds(crawlid)
            if stray:
                logger.warning("crawl %s has %d tasks in seeds that were not counted (pushed without push_seeds)",
                               crawlid, stray)
                self.redis.hincrby(keys.PENDING_SEEDS, crawlid, stray)
                self.redis.srem(keys.FINISH_CANDIDATES, crawlid)
                return False
            if not int(self._finish(keys=[crawl_key], args=[repr(now), CrawlFields.STATE, CrawlState.RUNNING,
                                                             CrawlState.FINISHED, CrawlFields.FINISHED,
                                                             EVENT_FIELD])):
                return False  # changed meanwhile (stopped): the next pass decides
        self.send(self._event(crawlid, now))
        self.redis.hset(crawl_key, EVENT_FIELD, "sent")
        self.redis.srem(keys.FINISH_CANDIDATES, crawlid)
        if self.crawl_ttl > 0:
            for key in (crawl_key, keys.crawl_domains(crawlid)):
                self.redis.expire(key, int(self.crawl_ttl))
            expire_filter(self.redis, crawl_namespace(crawlid), self.crawl_ttl)
        logger.info("crawl %s finished", crawlid)
        return True

    def _seeds_count(self, crawlid: str) -> int:
        return int(self.redis.hget(keys.PENDING_SEEDS, crawlid) or 0)

    def _domain_count(self, crawlid: str) -> int:
        domains = [_text(d) for d in self.redis.smembers(keys.crawl_domains(crawlid))]
        if not domains:
            return 0
        pipe = self.redis.pipeline(transaction=False)
        for domain in domains:
            pipe.hget(keys.pending_domain(domain), crawlid)
        return sum(max(0, int(v or 0)) for v in pipe.execute())

    def _scan_seeds(self, crawlid: str) -> int:
        """Tasks of the crawl in ``seeds`` (members are canonical JSON: ``"crawlid":"<id>"`` appears verbatim)."""
        pattern = '*"crawlid":' + _glob_escape(_json_string(crawlid)) + "*"
        return sum(1 for _ in self.redis.zscan_iter(keys.SEEDS, match=pattern, count=SCAN_COUNT))

    def _event(self, crawlid: str, now: float) -> dict[str, Any]:
        fields = [CrawlFields.USERID, CrawlFields.PAGES, CrawlFields.ITEMS, CrawlFields.CREATED,
                  CrawlFields.FINISHED, CrawlFields.SPIDER_TYPE]
        userid, pages, items, created, finished, spider_type = (
            _text(v) if v is not None else None for v in self.redis.hmget(keys.crawl(crawlid), fields))
        finished_at = float(finished) if finished else now
        duration = max(0.0, finished_at - float(created)) if created else None
        return {"event": EVENT, "crawlid": crawlid, "userid": userid or "", "spider_type": spider_type or "",
                "pages": int(pages or 0), "items": int(items or 0), "finished": finished_at,
                "duration": round(duration, 3) if duration is not None else None}


def _json_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _glob_escape(text: str) -> str:
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
