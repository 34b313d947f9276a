"""The pool's Python API (seed ``ProxyApi``): live proxies for any program, outside Scrapy too.

``live_proxies()`` and ``random_live_proxy()`` block on MongoDB (one query each): call them from a thread inside
a Twisted or Scrapy process (the worker's own components use :mod:`spiders.proxies.chooser`, which keeps a copy).
Without a ``store`` they use one shared :class:`ProxyStore` of :func:`messaging.settings.load`'s settings.
"""

from __future__ import annotations

import random
import threading

from spiders.proxies.model import Proxy
from spiders.proxies.store import ProxyStore

_default_store: ProxyStore | None = None
_default_lock = threading.Lock()


def default_store() -> ProxyStore:
    global _default_store
    with _default_lock:
        if _default_store is None:
            _default_store = ProxyStore.from_settings()
        return _default_store


def live_proxies(store: ProxyStore | None = None) -> list[Proxy]:
    """The proxies alive at their last check, fastest first."""
    return (store or default_store()).proxies(live_only=True)


def random_live_proxy(store: ProxyStore | None = None, rng: random.Random | None = None) -> Proxy | None:
    """One live proxy chosen at random (as the seed's middleware does), or None when the pool has none."""
    proxies = live_proxies(store)
    return (rng or random).choice(proxies) if proxies else None
