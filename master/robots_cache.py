"""robots.txt shared by the whole cluster: fetched once, kept in ``robots:{<domain>}`` with a TTL.

The first process that needs a domain's rules takes ``robots:{<domain>}:lock`` (``SET NX`` with a short TTL) and
fetches; the others see the lock and skip the domain meanwhile (:meth:`RobotsCache.lookup` answers ``None``:
"pending"), so a cluster of N processes fetches each robots.txt once per TTL, not N times. Each process keeps the
parsed rules (protego, as Scrapy's default ``ROBOTSTXT_PARSER``) for a short while so that a fetch loop does not
re-read Redis for every URL.

Fetching is injected: ``fetch(robots_url) -> body``. The Scrapy side fetches through Scrapy (its own
:meth:`RobotsCache.claim` / :meth:`RobotsCache.store` when the download is asynchronous); :func:`fetch_http` is a
plain blocking fetch for tools, tests and benchmarks. As in Scrapy, a missing robots.txt (4xx) allows everything;
an unreachable one (5xx, network error) allows everything for ``error_ttl`` and is then fetched again.

The cache is keyed by domain (the hash tag of every domain key), while robots.txt is per host: the rules of the
first host of a domain that is fetched apply to its other hosts until the entry expires.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from protego import Protego

from messaging import keys
from messaging.clock import Clock, SystemClock
from messaging.domains import domain_of

logger = logging.getLogger(__name__)

MAX_BODY = 500 * 1024  # what Google reads of a robots.txt; the rest is ignored
DEFAULT_LOCK_SECONDS = 30.0
DEFAULT_LOCAL_SECONDS = 60.0

Fetcher = Callable[[str], str]


class RobotsUnavailable(Exception):
    """The robots.txt could not be read (5xx, network error): everything is allowed until the entry expires."""


@dataclass(frozen=True)
class Robots:
    domain: str
    body: str
    parser: Protego

    def allowed(self, url: str, user_agent: str) -> bool:
        return bool(self.parser.can_fetch(url, user_agent))

    def crawl_delay(self, user_agent: str) -> float | None:
        delay = self.parser.crawl_delay(user_agent)
        return float(delay) if delay else None


def robots_url(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/robots.txt"


def fetch_http(url: str, timeout: float = 10.0, user_agent: str = "crawlfleet") -> str:
    """GET a robots.txt with urllib (no proxies): the body, ``""`` for a 4xx, :class:`RobotsUnavailable` else."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(url, headers={"User-Agent": user_agent})
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.read(MAX_BODY).decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        if 400 <= exc.code < 500:
            return ""
        raise RobotsUnavailable(f"{url}: HTTP {exc.code}") from exc
    except (OSError, ValueError) as exc:
        raise RobotsUnavailable(f"{url}: {exc}") from exc


class RobotsCache:
    def __init__(
        self,
        redis: Any,
        fetch: Fetcher | None = None,
        ttl: float = 86400.0,
        error_ttl: float = 600.0,
        lock_seconds: float = DEFAULT_LOCK_SECONDS,
        local_seconds: float = DEFAULT_LOCAL_SECONDS,
        clock: Clock | None = None,
    ) -> None:
        self.redis = redis
        self.fetch = fetch
        self.ttl = ttl
        self.error_ttl = error_ttl
        self.lock_seconds = lock_seconds
        self.local_seconds = min(local_seconds, ttl)
        self.clock = clock or SystemClock()  # only for this process's memo
        self.fetched = 0  # robots.txt files this process fetched (tests, stats)
        self._memo: dict[str, tuple[Robots, float]] = {}

    def lookup(self, url: str) -> Robots | None:
        """The rules for ``url``'s domain; fetched now if nobody has them; ``None`` while another process fetches."""
        domain = domain_of(url)
        robots = self.cached(domain)
        if robots is not None:
            return robots
        if self.fetch is None or not self.claim(domain):
            return None
        try:
            body = self.fetch(robots_url(url))
            ttl = self.ttl
        except RobotsUnavailable as exc:
            logger.warning("robots.txt of %s unavailable, allowing all for %.0fs: %s", domain, self.error_ttl, exc)
            body, ttl = "", self.error_ttl
        except BaseException:
            self.release(domain)
            raise
        self.fetched += 1
        return self.store(domain, body, ttl)

    def cached(self, domain: str) -> Robots | None:
        """The rules if this process or the cluster has them; never fetches."""
        memo = self._memo.get(domain)
        now = self.clock.now()
        if memo is not None and memo[1] > now:
            return memo[0]
        raw = self.redis.get(keys.robots(domain))
        if raw is None:
            self._memo.pop(domain, None)
            return None
        return self._remember(domain, raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw)

    def allowed(self, url: str, user_agent: str) -> bool | None:
        """Whether robots.txt allows ``url`` for ``user_agent``; ``None`` while the rules are being fetched."""
        robots = self.lookup(url)
        return None if robots is None else robots.allowed(url, user_agent)

    def crawl_delay(self, domain: str, user_agent: str) -> float | None:
        robots = self.cached(domain)
        return None if robots is None else robots.crawl_delay(user_agent)

    def claim(self, domain: str) -> bool:
        """Become the one process that fetches the domain's robots.txt (for ``lock_seconds``)."""
        return bool(self.redis.set(keys.robots_lock(domain), "1", nx=True, px=int(self.lock_seconds * 1000)))

    def release(self, domain: str) -> None:
        self.redis.delete(keys.robots_lock(domain))

    def store(self, domain: str, body: str, ttl: float | None = None) -> Robots:
        """Publish a fetched robots.txt to the cluster and release the fetch lock."""
        body = body[:MAX_BODY]
        self.redis.set(keys.robots(domain), body, px=max(1, int((ttl or self.ttl) * 1000)))
        self.release(domain)
        return self._remember(domain, body)

    def forget(self, domain: str) -> None:
        """Drop the domain's rules everywhere (the next lookup fetches again)."""
        self._memo.pop(domain, None)
        self.redis.delete(keys.robots(domain))

    def _remember(self, domain: str, body: str) -> Robots:
        robots = Robots(domain, body, Protego.parse(body))
        self._memo[domain] = (robots, self.clock.now() + self.local_seconds)
        return robots
