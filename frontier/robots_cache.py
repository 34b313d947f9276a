"""robots.txt shared by the whole cluster, by RFC 9309: fetched once per host, kept in ``robots:{<domain>}:<host>``.

**Claim.** The first process that needs a host's rules claims the fetch (``lua/robots_claim.lua``: in one call it
returns the cached rules, or the host's outage, or claims ``robots:{<domain>}:<host>:lock`` with its own token, so a
robots.txt stored between a check and a claim can never be fetched twice). The others see the claim and wait
(:meth:`RobotsCache.lookup` answers ``None``: "pending"). The holder keeps the claim for as long as its fetch runs:
:class:`Claims` knows the fetches this process runs and :meth:`RobotsCache.renew_claims` extends each one every
third of ``lock_seconds`` (``lua/robots_renew.lua``, only while the claim is still the caller's), up to
``fetch_seconds`` (the longest a fetch can take: a download timeout per redirect hop). A holder that dies stops
renewing and its claim expires after ``lock_seconds``. So one host's robots.txt is fetched once per expiry however
slow it is.

**Answers** (:mod:`frontier.robots_rules`): a 2xx body is stored for ``ttl`` (at most 500 KiB of it); a 4xx is stored
as ``""`` (allow all) for ``ttl``; a 5xx or a network error is an *outage* (``lua/robots_down.lua``,
``robots:{<domain>}:<host>:down``): nothing of the host is fetched, its tasks wait in their queues (they are not
dropped), and the fetch is tried again after ``first_retry`` seconds, twice as long after each failure up to
``error_ttl`` (or after the server's Retry-After). When the outage has lasted ``outage_limit`` seconds (default one
day; RFC 9309 2.3.1.3 names 30 days as an example of "a reasonably long period"), the robots.txt is treated as
unavailable (allow all) until the next attempt; the first successful fetch ends the outage.

Each process keeps what it read for a short while (``local_seconds``; an outage until its next attempt) so that a
fetch loop does not re-read Redis for every URL. Fetching is injected: ``fetch(robots_url) -> body``, raising
:class:`RobotsUnavailable` for a server or network error; the Scrapy side fetches through Scrapy with
:meth:`RobotsCache.claim` / :meth:`store` / :meth:`store_failure` (``spiders.worker.robots``); :func:`fetch_http` is
a plain blocking fetch for tools, tests and benchmarks.

robots.txt is per host (and port), and so is the cache, with the registered domain as the hash tag. Throttles are
per queue (a registered domain, a host or an address: the crawl's partition), so a Crawl-delay applies to a queue
from the rules of its host that were read last.
"""

from __future__ import annotations

import logging
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from frontier.client.robots import RobotsRecords
from frontier.robots_rules import (
    MAX_BODY,
    MAX_REDIRECTS,
    UNREACHABLE,
    RobotsRules,
    authority,
    cap_body,
    robots_url,
    status_kind,
)
from messaging.bounded import BoundedDict
from messaging.clients import RedisClient
from messaging.clock import Clock, SystemClock
from messaging.domains import domain_of

__all__ = ["Claims", "Robots", "RobotsCache", "RobotsUnavailable", "authority", "fetch_http", "robots_url"]

logger = logging.getLogger(__name__)

DEFAULT_LOCK_SECONDS = 30.0
DEFAULT_LOCAL_SECONDS = 60.0
DEFAULT_FETCH_SECONDS = (MAX_REDIRECTS + 1) * 30.0 + 30.0  # a download timeout per hop, and the downloader's queue
DEFAULT_OUTAGE_LIMIT = 86400.0
FIRST_RETRY = 15.0  # seconds before an unreachable robots.txt is asked again; doubles up to error_ttl
PENDING_WAIT = 0.2  # another process fetches: look again after this
# this process fetches: its store asks the domain again at once (spiders.worker.robots), this is only the latest
MINE_WAIT = 1.0
MEMO_HOSTS = 10_000  # hosts whose rules (or outage) one process keeps in memory, the most recently used
LONGEST_WAIT = 60.0  # an outage: look again after its next attempt, but at least this often

Fetcher = Callable[[str], str]


