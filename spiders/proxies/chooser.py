"""A worker's view of the pool: a memory copy of the live proxies, and the order in which to try them.

- :class:`LivePool` keeps the copy. A background thread reads the live proxies from MongoDB every
  CRAWLFLEET_PROXY_REFRESH seconds and writes the failures workers reported since the last round in one bulk call,
  so neither the reactor nor the feed thread ever waits on MongoDB. A proxy that just failed one of this process's
  requests is left out locally for CRAWLFLEET_PROXY_COOLDOWN seconds, at once, without waiting for the pool.
- :class:`ProxyChooser` answers ``candidates(domain)``: the live proxies in the order to try them, round robin per
  domain (each site sees its requests spread over every exit address). It is thread-safe: the worker's feed
  thread calls it in the politeness step (the per-IP throttle counts the chosen proxy's :attr:`Proxy.address`),
  the downloader middleware on the reactor when a request has no proxy yet or its proxy failed.
- :func:`shared_chooser` gives every component of one crawler the same chooser (one thread, one copy), started
  on first use and stopped when the engine stops.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
import weakref
from collections.abc import Callable, Collection
from typing import Any

from messaging.bounded import BoundedDict
from messaging.outage import OutageLog
from spiders.proxies.model import Proxy
from spiders.proxies.store import ProxyStore

DOMAINS_KEPT = 100_000  # domains whose last proxy a worker remembers (the rotation of a forgotten one starts anew)

logger = logging.getLogger(__name__)


class LivePool:
    def __init__(self, store_factory: Callable[[], ProxyStore], refresh: float = 5.0, cooldown: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store_factory = store_factory
        self.refresh = refresh
        self.cooldown = cooldown
        self.clock = clock
        self._lock = threading.Lock()
        self._live: tuple[Proxy, ...] = ()
        self._cooling: dict[str, float] = {}  # proxy id -> until (clock)
        self._failures: dict[str, tuple[int, str]] = {}  # reported, not yet written
        self._loaded = threading.Event()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._store: ProxyStore | None = None
        self.outage = OutageLog(logger, "proxy pool: reading it from MongoDB (keeping the last copy)", clock=clock)

    # --- lifecycle ------------------------------------------------------------------------------------------------
    def start(self) -> LivePool:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="proxy-pool", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def loaded(self) -> bool:
        return self._loaded.is_set()

    def wait_loaded(self, timeout: float) -> bool:
        """Block until the first read of the pool is done (or failed); for threads, never the reactor."""
        return self._loaded.wait(timeout)

    # --- the copy -------------------------------------------------------------------------------------------------
    def live(self) -> list[Proxy]:
        """The live proxies, fastest first, without those cooling down after a failure here."""
        now = self.clock()
        with self._lock:
            if self._cooling:
                self._cooling = {pid: until for pid, until in self._cooling.items() if until > now}
            cooling = self._cooling
            return [proxy for proxy in self._live if proxy.id not in cooling]

    def set_live(self, proxies: Collection[Proxy]) -> None:
        with self._lock:
            self._live = tuple(proxies)
        self._loaded.set()

    def report_failure(self, pid: str, reason: str) -> None:
        """A request through ``pid`` failed: leave it out here for a while, count it in the pool soon."""
        with self._lock:
            self._cooling[pid] = self.clock() + self.cooldown
            count, _ = self._failures.get(pid, (0, ""))
            self._failures[pid] = (count + 1, reason)

    def sync(self) -> None:
        """One round of the background thread: write the reported failures, read the live proxies (blocking)."""
        if self._store is None:
            self._store = self.store_factory()
        with self._lock:
            failures, self._failures = self._failures, {}
        try:
            removed = self._store.record_failures(failures)
        except Exception:
            with self._lock:  # keep them for the next round
                for pid, (count, reason) in failures.items():
                    old, _ = self._failures.get(pid, (0, ""))
                    self._failures[pid] = (old + count, reason)
            raise
        live = [proxy for proxy in self._store.proxies(live_only=True) if proxy.id not in removed]
        self.set_live(live)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except Exception as exc:  # MongoDB unreachable: keep the last copy, try again next round
                self._loaded.set()  # nobody waits for a pool that cannot be read
                self.outage.failed(exc)
            else:
                self.outage.ok()
            self._wake.wait(self.refresh)
            self._wake.clear()
        with self._lock:
            failures, self._failures = self._failures, {}
        try:  # the last failures reported before the stop
            if failures and self._store is not None:
                self._store.record_failures(failures)
        except Exception as exc:
            logger.warning("could not record %d proxy failures: %s", len(failures), exc)


class ProxyChooser:
    """``candidates(domain)``: the live proxies in the order to try them, round robin per domain.

    The turn moves when a proxy is *used* (:meth:`used`), not when candidates are asked for: a caller that asks,
    finds its first candidates throttled and uses none would otherwise skip proxies in a pattern of its own polls
    (the worker's politeness step asks on every look at a domain)."""

    def __init__(self, pool: LivePool) -> None:
        self.pool = pool
        self._lock = threading.Lock()
        # domain -> id of the proxy used last for it, the latest DOMAINS_KEPT (one forgotten starts its rotation anew)
        self._last: BoundedDict[str, str] = BoundedDict(DOMAINS_KEPT, memo="proxy_domains")

    def candidates(self, domain: str, exclude: Collection[str] = ()) -> list[Proxy]:
        proxies = [proxy for proxy in self.pool.live() if proxy.id not in exclude]
        if not proxies:
            return []
        # Order by id, not speed, so that the rotation is stable while speeds change between two refreshes.
        proxies.sort(key=lambda proxy: proxy.id)
        with self._lock:
            last = self._last.get(domain)
        start = 0 if last is None else bisect.bisect_right([proxy.id for proxy in proxies], last) % len(proxies)
        return proxies[start:] + proxies[:start]

    def used(self, domain: str, proxy: Proxy) -> None:
        """``proxy`` carries the domain's next request(s): the domain's next candidates start after it."""
        with self._lock:
            self._last[domain] = proxy.id

    def choose(self, domain: str, exclude: Collection[str] = ()) -> Proxy | None:
        candidates = self.candidates(domain, exclude)
        if not candidates:
            return None
        self.used(domain, candidates[0])
        return candidates[0]

    def report_failure(self, proxy: Proxy | str, reason: str) -> None:
        self.pool.report_failure(proxy.id if isinstance(proxy, Proxy) else proxy, reason)


_shared: weakref.WeakKeyDictionary[Any, ProxyChooser] = weakref.WeakKeyDictionary()
_shared_lock = threading.Lock()


def shared_chooser(crawler: Any) -> ProxyChooser:
    """The chooser of this crawler (one pool thread per process), started now, stopped with the engine."""
    from scrapy import signals

    from spiders.fleet_settings import crawlfleet_settings

    with _shared_lock:
        chooser = _shared.get(crawler)
        if chooser is None:
            settings = crawlfleet_settings(crawler.settings)
            pool = LivePool(lambda: ProxyStore.from_settings(settings), settings["CRAWLFLEET_PROXY_REFRESH"],
                            settings["CRAWLFLEET_PROXY_COOLDOWN"])
            chooser = _shared[crawler] = ProxyChooser(pool.start())
            crawler.signals.connect(lambda: pool.stop(timeout=2.0), signal=signals.engine_stopped, weak=False)
    return chooser
