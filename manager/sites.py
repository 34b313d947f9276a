"""The *Sites* page's data: per domain, its queues, rate, spacing, next allowed hit, block, robots.txt and statuses.

The domains are those of the per-job domain sets (``<job>:domains`` of every registered worker) and the sites with
their own configuration in ZooKeeper: one SUNION and the site watch's memory, never a scan of the keyspace. A search
filters them by substring and a page shows :data:`PER_PAGE`; only that page's domains are then read, in two
pipelined round trips, through the frontier's reader (:class:`frontier.client.FrontierReader`: the queues, leases,
block, throttle windows and robots.txt of each, which only the frontier's client formats). Rates come from ZooKeeper
through the site watch (:class:`frontier.config_watch.SiteConfigWatch`, what the workers use); the spacing of a rate
is its window divided by its hits. The throttle windows are those the politeness step keeps: when a spider type has
used its hits, its next allowed hit is when the oldest counted hit leaves the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from frontier.client import FrontierReader, SiteState
from frontier.registry import WorkerRegistry
from messaging import spider_types
from messaging.clock import RedisClock

PER_PAGE = 50
SPIDER_TYPES = spider_types.NAMES


@dataclass
class SiteQuery:
    search: str = ""
    page: int = 1


def all_domains(redis: Any, configured: set[str]) -> list[str]:
    """Every domain with a queue (of a registered worker) or a configuration of its own, sorted."""
    jobs = list(WorkerRegistry(redis).live())
    return sorted(FrontierReader(redis).domains_of(jobs) | configured)


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
    return [_row(state, watch, now) for state in FrontierReader(redis).sites(domains, jobs, SPIDER_TYPES)]


def _row(state: SiteState, watch: Any, now: float) -> dict[str, Any]:
    rate = watch.rate_for(state.domain)
    config = watch.site(state.domain)
    return {
        "domain": state.domain, "queued": state.queued, "leased": state.leased, "hosts": sorted(state.hosts),
        "rate": _rate_text(rate.hits, rate.window), "hits": rate.hits, "window": rate.window,
        "own_rate": config.rate is not None, "blacklisted": config.blacklisted,
        "spacing": rate.window / rate.hits if rate.hits else None,
        "next_hit": _next_hit(state.windows, rate.hits, rate.window, now),
        "blocked_until": _block(state.blocked_until, now), "statuses": dict(sorted(state.statuses.items())),
        "pages": sum(state.statuses.values()),
        "robots": ("cached: " + ", ".join(state.robots)) if state.robots else "not cached",
    }  # fmt: skip


def _next_hit(windows: list[list[float]], hits: int, window: float, now: float) -> float | None:
    """Seconds until some spider type may hit the domain again (0: now); None: no hit counted."""
    waits = []
    for times in windows:
        recent = sorted(at for at in times if at > now - window)
        if not recent:
            continue
        waits.append(0.0 if len(recent) < hits else max(0.0, recent[len(recent) - hits] + window - now))
    return min(waits) if waits else None


def _block(until: float | None, now: float) -> float | None:
    return until - now if until is not None and until > now else None


def _rate_text(hits: int, window: float) -> str:
    return f"{hits} per {window:g} s"