class RobotsUnavailable(Exception):
    """The robots.txt could not be read (5xx, network error): nothing of the host is crawled for now."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Robots:
    domain: str
    body: str
    rules: RobotsRules

    def allowed(self, url: str, user_agent: str) -> bool:
        return self.rules.allowed(url, user_agent)

    def crawl_delay(self, user_agent: str) -> float | None:
        return self.rules.crawl_delay(user_agent)


@dataclass(frozen=True)
class Outage:
    """A host whose robots.txt is unreachable: asked again at ``retry_at`` (this process's clock)."""

    retry_at: float
    why: str


class _RedirectLimit(urllib.request.HTTPRedirectHandler):
    max_redirections = MAX_REDIRECTS


def fetch_http(url: str, timeout: float = 10.0, user_agent: str = "crawlfleet") -> str:
    """GET a robots.txt with urllib (no proxies, five redirects): the body, ``""`` when unavailable (4xx),
    :class:`RobotsUnavailable` when unreachable (5xx, 429, network error)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _RedirectLimit())
    request = urllib.request.Request(url, headers={"User-Agent": user_agent})
    try:
        with opener.open(request, timeout=timeout) as response:
            return cap_body(response.read(1 << 20))
    except urllib.error.HTTPError as exc:
        if status_kind(exc.code) != UNREACHABLE:
            return ""
        raise RobotsUnavailable(f"{url}: HTTP {exc.code}", _retry_after(exc.headers.get("Retry-After"))) from exc
    except (OSError, ValueError) as exc:
        raise RobotsUnavailable(f"{url}: {exc}") from exc


def _retry_after(value: str | None) -> float | None:
    return float(value) if value and value.strip().isdigit() else None


class Claims:
    """The robots.txt fetches this process runs, by host URL: which claims to renew now (pure, on a given clock)."""

    def __init__(self, lock_seconds: float, fetch_seconds: float, clock: Clock) -> None:
        self.lock_seconds = lock_seconds
        self.fetch_seconds = fetch_seconds
        self.clock = clock
        self._held: dict[str, tuple[float, float]] = {}  # url -> (claimed at, renewed at)
        self._lock = threading.Lock()

    def add(self, url: str) -> None:
        now = self.clock.now()
        with self._lock:
            self._held[url] = (now, now)

    def discard(self, url: str) -> None:
        with self._lock:
            self._held.pop(url, None)

    def __contains__(self, url: str) -> bool:
        return url in self._held

    def holds_host(self, host: str) -> bool:
        """Whether a fetch of this host's robots.txt (``authority``) is this process's."""
        with self._lock:
            return any(authority(url) == host for url in self._held)

    def __len__(self) -> int:
        return len(self._held)

    def due(self) -> tuple[list[str], list[str]]:
        """(claims to renew now: a third of the claim's TTL has passed since the last renewal, claims given up:
        their fetch has run longer than any fetch can, so it was lost). Renewed ones count as renewed now."""
        now = self.clock.now()
        renew, lost = [], []
        with self._lock:
            for url, (claimed, renewed) in list(self._held.items()):
                if now - claimed > self.fetch_seconds:
                    lost.append(url)
                    del self._held[url]
                elif now - renewed >= self.lock_seconds / 3:
                    renew.append(url)
                    self._held[url] = (claimed, now)
        return renew, lost


class RobotsCache:
    def __init__(
        self,
        redis: RedisClient,
        fetch: Fetcher | None = None,
        ttl: float = 86400.0,
        error_ttl: float = 600.0,
        lock_seconds: float = DEFAULT_LOCK_SECONDS,
        local_seconds: float = DEFAULT_LOCAL_SECONDS,
        clock: Clock | None = None,
        outage_limit: float = DEFAULT_OUTAGE_LIMIT,
        first_retry: float = FIRST_RETRY,
        fetch_seconds: float = DEFAULT_FETCH_SECONDS,
        redis_now: Callable[[], float | None] = lambda: None,
    ) -> None:
        self.redis = redis
        self.fetch = fetch
        self.ttl = ttl
        self.error_ttl = error_ttl
        self.lock_seconds = lock_seconds
        self.local_seconds = min(local_seconds, ttl)
        self.outage_limit = outage_limit
        self.first_retry = min(first_retry, error_ttl)
        self.clock = clock or SystemClock()  # this process's memo and claims
        self.redis_now = redis_now  # the scripts' time: None = the Redis clock (tests pass simulated time)
        self.token = uuid.uuid4().hex  # this process's claims
        self.claims = Claims(lock_seconds, fetch_seconds, self.clock)
        self.fetched = 0  # robots.txt files this process fetched (tests, stats)
        # by host, the most recently used MEMO_HOSTS (a broad crawl meets millions of hosts): one evicted is read
        # again from Redis (``memo_evictions``)
        self._memo: BoundedDict[str, tuple[Robots | Outage, float]] = BoundedDict(MEMO_HOSTS, touch=True,
                                                                                   memo="robots_hosts")
        # by domain: the rules of the host read last (Crawl-delay), as many domains
        self._latest: BoundedDict[str, Robots] = BoundedDict(MEMO_HOSTS, touch=True, memo="robots_domains")
        self.records = RobotsRecords(redis)  # the frontier client's robots.txt records (frontier.client)

    @property
    def memo_evictions(self) -> int:
        """Hosts (and domains) forgotten to stay within :data:`MEMO_HOSTS` since the start."""
        return self._memo.evicted + self._latest.evicted

    # --- reading --------------------------------------------------------------------------------------------------
    def lookup(self, url: str, domain: str | None = None) -> Robots | None:
        """The rules for ``url``'s host; fetched now (blocking) if nobody has them and this cache has a fetcher;
        ``None`` while another process fetches, while the host's robots.txt is unreachable, or (without a
        fetcher) while nobody has them. ``domain``: the queue the URL is a task of (a fetch is a hit on it)."""
        state = self.state(url)
        if state != "claimed":
            return state if isinstance(state, Robots) else None
        if self.fetch is None:
            return None
        try:
            body = self.fetch(robots_url(url))
        except RobotsUnavailable as exc:
            self.fetched += 1
            return self.store_failure(url, str(exc), exc.retry_after)
        except BaseException:
            self.release(url)
            raise
        self.fetched += 1
        return self.store(url, body)

    def state(self, url: str) -> Robots | Outage | str:
        """The host's rules, its outage, ``"claimed"`` (this call claimed the fetch: the caller fetches) or
        ``"pending"`` (a fetch runs, here or elsewhere)."""
        host = authority(url)
        memo = self._memo.get(host)
        now = self.clock.now()
        if memo is not None and memo[1] > now:
            return memo[0]
        domain = domain_of(url)
        reply = self.records.claim(domain, host, self.token, int(self.lock_seconds * 1000), self.redis_now())
        kind = reply[0]
        if kind == "cached":
            return self._remember(domain, host, reply[1])
        if kind == "down":
            retry_in = float(reply[1])
            outage = Outage(now + retry_in, reply[2])
            self._memo[host] = (outage, now + min(retry_in, self.local_seconds))
            return outage
        self._memo.pop(host, None)
        if kind == "claimed":
            self.claims.add(url)
        return "claimed" if kind == "claimed" else "pending"

    def cached(self, url: str) -> Robots | None:
        """The rules of ``url``'s host if this process or the cluster has them; never fetches (nor claims)."""
        host = authority(url)
        memo = self._memo.get(host)
        if memo is not None and memo[1] > self.clock.now() and isinstance(memo[0], Robots):
            return memo[0]
        domain = domain_of(url)
        body = self.records.cached(domain, host)
        return None if body is None else self._remember(domain, host, body)

    def allowed(self, url: str, user_agent: str, domain: str | None = None) -> bool | None:
        """Whether robots.txt allows ``url`` for ``user_agent`` (its product token); ``None`` while the rules are
        being fetched or the host's robots.txt is unreachable: wait :meth:`pending_wait`, do not drop the URL.
        ``domain``: the queue the URL is a task of (see :meth:`lookup`)."""
        robots = self.lookup(url, domain)
        if robots is None:
            return None
        if domain is not None:
            self._latest[domain] = robots  # the queue's Crawl-delay: its host's read last (crawl_delay)
        return robots.allowed(url, user_agent)

    def pending_wait(self, url: str) -> float:
        """How long a URL whose verdict was ``None`` should wait: until the next attempt of an outage, else a
        moment (another process is fetching), or longer when this process fetches it (whoever stores it may ask
        the domain again at once: the worker's feed does, so its walk does not poll its own fetch)."""
        host = authority(url)
        memo = self._memo.get(host)
        if memo is not None and isinstance(memo[0], Outage):
            return min(LONGEST_WAIT, max(PENDING_WAIT, memo[0].retry_at - self.clock.now()))
        return MINE_WAIT if self.claims.holds_host(host) else PENDING_WAIT

    def crawl_delay(self, domain: str, user_agent: str) -> float | None:
        """The Crawl-delay of the queue's (``domain``: a registered domain, a host or an address) host whose rules
        were read last (throttles are per queue)."""
        robots = self._latest.get(domain)
        return None if robots is None else robots.crawl_delay(user_agent)

    # --- the fetch of one host ------------------------------------------------------------------------------------
    def claim(self, url: str) -> bool:
        """Become the one process that fetches the robots.txt of ``url``'s host (renew with :meth:`renew_claims`);
        False when the rules are known, the host is in an outage or another process fetches."""
        self._memo.pop(authority(url), None)
        return self.state(url) == "claimed"

    def release(self, url: str) -> None:
        """Give up this process's claim (a fetch that could not be made): another process may claim it at once."""
        self.claims.discard(url)
        self.records.release(domain_of(url), authority(url), self.token)

    def store(self, url: str, body: str, ttl: float | None = None) -> Robots:
        """Publish the robots.txt of ``url``'s host (``""``: unavailable, allow all), end its outage, release
        the claim."""
        data = body.encode("utf-8")
        if len(data) > MAX_BODY:
            body = cap_body(data)
        domain, host = domain_of(url), authority(url)
        self.records.store(domain, host, self.token, body, max(1, int((ttl or self.ttl) * 1000)))
        self.claims.discard(url)
        return self._remember(domain, host, body)

    def store_failure(self, url: str, why: str, retry_after: float | None = None) -> Robots | None:
        """A server or network error: the host's outage begins or goes on (``None``), or has lasted longer than
        ``outage_limit`` (the rules are then "allow all" until the next attempt). Releases the claim."""
        domain, host = domain_of(url), authority(url)
        kind, lasted, retry_in = self.records.down(domain, host, self.token, self.redis_now(), self.first_retry,
                                                   self.error_ttl, retry_after, self.outage_limit, why[:300])
        self.claims.discard(url)
        if kind == "escaped":
            logger.warning("robots.txt of %s unreachable for %.0f s (over the %.0f-s outage limit): allowing all "
                           "until the next attempt in %.0f s: %s", host, lasted, self.outage_limit, retry_in, why)
            return self._remember(domain, host, "")
        logger.warning("robots.txt of %s unreachable (%s): nothing of it is crawled; next attempt in %.0f s", host,
                       why, retry_in)
        now = self.clock.now()
        self._memo[host] = (Outage(now + retry_in, why), now + min(retry_in, self.local_seconds))
        return None

    def renew_claims(self) -> list[str]:
        """Extend the claims of the fetches this process runs (call it every third of ``lock_seconds`` or more
        often: only due claims cost a call); returns the host URLs whose claim was lost."""
        renew, lost = self.claims.due()
        for url in lost:
            logger.warning("robots.txt fetch for %s ran longer than %.0f s: its claim is left to expire",
                           authority(url), self.claims.fetch_seconds)
        renewed_claims = self.records.renew([(domain_of(url), authority(url)) for url in renew], self.token,
                                            int(self.lock_seconds * 1000))
        for url, renewed in zip(renew, renewed_claims, strict=True):
            if not renewed:
                self.claims.discard(url)
                lost.append(url)
        return lost

    def forget(self, url: str) -> None:
        """Drop the rules of ``url``'s host everywhere (the next lookup fetches again)."""
        host = authority(url)
        self._memo.pop(host, None)
        self.records.forget(domain_of(url), host)

    def _remember(self, domain: str, host: str, body: str) -> Robots:
        robots = Robots(domain, body, RobotsRules(body))
        self._memo[host] = (robots, self.clock.now() + self.local_seconds)
        self._latest[domain] = robots
        return robots
