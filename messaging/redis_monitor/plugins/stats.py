"""Stats plugin (seed 4.1.3.2, tables 4-4 to 4-6): counters and alive hosts of one module, or of all.

The module's keys are found by SCAN over ``stats:<module>:*`` (:func:`messaging.keys.stats_pattern`) and split by
:func:`messaging.keys.parse_stats_key` into counters (``plugin`` → ``window`` → events, windows in seconds plus
``lifetime`` and the current ``step<seconds>`` period) and alive keys (``ip`` → host name and seconds left). For the
crawler, counters are grouped by spider type and HTTP status, with ``all`` summed over the spider types when the
crawler does not count it itself; for the master, the sizes of ``seeds`` and the registries are added.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from messaging import keys, modules
from messaging.clients import RedisClient, as_text
from messaging.clock import RedisClock
from messaging.redis_monitor.plugins import Context, Plugin
from messaging.stats import RollingCounter, StepCounter

MODULES = modules.STATS_MODULES
SCAN_COUNT = 1000


def crawler_alive(redis: RedisClient, now: float, heartbeat_ttl: float) -> dict[str, Any]:
    """Hosts with a worker whose registry heartbeat (``workers``) is younger than ``heartbeat_ttl``: ip -> host,
    seconds until the youngest heartbeat expires, and how many workers beat there."""
    found: Any = redis.zrangebyscore(keys.WORKERS, now - heartbeat_ttl, "+inf", withscores=True)
    beats = {as_text(job): float(at) for job, at in found}
    pipe = redis.pipeline(transaction=False)
    for job in beats:
        pipe.hmget(keys.worker(job), "ip", "host")
    rows: list[Any] = pipe.execute() if beats else []
    alive: dict[str, Any] = {}
    for at, (ip, host) in zip(beats.values(), rows, strict=True):
        if ip is None:
            continue  # described after its first beat: next time
        entry = alive.setdefault(as_text(ip), {"host": as_text(host or b""), "expires_in": 0, "workers": 0})
        entry["workers"] += 1
        entry["expires_in"] = max(entry["expires_in"], int(at + heartbeat_ttl - now))
    return alive


def module_stats(redis: RedisClient, module: str, heartbeat_ttl: float = 15.0) -> dict[str, Any]:
    counters: dict[str, dict[str, int]] = defaultdict(dict)
    alive: dict[str, Any] = {}
    now = RedisClock(redis).now()
    for raw in redis.scan_iter(match=keys.stats_pattern(module), count=SCAN_COUNT):
        key = as_text(raw)
        parsed = keys.parse_stats_key(key)
        if parsed.module != module:
            continue
        if parsed.ip:
            host = redis.get(key)
            if host is not None:
                alive[parsed.ip] = {"host": as_text(host), "expires_in": max(0, int(redis.ttl(key)))}
        elif parsed.window == "lifetime":
            counters[parsed.plugin]["lifetime"] = int(redis.get(key) or 0)
        elif parsed.window.startswith("step"):
            step = int(parsed.window[4:])
            counters[parsed.plugin][parsed.window] = StepCounter(redis, key, step).value(now // step * step)
        else:
            counters[parsed.plugin][parsed.window] = RollingCounter(redis, key, int(parsed.window)).value()
    if module == modules.CRAWLER:  # workers beat in the registry, not in stats:crawler:<ip>
        alive.update(crawler_alive(redis, now, heartbeat_ttl))
    result: dict[str, Any] = {"alive": dict(sorted(alive.items())), "plugins": _sorted(counters)}
    if module == modules.CRAWLER:
        result["spider_types"] = _by_spider_type(counters)
    if module == modules.MASTER:
        result["seeds"] = int(redis.zcard(keys.SEEDS))
        result["workers"] = int(redis.zcard(keys.WORKERS))
        result["managers"] = int(redis.zcard(keys.MANAGERS))
    return result


def _sorted(counters: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    def order(window: str) -> tuple[int, int, str]:
        return (0, int(window), "") if window.isdigit() else (1, 0, window)

    return {plugin: {w: counts[w] for w in sorted(counts, key=order)} for plugin, counts in sorted(counters.items())}


def _by_spider_type(counters: dict[str, dict[str, int]]) -> dict[str, dict[str, dict[str, int]]]:
    """``list:200`` → ``{"list": {"200": {...}}}``, plus ``all`` summed over spider types (seed table 4-6)."""
    grouped: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
    for plugin, windows in counters.items():
        spider_type, _, status = plugin.rpartition(":")
        if spider_type and status:
            grouped[spider_type][status] = windows
    if "all" not in grouped and grouped:
        total: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for statuses in grouped.values():
            for status, windows in statuses.items():
                for window, count in windows.items():
                    total[status][window] += count
        grouped["all"] = {status: dict(windows) for status, windows in total.items()}
    return {spider_type: dict(sorted(statuses.items())) for spider_type, statuses in sorted(grouped.items())}


def modules_present(redis: RedisClient) -> list[str]:
    """Every module that has stats keys (the known ones first)."""
    found = set(MODULES)
    for raw in redis.scan_iter(match=keys.stats_pattern(), count=SCAN_COUNT):
        try:
            found.add(keys.parse_stats_key(as_text(raw)).module)
        except ValueError:
            continue
    return [*MODULES, *sorted(found - set(MODULES))]


class StatsPlugin(Plugin):
    name = "stats"
    kind = "stats"

    def handle(self, key: str, request: dict[str, Any], context: Context) -> dict[str, Any]:
        wanted = request["stats"]
        names = modules_present(context.redis) if wanted == modules.ALL else [wanted]
        ttl = context.settings.heartbeat_ttl
        return {"stats": wanted, "modules": {module: module_stats(context.redis, module, ttl) for module in names}}
