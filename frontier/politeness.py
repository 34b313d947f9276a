"""The politeness engine: a worker takes a task of a domain only when the cluster may hit that domain soon.

One atomic Lua step per fetch (``lua/take.lua``, seed 4.2.2), at the Redis clock: refuse while ``block:{d}`` (a
Retry-After) lasts; find the earliest *slot* at which a hit is allowed by both throttle keys — this spider type on
every host (``<spider_type>:{d}:…``, seed 4.2.2.2) and this host on every spider type (``<ip>:{d}:…``, seed
4.2.2.3) — and, only if that slot is at most CRAWLFLEET_PACE_HORIZON ahead, pop the highest-priority task of
``<job>:{d}:queue``, record the hit at its slot and lease the task in ``<job>:{d}:inflight`` until a deadline. Every
key of the call has the domain as hash tag, so it runs unchanged on a Redis Cluster. The companion steps
acknowledge, renew and requeue leases (:mod:`frontier.lease_steps`).

**Paced hits** (``lua/pace.lua``). A rate of N hits per W seconds means hits spaced W/N apart, for every worker of
the cluster together: each throttle key has a token bucket (``<owner>:{d}:pace``) that refills one token per W/N
seconds up to the site's ``burst`` (default 1: no two hits closer than W/N), and the exact sliding window
(``<owner>:{d}:throttle``) stays as the upper bound: both hold. A site with ``adaptive`` set is spaced at least
its shared adaptive delay apart (``frontier.adaptive``).

**Where the clock is read: when the request goes out, not when it is leased.** A leased task used to wait in the
worker's prefetch buffer, and tasks leased one by one could leave together after a stall of the downloader: the
site saw more hits in a window than the cluster had counted. Now the step hands out, with the lease, the slot at
which the hit was recorded (``Lease.not_before``), and the worker's scheduler hands the request to the downloader
no earlier than the slot and no later than ``Lease.slack`` after it (a fifth of the spacing, at least
CRAWLFLEET_PACE_SLACK and at least CRAWLFLEET_PACE_SLACK_SHARE of the site's window: a busy worker's leases wait a
tenth of a second or more for the downloader, and a slack shorter than that wait would make most of them miss their
slot and reserve again). A request that missed that span withdraws its hit and reserves a new slot
(:meth:`Politeness.reserve`, ``lua/reserve.lua``) before it goes; so does every follow-up that the worker sends by
itself (a redirect, a retry), since the site sees it as another hit. The windows are checked ``slack`` wider than
the site's window, so the hits the site sees — each within ``slack`` after its recorded time — never number more
than N in any W seconds. Every hit of a site gets the same slack (a function of the site's rate alone), which
is what that check needs; its cost is the slack's share of the window, at most CRAWLFLEET_PACE_SLACK_SHARE of the
rate when the window binds beyond the floors. We chose a slot handed out with the lease over recording the hit at
hand-out (that would cost the reactor a Redis round trip per request, or a thread hop that adds its own delay) and
over shortening the prefetch (a shorter buffer only makes the bunching rarer, it does not bound it). The horizon
keeps reservations short, so a worker never holds a site's next minutes, and a rate changed live applies within
the horizon.

Rates: the site's rate and window from ZooKeeper (:class:`~frontier.config_watch.SiteConfigWatch`, else the
defaults) apply to both windows; a robots.txt ``Crawl-delay`` that is known and stricter lowers the rate to one hit
per ``delay`` seconds. robots.txt rules are checked in Python (protego) on the queue head *before* the step, and the
step pops only if the head is still that task, so a disallowed URL never spends a hit or a lease.

Completions: :meth:`Politeness.ack` returns the acknowledged :class:`~messaging.tasks.Task` (``None`` when the lease
is no longer held: expired and requeued, or fenced because the job was retired). The caller counts a completion
for the dispatcher's weights on a non-``None`` result (``frontier.registry``); this module does not import it.
"""

from __future__ import annotations

