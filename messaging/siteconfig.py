"""Site configuration in ZooKeeper (``docs/architecture.md``, "ZooKeeper nodes").

``<root>/sites/<domain>`` holds ``{"rate": hits, "window": seconds, "blacklisted": bool}``, one znode per site,
written with a versioned ``set`` (compare-and-set, retried on a concurrent change) so that two writers never lose
each other's fields. ``<root>/defaults`` holds the default ``{"rate", "window"}``. A site's ``rate`` applies to both
of its throttle windows (per spider type and per host IP).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

DEFAULT_RATE = 10
DEFAULT_WINDOW = 60.0
CAS_ATTEMPTS = 20


@dataclass(frozen=True)
class Rate:
    hits: int
    window: float  # seconds

    def __post_init__(self) -> None:
        if self.hits < 0 or self.window <= 0:
            raise ValueError(f"a rate needs hits >= 0 and window > 0, not {self.hits}/{self.window}")


@dataclass(frozen=True)
class SiteConfig:
    rate: int | None = None  # None: the default rate applies
    window: float | None = None
    blacklisted: bool = False

    def to_json(self) -> bytes:
        data = {key: value for key, value in asdict(self).items() if value is not None}
        return json.dumps(data, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes | None) -> SiteConfig:
        if not raw:
            return cls()
        data = json.loads(raw)
        rate = data.get("rate")
        window = data.get("window")
        return cls(
            rate=int(rate) if rate is not None else None,
            window=float(window) if window is not None else None,
            blacklisted=bool(data.get("blacklisted", False)),
        )

    def effective_rate(self, default: Rate) -> Rate:
        return Rate(self.rate if self.rate is not None else default.hits,
                    self.window if self.window is not None else default.window)


class SitePaths:
    def __init__(self, root: str = "/crawlfleet") -> None:
        self.root = root.rstrip("/") or "/crawlfleet"
        self.sites = f"{self.root}/sites"
        self.defaults = f"{self.root}/defaults"
        self.election = f"{self.root}/master/election"

    def site(self, domain: str) -> str:
        if not domain or "/" in domain:
            raise ValueError(f"not a domain: {domain!r}")
        return f"{self.sites}/{domain}"


def write_defaults(zk: Any, paths: SitePaths, rate: Rate) -> None:
    payload = json.dumps({"rate": rate.hits, "window": rate.window}).encode()
    zk.ensure_path(paths.root)
    try:
        zk.create(paths.defaults, payload)
    except NodeExistsError:
        zk.set(paths.defaults, payload)


def read_site(zk: Any, paths: SitePaths, domain: str) -> SiteConfig:
    try:
        raw, _ = zk.get(paths.site(domain))
    except NoNodeError:
        return SiteConfig()
    return SiteConfig.from_json(raw)


def update_site(zk: Any, paths: SitePaths, domain: str, change: Callable[[SiteConfig], SiteConfig]) -> SiteConfig:
    """Read-modify-write one site's znode with compare-and-set; retried when another writer got in between."""
    path = paths.site(domain)
    for _ in range(CAS_ATTEMPTS):
        try:
            raw, stat = zk.get(path)
        except NoNodeError:
            new = change(SiteConfig())
            try:
                zk.create(path, new.to_json(), makepath=True)
                return new
            except NodeExistsError:
                continue
        new = change(SiteConfig.from_json(raw))
        try:
            zk.set(path, new.to_json(), version=stat.version)
            return new
        except (BadVersionError, NoNodeError):
            continue
    raise RuntimeError(f"could not update {path}: {CAS_ATTEMPTS} concurrent changes in a row")
