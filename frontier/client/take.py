"""The politeness step: a job takes a task of a domain only when the cluster may hit that domain soon.

One atomic Lua step per fetch (``lua/take.lua``, seed 4.2.2), at the Redis clock: refuse while ``block:{d}`` (a
Retry-After) lasts; find the earliest *slot* at which a hit is allowed by both throttle keys and both pace buckets
(the pacing of :meth:`frontier.politeness.Politeness.pace`) and, only if that slot is at most the horizon ahead, pop
the highest-priority task of ``<job>:{d}:queue``, record the hit at its slot and lease the task in
``<job>:{d}:inflight`` until a deadline. Every key of the call has the domain as hash tag.

robots.txt is asked about the queue's first tasks *before* the step (:meth:`frontier.politeness.Politeness.verdict`),
and the step pops exactly the task that was checked (``changed`` if it left meanwhile), so a disallowed URL never
spends a hit or a lease; disallowed tasks leave the queue and are handed back (``TakeResult.removed``) for the
crawl's counts. A host whose robots.txt is being fetched or is unreachable holds back only its own URLs: the read
passes them by and the step takes the next host's (a queue partitioned by domain or address holds several hosts;
:meth:`Taker._scan`, issue 37).

Three ways to take, the same steps each: :meth:`Taker.take` (one step, a read of the head first when robots.txt is
obeyed), :meth:`Taker.take_many` (up to N steps of one domain in two round trips: the heads, then one script call
for all the steps) and :meth:`Taker.take_domains` (the steps of a group of due domains in the same two round trips,
a script call per domain, pipelined: one plain pipeline per node on a Redis Cluster,
:func:`frontier.node_pipes.run_by_node`). The steps of a call read each bucket and window once and write them once
(``lua/pace.lua``); each step sees the hits of the ones before it, so the windows and the pacing are exactly those
of single steps. :meth:`Taker.reserve_many`
records hits for requests that go out without a lease of their own (``lua/reserve.lua``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from frontier.client import lua
from frontier.client.leases import lease_scores_ttl_ms
from frontier.client.types import US, Lease, Outcome, Reservation, TakeResult, now_arg
from frontier.node_pipes import run_by_node
from frontier.politeness import Politeness
from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.domains import authority, host_of
from messaging.scripts import run_scripts
from messaging.tasks import Task

logger = logging.getLogger(__name__)

KEY_TTL_MARGIN = 60.0  # idle throttle windows vanish this long after their last hit could matter
MAX_DISALLOWED_PER_TAKE = 64  # bound the work of one take() when a queue starts with many disallowed URLs
SKIP_SCAN = 256  # tasks read further into a queue whose first ones wait for their host's robots.txt
MIXED_PENDING_WAIT = 1.0  # a queue of several hosts whose tasks all wait for a robots.txt is asked again this often


@dataclass
class Scan:
    """What a read of a queue's first tasks found (:meth:`Taker._scan`)."""

    allowed: list[str] = field(default_factory=list)  # tasks a step may take, in queue order
    disallowed: list[str] = field(default_factory=list)  # tasks robots.txt disallows: they leave the queue
    pending: str | None = None  # the URL of the first task that waits for its host's robots.txt
    waiting: set[str] = field(default_factory=set)  # hosts whose robots.txt is pending
    empty: bool = False  # the queue held nothing

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
        waiting: set[str] = set()
        for _ in range(MAX_DISALLOWED_PER_TAKE):
            expected = ""
            if self.politeness.obeys_robots:
                scan = self._scan([domain], 1)[domain]
                removed += self._remove({domain: scan.disallowed})[domain]
                waiting |= scan.waiting
                if not scan.allowed:
                    if scan.pending is not None:
                        return self.robots_pending(domain, scan.pending, removed, waiting)
                    if scan.disallowed:
                        continue
                    return TakeResult(Outcome.EMPTY, domain, removed=removed)
                expected = scan.allowed[0]
            step_keys, args = self._step_call(domain, [expected], now, ip or self.ip)
            result = self._step_result(domain, self._take(keys=step_keys, args=args)[0])
            if result.outcome == Outcome.CHANGED:  # the task checked against robots.txt left meanwhile: look again
                continue
            result.removed, result.waiting = removed, waiting
            return result
        return TakeResult(Outcome.DISALLOWED, domain, removed=removed, waiting=waiting)

    def robots_pending(self, domain: str, url: str, removed: list[Task] | None = None,
                       waiting: set[str] | None = None) -> TakeResult:
        """The step's answer when every task it could take waits for its host's robots.txt (``url``: the first of
        them), which is being fetched or is unreachable (RFC 9309: nothing allowed): the tasks wait, the domain is
        asked again after the cache's wait."""
        self.tally.incr(Outcome.ROBOTS_PENDING)
        wait = self.politeness.pending_wait(url)
        if host_of(url) != domain:  # a queue of several hosts (a partition by domain or address): a task of another
            wait = min(wait, MIXED_PENDING_WAIT)  # host may land meanwhile, and it need not wait for this one
        return TakeResult(Outcome.ROBOTS_PENDING, domain, wait=wait, removed=removed or [], waiting=waiting or set())

    # --- batches of steps -----------------------------------------------------------------------------------------
    def take_many(self, domain: str, limit: int, now: float | None = None,
                  ip: str | None = None) -> list[TakeResult]:
        """Up to ``limit`` steps for ``domain`` in two round trips (one script call) instead of two each. Returns
        the steps that took,
        then the first that did not (if any); tasks dropped unfetched (robots.txt) are in the first result's
        ``removed``."""
        if limit <= 1 or self.politeness.is_blacklisted(domain):
            return [self.take(domain, now, ip)]
        removed: list[Task] = []
        expected: list[str] = [""] * limit
        waiting: set[str] = set()
        if self.politeness.obeys_robots:
            scan = self._scan([domain], limit)[domain]
            expected, waiting = scan.allowed, scan.waiting
            removed = self._remove({domain: scan.disallowed})[domain]
            if not expected:  # nothing allowed known yet: one ordinary step says why (empty, pending, ...)
                first = self.take(domain, now, ip)
                first.removed = removed + first.removed
                return [first]
        replies = run_scripts(self.redis, [(self._take, *self._step_call(domain, expected, now, ip or self.ip))])[0]
        out = _first_refusal([self._step_result(domain, reply) for reply in replies])
        if not out:  # only "changed": the tasks left meanwhile; the ordinary step looks again
            out = [self.take(domain, now, ip)]
        out[0].removed = removed + out[0].removed
        out[0].waiting |= waiting
        return out

    def take_domains(self, domains: Sequence[str], limit: int, ip: str | None = None) -> list[list[TakeResult]]:
        """Up to ``limit`` steps per domain, for a group of due domains in two round trips (three when a queue's
        first tasks wait for their host's robots.txt), for each domain (in order) the steps that took, then the
        first that did not (if any), as :meth:`take_many`."""
        limit = max(1, limit)
        open_domains = [domain for domain in domains if not self.politeness.is_blacklisted(domain)]
        scans = self._scan(open_domains, limit)
        removed = self._remove({domain: scan.disallowed for domain, scan in scans.items()})
        owners = [domain for domain in open_domains if scans[domain].allowed]
        calls: list[Call] = [(self._take, *self._step_call(domain, scans[domain].allowed, None, ip or self.ip))
                             for domain in owners]
        steps: dict[str, list[TakeResult]] = {domain: [] for domain in open_domains}
        for domain, replies in zip(owners, run_by_node(self.redis, calls), strict=True):
            steps[domain] = [self._step_result(domain, reply) for reply in replies]
        out: list[list[TakeResult]] = []
        for domain in domains:
            if domain not in scans:  # blacklisted: the ordinary step drops its queue
                out.append([self.take(domain, ip=ip)])
                continue
            scan = scans[domain]
            if scan.empty:
                out.append([TakeResult(Outcome.EMPTY, domain)])
                continue
            results = _first_refusal(steps[domain])
            if not results and scan.pending is not None and not scan.allowed:
                # every task read waits for its robots.txt: asking again now would claim or poll a second time
                results = [self.robots_pending(domain, scan.pending)]
            elif not results:  # all disallowed, or the tasks left meanwhile: the ordinary step says why
                results = [self.take(domain, ip=ip)]
            results[0].removed = removed[domain] + results[0].removed
            results[0].waiting |= scan.waiting
            out.append(results)
        return out

    def _scan(self, domains: list[str], limit: int) -> dict[str, Scan]:
        """For each domain, the first ``limit`` queued tasks a step may take — past those whose host's robots.txt is
        pending: a host holds back only its own URLs — with the disallowed ones met on the way. One round trip for
        the first ``limit`` tasks of every queue (pipelined), and one more, up to SKIP_SCAN tasks further, for the
        queues where a pending host was met before ``limit`` were found (a partition by domain or address mixes
        hosts in a queue)."""
        scans = {domain: Scan() for domain in domains}
        if not domains:
            return scans
        pipe = self.redis.pipeline(transaction=False)
        for domain in domains:
            pipe.zrange(keys.queue(self.job, domain), 0, limit - 1)
        deeper = []
        for domain, raw in zip(domains, pipe.execute(), strict=True):
            scan = scans[domain]
            scan.empty = not raw
            self._judge(domain, scan, [as_text(member) for member in raw], limit)
            if scan.pending is not None and len(scan.allowed) < limit and len(raw) == limit:
                deeper.append(domain)
        if deeper:
            pipe = self.redis.pipeline(transaction=False)
            for domain in deeper:
                pipe.zrange(keys.queue(self.job, domain), limit, limit + SKIP_SCAN - 1)
            for domain, raw in zip(deeper, pipe.execute(), strict=True):
                self._judge(domain, scans[domain], [as_text(member) for member in raw], limit)
        return scans

    def _judge(self, domain: str, scan: Scan, members: list[str], limit: int) -> None:
        """Ask robots.txt about ``members`` in queue order until ``limit`` are allowed; a host whose verdict is
        pending is asked once per scan, its other tasks are passed by."""
        if not self.politeness.obeys_robots:
            scan.allowed += members[:limit - len(scan.allowed)]
            return
        for member in members:
            if len(scan.allowed) >= limit:
                return
            url = Task.decode(member).url
            host = authority(url)
            if host in scan.waiting:
                continue
            verdict = self.politeness.verdict(url, domain)
            if verdict is None:
                scan.waiting.add(host)
                scan.pending = scan.pending or url
            else:
                (scan.allowed if verdict else scan.disallowed).append(member)

    def _remove(self, disallowed: dict[str, list[str]]) -> dict[str, list[Task]]:
        """Disallowed tasks leave their queues (one pipeline); only those really removed are handed back."""
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
    def _step_call(self, domain: str, heads: Sequence[str], now: float | None,
                   ip: str) -> tuple[list[str], list[Any]]:
        """One call of the step script for ``domain``: a step per head (the task checked against robots.txt, or ""
        for the queue's head, whichever it is then), each seeing the hits of the ones before it."""
        pace = self.politeness.pace(domain)
        rate = pace.rate
        return ([keys.queue(self.job, domain), keys.inflight(self.job, domain),
                 keys.lease_scores(self.job, domain), keys.throttle_type(self.spider_type, domain),
                 keys.throttle_ip(ip, domain), keys.block(domain),
                 keys.pace_type(self.spider_type, domain), keys.pace_ip(ip, domain), keys.adaptive(domain)],
                [now_arg(now), rate.hits, int(rate.window * US), int(self.lease_seconds * US),
                 int((rate.window + KEY_TTL_MARGIN) * 1000), lease_scores_ttl_ms(self.lease_seconds),
                 rate.burst, pace.horizon, pace.slack_floor, int(rate.adaptive), *heads])

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
                           keys.pace_type(self.spider_type, domain), keys.pace_ip(address, domain),
                           keys.adaptive(domain), keys.block(domain)],
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
