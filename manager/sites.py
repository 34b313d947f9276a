"""The *Sites* page's data: per domain, its queues, rate, spacing, next allowed hit, block, robots.txt and statuses.

The domains are those of the per-job domain sets (``<job>:domains`` of every registered worker) and the sites with
their own configuration in ZooKeeper: one SUNION and the site watch's memory, never a scan of the keyspace. A search
filters them by substring and a page shows :data:`PER_PAGE`; only that page's domains are then read, in two
pipelined round trips. Rates come from ZooKeeper through the site watch (:class:`frontier.config_watch
.SiteConfigWatch`, what the workers use); the spacing of a rate is its window divided by its hits. The throttle
windows are those the politeness step keeps (``<spider type>:{d}:throttle``, scores in microseconds of the Redis
clock): when a spider type has used its hits, its next allowed hit is when the oldest counted hit leaves the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from frontier.registry import WorkerRegistry
from messaging import keys, spider_types
from messaging.clients import as_text
from messaging.clock import RedisClock
from messaging.tasks import Task

PER_PAGE = 50
SPIDER_TYPES = spider_types.NAMES
MICRO = 1_000_000


@dataclass
class SiteQuery:
    search: str = ""
    page: int = 1


def all_domains(redis: Any, configured: set[str]) -> list[str]:
    """Every domain with a queue (of a registered worker) or a configuration of its own, sorted."""
    jobs = list(WorkerRegistry(redis).live())
    found = {as_text(d) for d in redis.sunion(*[keys.job_domains(job) for job in jobs])} if jobs else set()
    return sorted(found | configured)


def sites_view(redis: Any, watch: Any, query: SiteQuery) -> dict[str, Any]:
    configured = set(watch.sites) if hasattr(watch, "sites") else set()
    domains = all_domains(redis, configured)
    if query.search:
        needle = query.search.lower()
        domains = [d for d in domains if needle in d]
    pages = max(1, -(-len(domains) // PER_PAGE))
    page = min(max(1, query.page), pages)
    shown = domains[(page - 1) * PER_PAGE: page * PER_PAGE]
    return {"sites": site_rows(redis, watch, shown), "total": len(domains), "site_page": page, "site_pages": pages,
            "search": query.search, "defaults": _rate_text(watch.defaults.hits, watch.defaults.window)}


def site_rows(redis: Any, watch: Any, domains: list[str]) -> list[dict[str, Any]]:
    now = RedisClock(redis).now()
    jobs = list(WorkerRegistry(redis).live())
    pipe = redis.pipeline(transaction=False)
    for domain in domains:
        for job in jobs:
            pipe.zcard(keys.queue(job, domain))
            pipe.zcard(keys.inflight(job, domain))
            pipe.zrange(keys.queue(job, domain), 0, 0)
            pipe.zrange(keys.inflight(job, domain), 0, 0)
        pipe.get(keys.block(domain))
        pipe.hgetall(keys.site_statuses(domain))
        for spider_type in SPIDER_TYPES:
            pipe.zrange(keys.throttle_type(spider_type, domain), 0, -1, withscores=True)
    replies = iter(pipe.execute() if domains else [])
    rows = []
    for domain in domains:
        queued = leased = 0
        hosts = {domain}
        for _job in jobs:
            queued += int(next(replies))
            leased += int(next(replies))
            hosts |= {_authority(member) for member in next(replies)}  # the next queued task's host
            hosts |= {_authority(member) for member in next(replies)}  # and a leased one's
        blocked = next(replies)
        statuses = {as_text(k): int(v) for k, v in next(replies).items()}
        windows = [next(replies) for _ in SPIDER_TYPES]
        rate = watch.rate_for(domain)
        config = watch.site(domain)
        rows.append({
            "domain": domain, "queued": queued, "leased": leased, "hosts": sorted(h for h in hosts if h),
            "rate": _rate_text(rate.hits, rate.window), "hits": rate.hits, "window": rate.window,
            "own_rate": config.rate is not None, "blacklisted": config.blacklisted,
            "spacing": rate.window / rate.hits if rate.hits else None,
            "next_hit": _next_hit(windows, rate.hits, rate.window, now),
            "blocked_until": _block(blocked, now), "statuses": dict(sorted(statuses.items())),
            "pages": sum(statuses.values()),
        })  # fmt: skip
    robots = _robots(redis, rows)
    for row in rows:
        row["robots"] = robots[row["domain"]]
    return rows


def _authority(member: bytes) -> str:
    try:
        return urlsplit(Task.decode(member).url).netloc.lower()
    except (ValueError, TypeError):
        return ""


def _robots(redis: Any, rows: list[dict[str, Any]]) -> dict[str, str]:
    """Which hosts of each domain have robots.txt in the shared cache (the hosts its queued tasks name)."""
    pipe = redis.pipeline(transaction=False)
    asked = [(row["domain"], host) for row in rows for host in row["hosts"]]
    for domain, host in asked:
        pipe.exists(keys.robots(domain, host))
    cached: dict[str, list[str]] = {row["domain"]: [] for row in rows}
    for (domain, host), present in zip(asked, pipe.execute() if asked else [], strict=True):
        if present:
            cached[domain].append(host)
    return {domain: ("cached: " + ", ".join(hosts)) if hosts else "not cached" for domain, hosts in cached.items()}


def _next_hit(windows: list[list[tuple[bytes, float]]], hits: int, window: float, now: float) -> float | None:
    """Seconds until some spider type may hit the domain again (0: now); None: no hit counted."""
    waits = []
    for members in windows:
        scores = sorted(score / MICRO for _, score in members if score / MICRO > now - window)
        if not scores:
            continue
        waits.append(0.0 if len(scores) < hits else max(0.0, scores[len(scores) - hits] + window - now))
    return min(waits) if waits else None


def _block(raw: bytes | None, now: float) -> float | None:
    if raw is None:
        return None
    until = float(raw) / MICRO
    return until - now if until > now else None


def _rate_text(hits: int, window: float) -> str:
    return f"{hits} per {window:g} s"
