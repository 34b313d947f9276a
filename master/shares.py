"""A site's share of the workers' queues: a few minutes of its own hits, never the whole backlog (issue 37).

A worker's queues are bounded as a whole (``master.dispatcher``: about CRAWLFLEET_DISPATCH_BACKLOG_MINUTES of its
work). Without a bound per site, one site paced at ten hits a minute with a few hundred pages waiting filled every
worker's bound with tasks that could only leave one every six seconds, and a new crawl waited behind them for
minutes. So each domain may have at most its *quota* of tasks in the workers' queues and leases, all jobs together
(the site's rate is cluster-wide): ``ceil(hits per minute x CRAWLFLEET_DISPATCH_SITE_MINUTES)``, at least one, with
the rate the workers apply (ZooKeeper site config, ``frontier.config_watch``). The rest of the site's tasks wait in
``seeds``, where they hold back nobody: the dispatcher passes them by (and remembers that it did, ``SkipMark``).

What a domain holds is ``pending:{<domain>}`` (every crawl's tasks in any job's queue, leases or requeue outbox of
the domain), changed atomically by landing, completion and requeue. Reading it for every task would cost a read per
task; instead the dispatcher counts what it places and reads the true count only when its own count says the domain
is full, and then at most once a second per full domain, at the end of the round that found it full (so a domain
with room again gets its tasks from the next round). A domain it knows nothing of starts at zero (a new leader
may overshoot a quota once, which the workers' pacing absorbs: a quota bounds a backlog, it is not what keeps a site
polite).
"""

from __future__ import annotations

import math
from typing import Any

from frontier.config_watch import SiteRates
from messaging import keys
from messaging.bounded import count_evictions, declare_memo

REFRESH_SECONDS = 1.0  # a full domain's count is read again at most this often
KNOWN_LIMIT = 200_000  # domains counted in memory; past it the counts start again from zero


class SiteShares:
    """Counts of tasks per domain in the workers' queues, against each domain's quota."""

    def __init__(self, redis: Any, sites: SiteRates, minutes: float) -> None:
        self.redis = redis
        self.sites = sites
        self.minutes = minutes
        declare_memo("share_domains")
        self._held: dict[str, int] = {}  # domain -> tasks in the workers' queues: last read plus placed since
        self._read_at: dict[str, float] = {}  # domain -> when its count was last read
        self._quotas: dict[str, int] = {}
        self._config_version: Any = None
        self.reads = 0  # counts read from Redis (benchmarks, tests)

    def quota(self, domain: str) -> int:
        """Tasks of ``domain`` the workers' queues may hold: its rate's worth of CRAWLFLEET_DISPATCH_SITE_MINUTES."""
        version = getattr(self.sites, "changes", None)
        if version != self._config_version:  # a site's config or the defaults changed: quotas follow at once
            self._quotas.clear()
            self._config_version = version
        quota = self._quotas.get(domain)
        if quota is None:
            rate = self.sites.rate_for(domain)
            per_minute = rate.hits * 60.0 / rate.window
            quota = self._quotas[domain] = max(1, math.ceil(per_minute * self.minutes))
        return quota

    def held(self, domain: str) -> int:
        return self._held.get(domain, 0)

    def full(self, domain: str) -> bool:
        return self._held.get(domain, 0) >= self.quota(domain)

    def placed(self, domain: str, n: int = 1) -> None:
        self._held[domain] = self._held.get(domain, 0) + n

    def stale_count(self, domain: str, now: float) -> bool:
        """Whether a full domain's count was last read REFRESH_SECONDS ago or more (it may have room again)."""
        return now - self._read_at.get(domain, -math.inf) >= REFRESH_SECONDS

    def refresh(self, domains: list[str], now: float) -> None:
        """Read the true counts of ``domains`` (one pipelined round trip)."""
        if not domains:
            return
        if len(self._held) > KNOWN_LIMIT:
            count_evictions("share_domains", len(self._held))
            self._held.clear()
            self._read_at.clear()
            self._quotas.clear()
        pipe = self.redis.pipeline(transaction=False)
        for domain in domains:
            pipe.hvals(keys.pending_domain(domain))
        for domain, counts in zip(domains, pipe.execute(), strict=True):
            self._held[domain] = sum(max(0, int(n)) for n in counts)
            self._read_at[domain] = now
        self.reads += len(domains)
