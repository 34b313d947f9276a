"""The politeness step: a job takes a task of a domain only when the cluster may hit that domain soon.

One atomic Lua step per fetch (``lua/take.lua``, seed 4.2.2), at the Redis clock: refuse while ``block:{d}`` (a
Retry-After) lasts; find the earliest *slot* at which a hit is allowed by both throttle keys and both pace buckets
(the pacing of :meth:`frontier.politeness.Politeness.pace`) and, only if that slot is at most the horizon ahead, pop
the highest-priority task of ``<job>:{d}:queue``, record the hit at its slot and lease the task in
``<job>:{d}:inflight`` until a deadline. Every key of the call has the domain as hash tag.

robots.txt is asked about the queue's head *before* the step (:meth:`frontier.politeness.Politeness.verdict`), and
the step pops only if the head is still that task (``changed`` otherwise), so a disallowed URL never spends a hit or
a lease; disallowed heads leave the queue and are handed back (``TakeResult.removed``) for the crawl's counts.

Three ways to take, the same steps each: :meth:`Taker.take` (one step, a read of the head first when robots.txt is
obeyed), :meth:`Taker.take_many` (up to N steps of one domain in two round trips: the heads, then the steps,
pipelined) and :meth:`Taker.take_domains` (the steps of a group of due domains in the same two round trips, one
plain pipeline per node on a Redis Cluster: :func:`frontier.node_pipes.run_by_node`). Each step sees the hits of
the ones before it, so the windows and the pacing are exactly those of single steps. :meth:`Taker.reserve_many`
records hits for requests that go out without a lease of their own (``lua/reserve.lua``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from frontier.client import lua
from frontier.client.leases import lease_scores_ttl_ms
from frontier.client.types import US, Lease, Outcome, Reservation, TakeResult, now_arg
from frontier.node_pipes import run_by_node
from frontier.politeness import Politeness
from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.scripts import run_scripts
from messaging.tasks import Task

logger = logging.getLogger(__name__)

KEY_TTL_MARGIN = 60.0  # idle throttle windows vanish this long after their last hit could matter
MAX_DISALLOWED_PER_TAKE = 64  # bound the work of one take() when a queue starts with many disallowed URLs

Call = tuple[Any, list[str], list[Any]]


class Taker:
    """The politeness steps of one job (job id, spider type, host IP identity) under ``politeness``'s rules."""

    def __init__(self, redis: RedisClient, job: str, spider_type: str, ip: str, politeness: Politeness,
                 lease_seconds: float) -> None:
        self.redis = redis
        self.job = job
        self.spider_type = spider_type
        self.ip = ip
        self.politeness = politeness
        self.lease_seconds = lease_seconds
        self.tally = politeness.tally
        self._take = lua.TAKE.on(redis)
        self._reserve = lua.RESERVE.on(redis)
        self._drop = lua.DROP.on(redis)

    # --- one step -------------------------------------------------------------------------------------------------
    def take(self, domain: str, now: float | None = None, ip: str | None = None) -> TakeResult:
        """One politeness step for ``domain``: a leased task, or why not (and how long to wait). ``ip``: the address
        the request will leave from when it is not this host's (a proxy's exit address, seed 4.3.1.2): its per-IP
        window is the one checked and recorded."""
        if self.politeness.is_blacklisted(domain):
            return TakeResult(Outcome.BLACKLISTED, domain, removed=self.drop_queue(domain))
        removed: list[Task] = []
        for _ in range(MAX_DISALLOWED_PER_TAKE):
            expected = ""
            if self.politeness.obeys_robots:
                head = self.redis.zrange(keys.queue(self.job, domain), 0, 0)
                if not head:
                    return TakeResult(Outcome.EMPTY, domain, removed=removed)
                expected = as_text(head[0])
                url = Task.decode(expected).url
                verdict = self.politeness.verdict(url, domain)
                if verdict is None:
                    return self.robots_pending(domain, url, removed)
                if not verdict:
                    if self.redis.zrem(keys.queue(self.job, domain), expected):
                        removed.append(Task.decode(expected))
                        self.tally.incr("robots_disallowed")
                    continue
            step_keys, args = self._step_call(domain, expected, now, ip or self.ip)
            result = self._step_result(domain, self._take(keys=step_keys, args=args))
            if result.outcome == Outcome.CHANGED:  # a new head arrived after the robots check: check it instead
                continue
            result.removed = removed
            return result
        return TakeResult(Outcome.DISALLOWED, domain, removed=removed)

    def robots_pending(self, domain: str, url: str, removed: list[Task] | None = None) -> TakeResult:
        """The step's answer when the robots.txt of ``url`` (the queue's head) is being fetched or is unreachable
        (RFC 9309: nothing allowed): the tasks wait, the domain is asked again after the cache's wait."""
        self.tally.incr(Outcome.ROBOTS_PENDING)
        return TakeResult(Outcome.ROBOTS_PENDING, domain, wait=self.politeness.pending_wait(url),
                          removed=removed or [])

    # --- batches of steps -----------------------------------------------------------------------------------------
    def take_many(self, domain: str, limit: int, now: float | None = None,
                  ip: str | None = None) -> list[TakeResult]:
        """Up to ``limit`` steps for ``domain`` in two round trips instead of two each. Returns the steps that took,
        then the first that did not (if any); tasks dropped unfetched (robots.txt) are in the first result's
        ``removed``."""
        if limit <= 1 or self.politeness.is_blacklisted(domain):
            return [self.take(domain, now, ip)]
        removed: list[Task] = []
        expected: list[str] = [""] * limit
        if self.politeness.obeys_robots:
            members = [as_text(raw) for raw in self.redis.zrange(keys.queue(self.job, domain), 0, limit - 1)]
            expected, disallowed, _ = self._allowed(domain, members)
            if disallowed and self.redis.zrem(keys.queue(self.job, domain), *disallowed):
                removed = [Task.decode(member) for member in disallowed]
                self.tally.incr("robots_disallowed", len(removed))
            if not expected:  # nothing allowed known yet: one ordinary step says why (empty, pending, ...)
                first = self.take(domain, now, ip)
                first.removed = removed + first.removed
                return [first]
        calls = [(self._take, *self._step_call(domain, head, now, ip or self.ip)) for head in expected]
        out = _first_refusal([self._step_result(domain, reply) for reply in run_scripts(self.redis, calls)])
        if not out:  # only "changed": a new head arrived meanwhile; the ordinary step looks at it
            out = [self.take(domain, now, ip)]
        out[0].removed = removed + out[0].removed
        return out

    def take_domains(self, domains: Sequence[str], limit: int, ip: str | None = None) -> list[list[TakeResult]]:
        """Up to ``limit`` steps per domain, for a group of due domains in two round trips; for each domain (in
        order) the steps that took, then the first that did not (if any), as :meth:`take_many`."""
        limit = max(1, limit)
        open_domains = [domain for domain in domains if not self.politeness.is_blacklisted(domain)]
        heads = self._heads(open_domains, limit)
        allowed = {domain: self._allowed(domain, members) for domain, members in heads.items()}
        removed = self._remove({domain: verdicts[1] for domain, verdicts in allowed.items()})
        calls: list[Call] = []
        owners: list[str] = []
        for domain in open_domains:
            for head in allowed[domain][0]:
                calls.append((self._take, *self._step_call(domain, head, None, ip or self.ip)))
                owners.append(domain)
        steps: dict[str, list[TakeResult]] = {domain: [] for domain in open_domains}
        for domain, reply in zip(owners, run_by_node(self.redis, calls), strict=True):
            steps[domain].append(self._step_result(domain, reply))
        out: list[list[TakeResult]] = []
        for domain in domains:
            if domain not in heads:  # blacklisted: the ordinary step drops its queue
                out.append([self.take(domain, ip=ip)])
                continue
            if not heads[domain]:
                out.append([TakeResult(Outcome.EMPTY, domain)])
                continue
            results = _first_refusal(steps[domain])
            expected, _, pending = allowed[domain]
            if not results and pending is not None and not expected:
                # the first head left waits for its robots.txt: asking again now would claim or poll a second time
                results = [self.robots_pending(domain, pending)]
            elif not results:  # all disallowed, or a new head arrived: the ordinary step says why
                results = [self.take(domain, ip=ip)]
            results[0].removed = removed[domain] + results[0].removed
            out.append(results)
        return out

    def _heads(self, domains: list[str], limit: int) -> dict[str, list[str]]:
        """The first ``limit`` tasks of each domain's queue, in one pipeline."""
        if not domains:
            return {}
        pipe = self.redis.pipeline(transaction=False)
        for domain in domains:
            pipe.zrange(keys.queue(self.job, domain), 0, limit - 1)
        return {domain: [as_text(raw) for raw in members]
                for domain, members in zip(domains, pipe.execute(), strict=True)}

    def _allowed(self, domain: str, members: list[str]) -> tuple[list[str], list[str], str | None]:
        """The heads a step may take (up to the first whose robots.txt is not known yet), the disallowed ones, and
        the URL of that first unknown head (``None``: every head's verdict is known)."""
        if not self.politeness.obeys_robots:
            return members, [], None
        allowed: list[str] = []
        disallowed: list[str] = []
        for member in members:
            url = Task.decode(member).url
            verdict = self.politeness.verdict(url, domain)
            if verdict is None:
                return allowed, disallowed, url
            (allowed if verdict else disallowed).append(member)
        return allowed, disallowed, None

    def _remove(self, disallowed: dict[str, list[str]]) -> dict[str, list[Task]]:
        """Disallowed heads leave their queues (one pipeline); only those really removed are handed back."""
        removed: dict[str, list[Task]] = {domain: [] for domain in disallowed}
        wanted = [(domain, members) for domain, members in disallowed.items() if members]
        if not wanted:
            return removed
        pipe = self.redis.pipeline(transaction=False)
        for domain, members in wanted:
            for member in members:
                pipe.zrem(keys.queue(self.job, domain), member)
        replies = iter(pipe.execute())
        for domain, members in wanted:
            removed[domain] = [Task.decode(member) for member in members if next(replies)]
            if removed[domain]:
                self.tally.incr("robots_disallowed", len(removed[domain]))
        return removed

    # --- the step script ------------------------------------------------------------------------------------------
    def _step_call(self, domain: str, expected: str, now: float | None, ip: str) -> tuple[list[str], list[Any]]:
        pace = self.politeness.pace(domain)
        rate = pace.rate
        return ([keys.queue(self.job, domain), keys.inflight(self.job, domain),
                 keys.lease_scores(self.job, domain), keys.throttle_type(self.spider_type, domain),
                 keys.throttle_ip(ip, domain), keys.block(domain), keys.hit_sequence(domain),
                 keys.pace_type(self.spider_type, domain), keys.pace_ip(ip, domain), keys.adaptive(domain)],
                [now_arg(now), rate.hits, int(rate.window * US), int(self.lease_seconds * US), expected,
                 int((rate.window + KEY_TTL_MARGIN) * 1000), lease_scores_ttl_ms(self.lease_seconds),
                 rate.burst, pace.horizon, pace.slack_floor, int(rate.adaptive)])

    def _step_result(self, domain: str, reply: Any) -> TakeResult:
        status, at, value = as_text(reply[0]), int(reply[1]) / US, int(reply[2])
        if status == "ok":
            self.tally.incr(Outcome.TAKEN)
            lease = Lease(domain, as_text(reply[3]), value / US, not_before=int(reply[4]) / US,
                          slack=int(reply[6]) / US, hit=as_text(reply[5]))
            return TakeResult(Outcome.TAKEN, domain, at, lease=lease, drained=len(reply) > 7 and int(reply[7]) == 0)
        if status in (Outcome.THROTTLED, Outcome.BLOCKED):
            self.tally.incr(status)
        return TakeResult(status, domain, at, wait=value / US)

    # --- hits without a lease -------------------------------------------------------------------------------------
    def reserve_many(self, wanted: Sequence[tuple[str, str, str | None]],
                     now: float | None = None) -> list[Reservation]:
        """A hit for each ``(domain, withdrawn hit, ip)``, in one round trip on a plain Redis (see
        :meth:`frontier.client.FrontierClient.reserve`)."""
        calls: list[Call] = []
        for domain, withdrawn, ip in wanted:
            pace = self.politeness.pace(domain)
            rate = pace.rate
            address = ip or self.ip
            calls.append((self._reserve,
                          [keys.throttle_type(self.spider_type, domain), keys.throttle_ip(address, domain),
                           keys.hit_sequence(domain), keys.pace_type(self.spider_type, domain),
                           keys.pace_ip(address, domain), keys.adaptive(domain), keys.block(domain)],
                          [now_arg(now), rate.hits, int(rate.window * US), withdrawn,
                           int((rate.window + KEY_TTL_MARGIN) * 1000), rate.burst, pace.slack_floor,
                           int(rate.adaptive), pace.horizon]))
        replies = run_scripts(self.redis, calls)
        self.tally.incr("reserved", len(replies))
        return [Reservation(domain, int(reply[0]) / US, int(reply[1]) / US, int(reply[3]) / US, as_text(reply[2]))
                for (domain, _, _), reply in zip(wanted, replies, strict=True)]

    # --- a blacklisted domain -------------------------------------------------------------------------------------
    def drop_queue(self, domain: str) -> list[Task]:
        """Empty the job's queue of a (blacklisted) domain; the dropped tasks are counted and returned."""
        dropped = [Task.decode(raw) for raw in self._drop(keys=[keys.queue(self.job, domain)], args=[])]
        if dropped:
            self.tally.incr("blacklist_dropped", len(dropped))
            logger.info("dropped %d queued tasks of blacklisted %s", len(dropped), domain)
        return dropped


def _first_refusal(results: list[TakeResult]) -> list[TakeResult]:
    """The steps that took, then the first that did not (a ``changed`` one is never handed out)."""
    taken = [result for result in results if result.outcome == Outcome.TAKEN]
    refused = next((result for result in results if result.outcome != Outcome.TAKEN), None)
    return taken + ([refused] if refused is not None and refused.outcome != Outcome.CHANGED else [])
