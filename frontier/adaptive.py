"""Adaptive delay: a cluster-wide AutoThrottle, per site (``"adaptive": true`` in its site config).

Every worker reports the responses of an adaptive site (download latency, HTTP status, or the error); one Lua call
per batch (``lua/adapt.lua``) folds them into the site's shared delay in ``adaptive:{<domain>}``, and the politeness
step spaces the site's hits ``max(W/N, delay)`` apart (``lua/pace.lua``): never faster than the configured rate,
never slower than ``CRAWLFLEET_ADAPTIVE_MAX_DELAY``. The rule, sample by sample (:meth:`AdaptiveRule.next_delay`):

- a response with latency ``L``: ``target = L / C`` (C = CRAWLFLEET_ADAPTIVE_TARGET_CONCURRENCY, requests the site
  should be serving at once on the cluster's account), ``delay = max(target, (delay + target) / 2)``: a slower site
  is followed at once, a faster one halfway per response; a non-200 answer (a redirect, a 404: small and quick by
  nature) only ever slows it down;
- a 5xx, a timeout or a connection error: ``delay = 2 x max(delay, W/N, L)`` — the spacing at least doubles at each;
- always ``delay <= max_delay``; the spacing used is ``max(W/N, delay)``, so a healthy site returns to its rate.

This is Scrapy's AutoThrottle (``AUTOTHROTTLE_TARGET_CONCURRENCY``: ``target = latency / concurrency``, the same
"jump up, halve down" average, non-200 answers never lower it) with three differences: the delay is shared by every
worker of the cluster (AutoThrottle keeps one per process and download slot, so N processes hit a site N times as
hard); errors double it (AutoThrottle ignores them, only their latency counts); and the configured rate is a floor
(``AUTOTHROTTLE_START_DELAY``/``DOWNLOAD_DELAY`` play that part in Scrapy, per process).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from frontier.lua import LUA
from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.clock import NOW_MICROSECONDS_LUA
from messaging.scripts import lua_script, run_scripts

ADAPT = lua_script(LUA / "adapt.lua", NOW_MICROSECONDS_LUA)
US = 1_000_000
STATE_TTL_MS = 86_400_000  # a site not sampled for a day starts again from its configured rate


@dataclass(frozen=True)
class Sample:
    domain: str
    latency: float  # seconds (the download latency; the time until the error for an error)
    status: int = 200  # 0: no response (timeout, connection error)
    error: bool = False  # 5xx, timeout, connection error


@dataclass(frozen=True)
class AdaptiveRule:
    target_concurrency: float = 1.0
    max_delay: float = 60.0

    def next_delay(self, delay: float, sample: Sample, spacing: float) -> float:
        """The site's delay after one sample; ``spacing`` is its configured W/N (the floor errors double from)."""
        if sample.error:
            return min(self.max_delay, 2 * max(delay, spacing, sample.latency))
        target = sample.latency / self.target_concurrency
        new = max(target, (delay + target) / 2)
        if sample.status != 200 and new <= delay:
            return delay
        return min(self.max_delay, new)


@dataclass(frozen=True)
class AdaptiveState:
    delay: float  # seconds
    latency: float  # seconds, of the last sample
    errors: int  # errors in a row
    at: float  # Redis time of the last sample (0: never)


class AdaptiveDelay:
    """The shared delays of adaptive sites: report samples, read a site's state."""

    def __init__(self, redis: RedisClient, rule: AdaptiveRule | None = None) -> None:
        self.redis = redis
        self.rule = rule or AdaptiveRule()
        self._adapt = ADAPT.on(redis)

    def record(self, samples: Sequence[Sample], spacing: dict[str, float],
               now: float | None = None) -> dict[str, float]:
        """Fold the samples into their sites' delays (one call per site, one round trip on a plain Redis);
        ``spacing``: each site's configured W/N. Returns the new delay (seconds) per site."""
        by_domain: dict[str, list[Sample]] = {}
        for sample in samples:
            by_domain.setdefault(sample.domain, []).append(sample)
        calls = []
        for domain, batch in by_domain.items():
            args: list[Any] = ["" if now is None else str(round(now * US))]
            for sample in batch:
                args += [int(sample.latency * US), sample.status, int(sample.error)]
            args += [int(spacing.get(domain, 0.0) * US), repr(self.rule.target_concurrency),
                     int(self.rule.max_delay * US), STATE_TTL_MS]
            calls.append((self._adapt, [keys.adaptive(domain)], args))
        replies = run_scripts(self.redis, calls)
        return {domain: int(reply) / US for domain, reply in zip(by_domain, replies, strict=True)}

    def state(self, domain: str) -> AdaptiveState:
        raw = {as_text(k): int(v) for k, v in self.redis.hgetall(keys.adaptive(domain)).items()}
        return AdaptiveState(raw.get("delay", 0) / US, raw.get("latency", 0) / US, raw.get("errors", 0),
                             raw.get("at", 0) / US)