import email.utils
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from frontier.config_watch import SiteRates
from frontier.lease_steps import US, Lease, LeaseSteps, now_arg
from frontier.lua import LUA, PACE_LUA, PENDING_LUA
from frontier.robots_cache import RobotsCache
from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.clock import LUA_NOW_MICROSECONDS, RedisClock
from messaging.domains import domain_of
from messaging.scripts import lua_source, run_scripts
from messaging.siteconfig import Rate
from messaging.tasks import Task

logger = logging.getLogger(__name__)

STATS_MODULE = "politeness"
KEY_TTL_MARGIN = 60.0  # idle throttle windows vanish this long after their last hit could matter
MAX_DISALLOWED_PER_TAKE = 64  # bound the work of one take() when a queue starts with many disallowed URLs


class Outcome:
    TAKEN = "taken"
    EMPTY = "empty"
    THROTTLED = "throttled"
    BLOCKED = "blocked"
    ROBOTS_PENDING = "robots_pending"  # the domain's robots.txt is being fetched, or is unreachable
    DISALLOWED = "disallowed"  # only disallowed URLs were found (removed); try again at once
    BLACKLISTED = "blacklisted"  # the domain's queue was dropped

    WAITING = frozenset({THROTTLED, BLOCKED, ROBOTS_PENDING})


@dataclass(frozen=True)
class Reservation:
    """A hit reserved for a request that goes out without a lease's slot (a follow-up, or one that missed its slot)."""

    domain: str
    now: float  # Redis time of the call
    not_before: float  # the slot (Redis clock): the request may go out from then...
    slack: float  # ...until this many seconds after it
    hit: str  # "": the slot is beyond the horizon and was not recorded; ask again at ``not_before - horizon``

    @property
    def recorded(self) -> bool:
        return bool(self.hit)


@dataclass
class TakeResult:
    outcome: str
    domain: str
    now: float = 0.0  # Redis time of the step (seconds); 0.0 when no step script ran (robots.txt pending, empty)
    wait: float = 0.0  # seconds until the domain may open (throttled, blocked, robots pending; taken: after the
    # batch of steps that ended on such a refusal, spiders.worker.feed), for the ready index (frontier.ready)
    lease: Lease | None = None
    removed: list[Task] = field(default_factory=list)  # dropped (disallowed, blacklisted): mark them complete
    drained: bool = False  # taken: the queue held no more tasks after it (the ready index drops the domain)

    @property
    def task(self) -> Task | None:
        return self.lease.task if self.lease else None


TIMED_SCRIPTS = frozenset({"take", "reserve", "renew", "requeue", "block"})
PENDING_SCRIPTS = frozenset({"complete"})  # these take tasks out of a crawl's pending count (lua/pending.lua)
PACED_SCRIPTS = frozenset({"take", "reserve"})  # these space hits (lua/pace.lua)


def _script(redis: RedisClient, name: str) -> Any:
    return redis.register_script(_source(name))


@cache
def _source(name: str) -> str:
    snippets = ([PENDING_LUA] if name in PENDING_SCRIPTS else []) + ([PACE_LUA] if name in PACED_SCRIPTS else [])
    source = lua_source(LUA / f"{name}.lua", *snippets)
    return LUA_NOW_MICROSECONDS + source if name in TIMED_SCRIPTS else source


def block_domain(redis: RedisClient, domain: str, seconds: float, now: float | None = None, *,
                 script: Any = None) -> float:
    """Hold every worker of the cluster off ``domain`` for ``seconds`` (``block:{<domain>}``, only ever extended;
    the politeness step refuses the domain until it ends, and :class:`frontier.blocks.BlockListener` tells every
    worker at once, on ``keys.BLOCKS_CHANNEL``); returns when the block ends (Redis time, seconds).

    ``now`` (seconds) replaces the Redis clock in tests; ``script`` is the block script already registered on
    ``redis`` (else it is registered now: the source is read once per process)."""
    block = script if script is not None else _script(redis, "block")
    until = block(keys=[keys.block(domain)],
                  args=[now_arg(now), max(0.0, float(seconds)), keys.BLOCKS_CHANNEL, domain])
    return int(until) / US


