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

robots.txt is per host (and port), and so is the cache: ``robots:{<domain>}:<host>``, with the domain as the hash
tag like every domain key. Throttles are per domain, so a Crawl-delay applies to the domain from the rules of its
host that were read last.
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


def authority(url: str) -> str:
    """The host a robots.txt belongs to: the lower-case host name, with the port when the URL names a port."""
    parts = urlsplit(url)
    host = (parts.hostname or "").rstrip(".").lower()
    return f"{host}:{parts.port}" if parts.port else host


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
        self._memo: dict[str, tuple[Robots, float]] = {}  # by host
        self._latest: dict[str, Robots] = {}  # by domain: the rules of the host read last (Crawl-delay)

    def lookup(self, url: str) -> Robots | None:
        """The rules for ``url``'s host; fetched now if nobody has them; ``None`` while another process fetches
        (or, without a fetcher, while nobody has them: see :meth:`claim` and :meth:`store`)."""
        robots = self.cached(url)
        if robots is not None:
            return robots
        if self.fetch is None or not self.claim(url):
            return None
        try:
            body = self.fetch(robots_url(url))
            ttl = self.ttl
        except RobotsUnavailable as exc:
            logger.warning("robots.txt of %s unavailable, allowing all for %.0fs: %s", authority(url),
                           self.error_ttl, exc)
            body, ttl = "", self.error_ttl
        except BaseException:
            self.release(url)
            raise
        self.fetched += 1
        return self.store(url, body, ttl)

    def cached(self, url: str) -> Robots | None:
        """The rules of ``url``'s host if this process or the cluster has them; never fetches."""
        host = authority(url)
        memo = self._memo.get(host)
        now = self.clock.now()
        if memo is not None and memo[1] > now:
            return memo[0]
        domain = domain_of(url)
        raw = self.redis.get(keys.robots(domain, host))
        if raw is None:
            self._memo.pop(host, None)
            return None
        return self._remember(domain, host, raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw)

    def allowed(self, url: str, user_agent: str) -> bool | None:
        """Whether robots.txt allows ``url`` for ``user_agent``; ``None`` while the rules are being fetched."""
        robots = self.lookup(url)
        return None if robots is None else robots.allowed(url, user_agent)

    def crawl_delay(self, domain: str, user_agent: str) -> float | None:
        """The Crawl-delay of the domain's host whose rules were read last (throttles are per domain)."""
        robots = self._latest.get(domain)
        return None if robots is None else robots.crawl_delay(user_agent)

    def claim(self, url: str) -> bool:
        """Become the one process that fetches the robots.txt of ``url``'s host (for ``lock_seconds``)."""
        key = keys.robots_lock(domain_of(url), authority(url))
        return bool(self.redis.set(key, "1", nx=True, px=int(self.lock_seconds * 1000)))

    def release(self, url: str) -> None:
        self.redis.delete(keys.robots_lock(domain_of(url), authority(url)))

    def store(self, url: str, body: str, ttl: float | None = None) -> Robots:
        """Publish the robots.txt of ``url``'s host to the cluster and release the fetch lock."""
        body = body[:MAX_BODY]
        domain, host = domain_of(url), authority(url)
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(keys.robots(domain, host), body, px=max(1, int((ttl or self.ttl) * 1000)))
        pipe.delete(keys.robots_lock(domain, host))
        pipe.execute()
        return self._remember(domain, host, body)

    def forget(self, url: str) -> None:
        """Drop the rules of ``url``'s host everywhere (the next lookup fetches again)."""
        host = authority(url)
        self._memo.pop(host, None)
        self.redis.delete(keys.robots(domain_of(url), host))

    def _remember(self, domain: str, host: str, body: str) -> Robots:
        robots = Robots(domain, body, Protego.parse(body))
        self._memo[host] = (robots, self.clock.now() + self.local_seconds)
        self._latest[domain] = robots
        return robots
