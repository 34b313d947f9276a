"""Site configuration in ZooKeeper (``docs/architecture.md``, "ZooKeeper nodes").

``<root>/sites/<domain>`` holds ``{"rate": hits, "window": seconds, "burst": hits, "adaptive": bool,
"blacklisted": bool}``, one znode per site,
written with a versioned ``set`` (compare-and-set, retried on a concurrent change) so that two writers never lose
each other's fields. ``<root>/defaults`` holds the default ``{"rate", "window"}``. A site's ``rate`` applies to both
of its throttle windows (per spider type and per host IP): hits are spaced ``window / rate`` apart (a site's
``burst`` lets that many go out at once after a quiet spell; default 1, no burst), and no window of ``window``
seconds holds more than ``rate`` hits. ``adaptive`` lets the site's response times and errors slow the spacing down
(``frontier.adaptive``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from messaging.domains import InvalidDomain, domain_of_host, is_ip

DEFAULT_RATE = 10
DEFAULT_WINDOW = 60.0
DEFAULT_BURST = 1
CAS_ATTEMPTS = 20


@dataclass(frozen=True)
class Rate:
    hits: int
    window: float  # seconds
    burst: int = DEFAULT_BURST  # hits that may go out at once after a quiet spell (1: evenly spaced)
    adaptive: bool = False  # the site's latency and errors may slow the spacing down

    def __post_init__(self) -> None:
        if self.hits < 0 or self.window <= 0:
            raise ValueError(f"a rate needs hits >= 0 and window > 0, not {self.hits}/{self.window}")
        if self.burst < 1:
            raise ValueError(f"a burst is at least 1 hit, not {self.burst}")

    @property
    def spacing(self) -> float:
        """Seconds between two hits at this rate (``inf`` for a rate of 0)."""
        return self.window / self.hits if self.hits else float("inf")

    def describe(self) -> str:
        """``10 per 60 s (one every 6 s)`` and the burst and adaptive flags when set."""
        spacing = "none allowed" if not self.hits else f"one every {self.spacing:g} s"
        extra = (f", burst {self.burst}" if self.burst > 1 else "") + (", adaptive" if self.adaptive else "")
        return f"{self.hits} per {self.window:g} s ({spacing}{extra})"


@dataclass(frozen=True)
class SiteConfig:
    rate: int | None = None  # None: the default rate applies
    window: float | None = None
    blacklisted: bool = False
    burst: int | None = None  # None: the default burst (1)
    adaptive: bool | None = None  # None: not adaptive

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
        burst = data.get("burst")
        adaptive = data.get("adaptive")
        return cls(
            rate=int(rate) if rate is not None else None,
            window=float(window) if window is not None else None,
            blacklisted=bool(data.get("blacklisted", False)),
            burst=int(burst) if burst is not None else None,
            adaptive=bool(adaptive) if adaptive is not None else None,
        )

    def effective_rate(self, default: Rate) -> Rate:
        return Rate(self.rate if self.rate is not None else default.hits,
                    self.window if self.window is not None else default.window,
                    max(1, self.burst) if self.burst is not None else default.burst,
                    self.adaptive if self.adaptive is not None else default.adaptive)


@lru_cache(maxsize=65536)
def site_names(key: str) -> tuple[str, ...]:
    """The site configs that apply to a queue key, most specific first (issue 37, item 2). A key is a registered
    domain, a host name or an IP address (``messaging.domains.partition_key``): a host below its registered domain
    has its own config if one was written for it (``"host": true`` in the site request), else its domain's; a
    domain and an address have their own only."""
    if is_ip(key):
        return (key,)
    try:
        domain = domain_of_host(key)
    except InvalidDomain:
        return (key,)
    return (key,) if domain == key else (key, domain)


def for_key(configs: Sequence[SiteConfig]) -> SiteConfig:
    """The config a key applies, from the configs of its :func:`site_names` that exist (most specific first): the
    rate, window, burst and adaptive flag of the first that sets a rate or a window; blacklisted when any is."""
    paced = next((config for config in configs if config.rate is not None or config.window is not None), None)
    blacklisted = any(config.blacklisted for config in configs)
    if paced is None:
        adaptive = next((config.adaptive for config in configs if config.adaptive is not None), None)
        return SiteConfig(blacklisted=blacklisted, adaptive=adaptive)
    return replace(paced, blacklisted=blacklisted)


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


def read_defaults(zk: Any, paths: SitePaths) -> Rate:
    """The default rate: ``<root>/defaults``, else DEFAULT_RATE per DEFAULT_WINDOW (what workers use)."""
    try:
        raw, _ = zk.get(paths.defaults)
    except NoNodeError:
        return Rate(DEFAULT_RATE, DEFAULT_WINDOW)
    data = json.loads(raw or b"{}")
    return Rate(int(data.get("rate", DEFAULT_RATE)), float(data.get("window", DEFAULT_WINDOW)))


def effective(config: SiteConfig, defaults: Rate) -> dict[str, Any]:
    """What a site's workers apply (its own fields, else the defaults), with the spacing of its hits, as JSON."""
    rate = config.effective_rate(defaults)
    return {"rate": rate.hits, "window": rate.window, "burst": rate.burst, "adaptive": rate.adaptive,
            "spacing": rate.spacing if rate.hits else None, "blacklisted": config.blacklisted,
            "default": config.rate is None and config.window is None}


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