def retry_after_seconds(value: str | bytes | None, now: float, default: float = 60.0) -> float:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date (RFC 9110 10.2.3)."""
    if value is None:
        return default
    text = as_text(value).strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return default
    return max(0.0, when.timestamp() - now)


class Politeness(LeaseSteps):
    """The politeness steps of one worker (job id, spider type, host IP identity)."""

    def __init__(
        self,
        redis: RedisClient,
        job: str,
        spider_type: str,
        ip: str,
        rates: SiteRates,
        robots: RobotsCache | None = None,
        user_agent: str = "crawlfleet",
        lease_seconds: float = 600.0,
        stats: Any = None,
        horizon: float = 1.0,
        slack: float = 0.05,
        slack_share: float = 0.0,
    ) -> None:
        self.redis = redis
        self.job = job
        self.spider_type = spider_type
        self.ip = ip
        self.rates = rates
        self.robots = robots
        self.user_agent = user_agent
        self.lease_seconds = lease_seconds
        self.horizon = horizon  # how far ahead a step may reserve a hit (CRAWLFLEET_PACE_HORIZON)
        self.slack = slack  # the least time a request may leave after its slot (CRAWLFLEET_PACE_SLACK)
        self.slack_share = slack_share  # ...and the least share of the site's window (CRAWLFLEET_PACE_SLACK_SHARE)
        self.stats = stats  # messaging.stats.Stats or None: the cluster's counters
        self.counts: Counter[str] = Counter()  # the same events, counted in this process
        self._take = _script(redis, "take")
        self._reserve = _script(redis, "reserve")
        self._ack = _script(redis, "ack")
        self._renew = _script(redis, "renew")
        self._requeue = _script(redis, "requeue")
        self._block = _script(redis, "block")
        self._drop = _script(redis, "drop")
        self._complete = _script(redis, "complete")

    # --- taking ---------------------------------------------------------------------------------------------------
    def effective_rate(self, domain: str) -> Rate:
        """The site's rate (or the default), lowered to the robots.txt Crawl-delay when one is known."""
        rate = self.rates.rate_for(domain)
        delay = self.robots.crawl_delay(domain, self.user_agent) if self.robots is not None else None
        if delay and delay > 0 and rate.hits * delay > rate.window:
            # "Crawl-delay: d" asks for d seconds between requests: one hit per d-second window, not d-spaced
            # hits bunched at the start of a longer window
            rate = Rate(1, delay, 1, rate.adaptive)
        return rate

    def slack_floor(self, rate: Rate) -> int:
        """The least slack (microseconds) of a hit at this rate: CRAWLFLEET_PACE_SLACK, or the share
        CRAWLFLEET_PACE_SLACK_SHARE of the window when that is longer (the scripts raise it to a fifth of the spacing).
        It depends on the rate alone, so every hit of a site has the same slack and the windows' check stays exact."""
        return int(max(self.slack, rate.window * self.slack_share) * US)

    def take(self, domain: str, now: float | None = None, ip: str | None = None) -> TakeResult:
        """One politeness step for ``domain``: a leased task, or why not (and how long to wait).

        ``ip``: the address the request will leave from when it is not this host's (a proxy's exit address, seed
        4.3.1.2): its per-IP window is the one checked and recorded."""
        if self.rates.is_blacklisted(domain):
            return TakeResult(Outcome.BLACKLISTED, domain, removed=self.drop_queue(domain))
        removed: list[Task] = []
        for _ in range(MAX_DISALLOWED_PER_TAKE):
            expected = ""
            if self.robots is not None:
                head = self.redis.zrange(keys.queue(self.job, domain), 0, 0)
                if not head:
                    return TakeResult(Outcome.EMPTY, domain, removed=removed)
                expected = as_text(head[0])
                url = Task.decode(expected).url
                verdict = self.robots.allowed(url, self.user_agent)
                if verdict is None:
                    return self.robots_pending(domain, url, removed)
                if not verdict:
                    if self.redis.zrem(keys.queue(self.job, domain), expected):
                        removed.append(Task.decode(expected))
                        self._count("robots_disallowed")
                    continue
            result = self._step(domain, expected, now, ip or self.ip)
            if result.outcome == "changed":  # a new head arrived after the robots check: check it instead
                continue
            result.removed = removed
            return result
        return TakeResult(Outcome.DISALLOWED, domain, removed=removed)

    def robots_pending(self, domain: str, url: str, removed: list[Task] | None = None) -> TakeResult:
        """The step's answer when the robots.txt of ``url`` (the queue's head) is being fetched or is unreachable
        (RFC 9309: nothing allowed): the tasks wait, the domain is asked again after the cache's wait."""
        assert self.robots is not None  # a verdict is only pending when robots.txt is obeyed
        self._count(Outcome.ROBOTS_PENDING)
        return TakeResult(Outcome.ROBOTS_PENDING, domain, wait=self.robots.pending_wait(url), removed=removed or [])

    def take_many(self, domain: str, limit: int, now: float | None = None,
                  ip: str | None = None) -> list[TakeResult]:
        """Up to ``limit`` politeness steps for ``domain`` in two round trips instead of two each: the queue's first
        ``limit`` tasks checked against robots.txt at once, then one step per allowed task, pipelined. Each step is
        the same atomic call as :meth:`take` and sees the hits of the ones before it, so the windows hold exactly as
        with ``limit`` calls of :meth:`take`. Returns the steps that took, then the first that did not (if any);
        tasks dropped unfetched (robots.txt) are in the first result's ``removed``."""
        if limit <= 1 or self.rates.is_blacklisted(domain):
            return [self.take(domain, now, ip)]
        removed: list[Task] = []
        expected: list[str] = []
        if self.robots is None:
            expected = [""] * limit
        else:
            disallowed = []
            for raw in self.redis.zrange(keys.queue(self.job, domain), 0, limit - 1):
                member = as_text(raw)
                verdict = self.robots.allowed(Task.decode(member).url, self.user_agent)
                if verdict is None:
                    break
                if verdict:
                    expected.append(member)
                else:
                    disallowed.append(member)
            if disallowed and self.redis.zrem(keys.queue(self.job, domain), *disallowed):
                removed = [Task.decode(member) for member in disallowed]
                self._count("robots_disallowed", len(removed))
            if not expected:  # nothing allowed known yet: one ordinary step says why (empty, pending, ...)
                first = self.take(domain, now, ip)
                first.removed = removed + first.removed
                return [first]
        calls = [(self._take, *self._step_call(domain, head, now, ip or self.ip)) for head in expected]
        results = [self._step_result(domain, reply) for reply in run_scripts(self.redis, calls)]
        taken = [result for result in results if result.outcome == Outcome.TAKEN]
        refused = next((result for result in results if result.outcome != Outcome.TAKEN), None)
        out = taken + ([refused] if refused is not None and refused.outcome != "changed" else [])
        if not out:  # only "changed": a new head arrived meanwhile; the ordinary step looks at it
            out = [self.take(domain, now, ip)]
        out[0].removed = removed + out[0].removed
        return out

    def _step_call(self, domain: str, expected: str, now: float | None, ip: str) -> tuple[list[str], list[Any]]:
        rate = self.effective_rate(domain)
        return ([keys.queue(self.job, domain), keys.inflight(self.job, domain),
                 keys.lease_scores(self.job, domain), keys.throttle_type(self.spider_type, domain),
                 keys.throttle_ip(ip, domain), keys.block(domain), keys.hit_sequence(domain),
                 keys.pace_type(self.spider_type, domain), keys.pace_ip(ip, domain), keys.adaptive(domain)],
                [now_arg(now), rate.hits, int(rate.window * US), int(self.lease_seconds * US), expected,
                 int((rate.window + KEY_TTL_MARGIN) * 1000), self.lease_scores_ttl_ms(self.lease_seconds),
                 rate.burst, int(self.horizon * US), self.slack_floor(rate), int(rate.adaptive)])

    def _step(self, domain: str, expected: str, now: float | None, ip: str) -> TakeResult:
        step_keys, args = self._step_call(domain, expected, now, ip)
        return self._step_result(domain, self._take(keys=step_keys, args=args))

    def _step_result(self, domain: str, reply: Any) -> TakeResult:
        status, at, value = as_text(reply[0]), int(reply[1]) / US, int(reply[2])
        if status == "ok":
            self._count(Outcome.TAKEN)
            lease = Lease(domain, as_text(reply[3]), value / US, not_before=int(reply[4]) / US,
                          slack=int(reply[6]) / US, hit=as_text(reply[5]))
            return TakeResult(Outcome.TAKEN, domain, at, lease=lease, drained=len(reply) > 7 and int(reply[7]) == 0)
        if status in (Outcome.THROTTLED, Outcome.BLOCKED):
            self._count(status)
        return TakeResult(status, domain, at, wait=value / US)

    def reserve(self, domain: str, withdrawn: str = "", now: float | None = None,
                ip: str | None = None) -> Reservation:
        """Reserve a hit on ``domain`` for a request that goes out without a fresh slot: a follow-up of a task (a
        redirect, a retry), or a request that missed its slot (``withdrawn``: its hit, which is taken back). A slot
        beyond the horizon is only reported (``Reservation.recorded`` false): ask again then."""
        return self.reserve_many([(domain, withdrawn, ip)], now)[0]

    def reserve_many(self, wanted: Sequence[tuple[str, str, str | None]],
                     now: float | None = None) -> list[Reservation]:
        """:meth:`reserve` for ``(domain, withdrawn hit, ip)`` each, in one round trip on a plain Redis."""
        calls = []
        for domain, withdrawn, ip in wanted:
            rate = self.effective_rate(domain)
            address = ip or self.ip
            calls.append((self._reserve,
                          [keys.throttle_type(self.spider_type, domain), keys.throttle_ip(address, domain),
                           keys.hit_sequence(domain), keys.pace_type(self.spider_type, domain),
                           keys.pace_ip(address, domain), keys.adaptive(domain), keys.block(domain)],
                          [now_arg(now), rate.hits, int(rate.window * US), withdrawn,
                           int((rate.window + KEY_TTL_MARGIN) * 1000), rate.burst, self.slack_floor(rate),
                           int(rate.adaptive), int(self.horizon * US)]))
        replies = run_scripts(self.redis, calls)
        self._count("reserved", len(replies))
        return [Reservation(domain, int(reply[0]) / US, int(reply[1]) / US, int(reply[3]) / US, as_text(reply[2]))
                for (domain, _, _), reply in zip(wanted, replies, strict=True)]

    def drop_queue(self, domain: str) -> list[Task]:
        """Empty the job's queue of a (blacklisted) domain; the dropped tasks are counted and returned."""
        dropped = [Task.decode(raw) for raw in self._drop(keys=[keys.queue(self.job, domain)], args=[])]
        if dropped:
            self._count("blacklist_dropped", len(dropped))
            logger.info("dropped %d queued tasks of blacklisted %s", len(dropped), domain)
        return dropped

    def admits(self, url_or_domain: str) -> bool:
        """Whether new links to this domain may be enqueued (not blacklisted); counts refusals."""
        domain = domain_of(url_or_domain) if "://" in url_or_domain else url_or_domain
        if self.rates.is_blacklisted(domain):
            self._count("blacklist_refused")
            return False
        return True

    # --- blocks ---------------------------------------------------------------------------------------------------
    def block(self, domain: str, seconds: float, now: float | None = None) -> float:
        """Hold every worker of the cluster off ``domain`` for ``seconds``; returns when the block ends (Redis time)."""
        until = block_domain(self.redis, domain, seconds, now, script=self._block)
        self._count("blocks")
        return until

    def block_from_response(self, url: str, status: int, retry_after: str | bytes | None,
                            now: float | None = None, default: float = 60.0) -> float | None:
        """Block the URL's domain after a 429/503 for its Retry-After (``default`` seconds without one)."""
        if status not in (429, 503):
            return None
        current = now if now is not None else RedisClock(self.redis).now()
        return self.block(domain_of(url), retry_after_seconds(retry_after, current, default), now)

    def domains(self) -> list[str]:
        """The domains this job has queues for (maintained by the dispatcher in ``<job>:domains``)."""
        return sorted(as_text(member) for member in self.redis.smembers(keys.job_domains(self.job)))

    def _count(self, plugin: str, amount: int = 1) -> None:
        self.counts[plugin] += amount
        if self.stats is not None:
            try:
                self.stats.incr(plugin, amount)
            except Exception:  # counting must never stop a fetch
                logger.exception("could not count %s", plugin)
