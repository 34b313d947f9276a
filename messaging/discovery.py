"""Prometheus service discovery: a ``file_sd`` file of every live ``/metrics`` endpoint of the cluster.

The processes' metrics ports are ephemeral (``messaging.metrics``), so a hand-written scrape config is out of date
after every restart. Every endpoint is registered in Redis (``metrics:<module>:<host>:<pid>``, with a TTL, listed in
:data:`messaging.keys.METRICS_INDEX`) and every manager in the manager registry (``managers``, ``manager:<host>``);
:func:`targets` reads both and :func:`write_file_sd` writes them in Prometheus' ``file_sd`` format, one group per
service and path::

    [{"targets": ["127.0.0.1:40123", "127.0.0.1:40127"], "labels": {"service": "crawler",
      "__metrics_path__": "/metrics"}}, …]

The file is replaced atomically (written beside it, then renamed), and only when it changed: Prometheus, which
watches it, never reads half a file. ``crawlfleet up`` writes it once its processes run and its supervisor keeps
it current; every manager rewrites it every CRAWLFLEET_PROMETHEUS_SD_INTERVAL seconds. The target label is
``service`` (the module), never ``job`` or ``instance``: Prometheus sets those itself.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from messaging import keys
from messaging.clients import RedisClient, as_text
from messaging.clock import RedisClock
from messaging.settings import Settings

OFF = "off"
MANAGER_SERVICE = "manager"


@dataclass(frozen=True, order=True)
class Endpoint:
    service: str  # the module: crawler, master, kafka-monitor, redis-monitor, manager
    url: str  # http://host:port/metrics

    @property
    def group(self) -> tuple[str, str, str]:
        parts = urlsplit(self.url)
        return self.service, parts.scheme or "http", parts.path or "/metrics"

    @property
    def address(self) -> str:
        return urlsplit(self.url).netloc


def sd_file(settings: Settings) -> Path | None:
    """Where the file goes (CRAWLFLEET_PROMETHEUS_SD_FILE; by default under the run directory), None when off."""
    value = settings.prometheus_sd_file.strip()
    if value.lower() == OFF:
        return None
    return Path(value) if value else Path(settings.run_dir) / "prometheus" / "targets.json"


def process_endpoints(redis: RedisClient) -> list[Endpoint]:
    """The registered endpoints whose registration has not expired (expired ones leave the index)."""
    names = sorted(as_text(member) for member in redis.smembers(keys.METRICS_INDEX))
    if not names:
        return []
    pipe = redis.pipeline(transaction=False)
    for name in names:
        pipe.get(name)
    found, gone = [], []
    for name, url in zip(names, pipe.execute(), strict=True):
        if url is None:
            gone.append(name)
        else:
            found.append(Endpoint(name.split(":")[1], as_text(url)))
    if gone:
        redis.srem(keys.METRICS_INDEX, *gone)
    return found


def manager_endpoints(redis: RedisClient, ttl: float) -> list[Endpoint]:
    """Each manager whose heartbeat is younger than ``ttl``: its ``/metrics`` beside its API."""
    now = RedisClock(redis).now()
    hosts = [as_text(host) for host in redis.zrangebyscore(keys.MANAGERS, now - ttl, "+inf")]
    if not hosts:
        return []
    pipe = redis.pipeline(transaction=False)
    for host in hosts:
        pipe.hget(keys.manager(host), "url")
    return [Endpoint(MANAGER_SERVICE, f"{as_text(url).rstrip('/')}/metrics") for url in pipe.execute() if url]


def targets(redis: RedisClient, manager_ttl: float) -> list[dict[str, Any]]:
    """The file_sd groups: one per (service, scheme, path), its targets sorted."""
    groups: dict[tuple[str, str, str], set[str]] = {}
    for endpoint in process_endpoints(redis) + manager_endpoints(redis, manager_ttl):
        groups.setdefault(endpoint.group, set()).add(endpoint.address)
    return [{"targets": sorted(addresses), "labels": {"service": service, "__scheme__": scheme,
                                                      "__metrics_path__": path}}
            for (service, scheme, path), addresses in sorted(groups.items())]


def write_file_sd(path: Path, groups: list[dict[str, Any]]) -> bool:
    """Replace ``path`` with ``groups`` atomically, unless it holds them already; True when it was written."""
    text = json.dumps(groups, indent=2, sort_keys=True) + "\n"
    try:
        if path.read_text() == text:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return True


def refresh(redis: RedisClient, settings: Settings) -> Path | None:
    """Rewrite the settings' file_sd file from Redis (when it is not off); returns its path."""
    path = sd_file(settings)
    if path is not None:
        write_file_sd(path, targets(redis, settings.manager_heartbeat_interval * 4))
    return path
