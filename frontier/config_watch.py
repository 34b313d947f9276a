"""The worker's view of the site configuration in ZooKeeper, kept current by watches (seed 4.3.1.1, fig. 4-16/4-17).

:class:`SiteConfigWatch` reads ``<root>/defaults`` and every ``<root>/sites/<domain>`` at start and then follows
them: a ``ChildrenWatch`` on ``<root>/sites`` notices new sites, a ``DataWatch`` per site and one on the defaults
notice changed values. kazoo re-arms both after every event (the seed re-registers its one-shot watcher by hand)
and, after a lost session, re-reads the node and re-registers the watch as soon as a new session is connected
(``DataWatch`` re-reads on every CONNECTED state; ``ChildrenWatch`` after LOST/SUSPENDED), so nothing needs
restarting. A change is visible here as soon as ZooKeeper delivers the event (milliseconds on a LAN).

Listeners (:meth:`SiteConfigWatch.add_listener`) hear of every applied change, on kazoo's thread: the worker's feed
reopens the changed domain in its walk (``frontier.domain_walk.ReadyWalk.reopen``), so that a rate raised or lowered
applies to the next step instead of after a wait computed under the old one; the politeness step reads the rate at
every call and spaces hits with it at once (``frontier/lua/pace.lua``).

The values live in plain dicts that are replaced, never mutated in place, so readers on other threads need no lock.
A deleted site znode removes the site (its domain falls back to the defaults); its data watch stays armed (an
``exists`` watch), so a re-created znode is picked up again.

:class:`StaticSiteConfig` answers the same questions from fixed values (unit tests, tools without ZooKeeper).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kazoo.client import KazooState
from kazoo.protocol.states import KeeperState
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from messaging.siteconfig import DEFAULT_RATE, DEFAULT_WINDOW, Rate, SiteConfig, SitePaths, for_key, site_names

logger = logging.getLogger(__name__)

Listener = Callable[[str | None], None]  # the changed domain, or None for the defaults


class SiteRates(Protocol):
    """What the politeness engine asks of the site configuration."""

    def rate_for(self, domain: str) -> Rate: ...

    def is_blacklisted(self, domain: str) -> bool: ...


class StaticSiteConfig:
    """Fixed defaults and site configs."""

    def __init__(self, defaults: Rate | None = None, sites: Mapping[str, SiteConfig] | None = None) -> None:
        self.defaults = defaults or Rate(DEFAULT_RATE, DEFAULT_WINDOW)
        self.sites = dict(sites or {})

    def site(self, domain: str) -> SiteConfig:
        """The config that applies to a queue key: its own, else (a host) its registered domain's
        (:func:`messaging.siteconfig.site_names`)."""
        sites = self.sites
        names = site_names(domain)
        if len(names) == 1:
            return sites.get(domain) or SiteConfig()
        return for_key([sites[name] for name in names if name in sites])

    def rate_for(self, domain: str) -> Rate:
        return self.site(domain).effective_rate(self.defaults)

    def is_blacklisted(self, domain: str) -> bool:
        return self.site(domain).blacklisted


class SiteConfigWatch(StaticSiteConfig):
    """Defaults and per-site config from ZooKeeper, updated by watches; ``start()`` returns after the first read."""

    def __init__(self, zk: Any, paths: SitePaths | None = None) -> None:
        super().__init__()
        self.zk = zk
        self.paths = paths or SitePaths()
        self.session_losses = 0  # sessions that expired and were replaced (observability; tests)
        self.changes = 0  # events applied
        self._listeners: list[Listener] = []
        self._watched: set[str] = set()
        self._lock = threading.Lock()
        self._started = False

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(domain)`` after a site changed (``None``: the defaults changed); on kazoo's thread."""
        self._listeners.append(listener)

    def start(self) -> SiteConfigWatch:
        if self._started:
            return self
        self._started = True
        self.zk.add_listener(self._on_state)
        # The children watch stops for good when its node is missing, so the node is made to exist first.
        self.zk.ensure_path(self.paths.sites)
        DataWatch(self.zk, self.paths.defaults, self._on_defaults)
        # Kazoo calls the children function once before returning, and each new child's DataWatch reads its data
        # before it is registered: after start() every site that existed is known.
        ChildrenWatch(self.zk, self.paths.sites, self._on_children)
        return self

    def blacklisted_domains(self) -> set[str]:
        return {domain for domain, config in self.sites.items() if config.blacklisted}

    # --- kazoo callbacks (kazoo's threads) -----------------------------------------------------------------------
    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST and self.zk.client_state != KeeperState.CLOSED:  # CLOSED: stopped on purpose
            # The session expired: its watches are gone. Kazoo's watchers re-read and re-register on the next
            # CONNECTED state (a new session); the values read until then stay in use.
            self.session_losses += 1
            logger.warning("ZooKeeper session lost; site config is re-read when a new session connects")

    def _on_defaults(self, data: bytes | None, _stat: Any) -> None:
        try:
            raw = json.loads(data or b"{}")
            defaults = Rate(int(raw.get("rate", DEFAULT_RATE)), float(raw.get("window", DEFAULT_WINDOW)))
        except (ValueError, TypeError, AttributeError) as exc:
            logger.error("ignoring unreadable %s: %s", self.paths.defaults, exc)
            return
        self.defaults = defaults
        self._changed(None)

    def _on_children(self, children: list[str]) -> None:
        with self._lock:
            new = [child for child in children if child not in self._watched]
            self._watched.update(new)
        for domain in new:
            DataWatch(self.zk, self.paths.site(domain), self._site_callback(domain))

    def _site_callback(self, domain: str) -> Callable[[bytes | None, Any], None]:
        def on_site(data: bytes | None, stat: Any) -> None:
            sites = dict(self.sites)
            if stat is None:
                sites.pop(domain, None)
            else:
                try:
                    sites[domain] = SiteConfig.from_json(data)
                except (ValueError, TypeError, AttributeError) as exc:
                    logger.error("ignoring unreadable config of site %s: %s", domain, exc)
                    return
            self.sites = sites
            self._changed(domain)

        return on_site

    def _changed(self, domain: str | None) -> None:
        self.changes += 1
        for listener in self._listeners:
            try:
                listener(domain)
            except Exception:  # a listener's failure must not disarm the watch that called it
                logger.exception("site config listener failed")
