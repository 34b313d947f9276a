"""The leader's part of continuous crawling: due URLs go back to ``seeds`` as revisit tasks (``frontier.revisit``).

Every CRAWLFLEET_REVISIT_INTERVAL the leading master (``master.service``) looks at the crawls that have a revisit
schedule (``revisit:{seeds}:crawls``):

- a crawl that is no longer running (stopped, finished, or gone with its TTL), or whose ``until`` time has passed by
  the Redis clock, has its schedule purged (``frontier/lua/revisit_purge.lua``), so that a stopped crawl leaves
  nothing behind and a crawl past its ``until`` can finish; a paused crawl's revisits are postponed: its due URLs
  wait in ``due`` until it is resumed (``messaging.pause``);
- otherwise up to CRAWLFLEET_REVISIT_BATCH of its due URLs (``due`` score at most now) become revisit tasks: their
  states are read, each task is built with the next generation and the stored validators, and one Lua call
  (``frontier/lua/revisit_move.lua``, fenced by the epoch like staging) moves each URL still due at that generation
  from ``due`` to ``out`` and pushes its task into ``seeds``, counted in ``pending:{seeds}``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from frontier.lua import LUA
from frontier.revisit import read_states, revisit_task
from master.staging import LeadershipLost
from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.scripts import lua_script
from messaging.tasks import SEEDS_SCORE_LUA, CrawlFields, CrawlState

logger = logging.getLogger(__name__)
MOVE = lua_script(LUA / "revisit_move.lua", prefix=SEEDS_SCORE_LUA)
PURGE = lua_script(LUA / "revisit_purge.lua")
_OVER = "over"


@dataclass
class RevisitRound:
    moved: int = 0  # revisit tasks pushed into seeds
    purged: int = 0  # crawls whose schedule was forgotten


class RevisitMover:
    def __init__(self, redis: RedisClient, epoch: int, batch: int = 1000) -> None:
        self.redis = redis
        self.epoch = epoch
        self.batch = max(1, batch)
        self._move = MOVE.on(redis)
        self._purge = PURGE.on(redis)

    def round(self, now: float) -> RevisitRound:
        """One pass over the revisiting crawls (see the module docstring); raises LeadershipLost when fenced."""
        result = RevisitRound()
        for crawlid in sorted(as_text(c) for c in self.redis.smembers(keys.REVISIT_CRAWLS)):
            try:
                state = self._state(crawlid, now)
                if state == _OVER:
                    self.purge(crawlid)
                    result.purged += 1
                elif state != CrawlState.PAUSED:
                    result.moved += self.move_due(crawlid, now)
            except LeadershipLost:
                raise
            except Exception as exc:
                if "FENCED" in str(exc):
                    raise LeadershipLost(str(exc)) from exc
                logger.exception("revisits of crawl %s", crawlid)
        return result

    def move_due(self, crawlid: str, now: float) -> int:
        urls = [as_text(u) for u in self.redis.zrangebyscore(keys.revisit_due(crawlid), "-inf", now, start=0,
                                                              num=self.batch)]
        args: list[Any] = [self.epoch, crawlid]
        for url, state in zip(urls, read_states(self.redis, crawlid, urls), strict=True):
            if state is None:  # scheduled without state: cannot be fetched; dropped from due
                self.redis.zrem(keys.revisit_due(crawlid), url)
                continue
            generation = int(state.get("gen", 0)) + 1
            task = revisit_task(state, generation)
            args += [url, generation, task.encode(), task.priority]
        if len(args) == 2:
            return 0
        return int(self._move(keys=[keys.MASTER_EPOCH, keys.SEEDS, keys.SEEDS_SEQUENCE, keys.PENDING_SEEDS,
                                    keys.revisit_due(crawlid), keys.revisit_out(crawlid),
                                    keys.revisit_state(crawlid)], args=args))

    def purge(self, crawlid: str) -> int:
        urls = int(self._purge(keys=[keys.MASTER_EPOCH, keys.REVISIT_CRAWLS, keys.revisit_due(crawlid),
                                     keys.revisit_out(crawlid), keys.revisit_state(crawlid),
                                     keys.revisit_stats(crawlid)], args=[self.epoch, crawlid]))
        logger.info("crawl %s: revisit schedule of %d URLs purged", crawlid, urls)
        return urls

    def _state(self, crawlid: str, now: float) -> str:
        """``running``, ``paused`` (its revisits wait), or over (stopped, finished, gone, or past its ``until``)."""
        state, until = (as_text(v) if v is not None else None
                        for v in self.redis.hmget(keys.crawl(crawlid), [CrawlFields.STATE, CrawlFields.UNTIL]))
        if state not in (CrawlState.RUNNING, CrawlState.PAUSED):
            return _OVER
        if until is not None and until != "" and now >= float(until):
            return _OVER
        return state
