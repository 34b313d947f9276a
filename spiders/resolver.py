"""Scrapy's DNS resolver, with crawlfleet's host map in front (``TWISTED_DNS_RESOLVER`` in spiders.settings).

Names in the hosts file named by ``CRAWLFLEET_HOSTS_FILE`` (the demo web's ``*.fleet.test``, test proxies)
resolve to its addresses; every other name goes to Scrapy's default resolver, with its cache and
``DNS_TIMEOUT``. Mapped names bypass that cache, so a changed hosts file applies at once.

Scrapy installs this with ``reactor.installResolver`` (an ``IResolverSimple``); Twisted wraps it into the
reactor's ``nameResolver`` (``IHostnameResolver``), which is what the HTTP/1.1 download handler's
``HostnameEndpoint`` asks. Both paths therefore see the map.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Self

from scrapy.resolver import CachingThreadedResolver
from twisted.internet import defer

from messaging.hostmap import HostMap, load_hostmap

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from twisted.internet.base import ReactorBase


class HostMapResolver(CachingThreadedResolver):
    """:class:`~scrapy.resolver.CachingThreadedResolver` that answers the host map's names from the map."""

    def __init__(self, reactor: ReactorBase, cache_size: int, timeout: float, hostmap: HostMap) -> None:
        super().__init__(reactor, cache_size, timeout)
        self.hostmap = hostmap

    @classmethod
    def from_crawler(cls, crawler: Crawler, reactor: ReactorBase) -> Self:
        # Scrapy passes its CrawlerProcess here: only ``crawler.settings`` may be used.
        settings = crawler.settings
        cache_size = settings.getint("DNSCACHE_SIZE") if settings.getbool("DNSCACHE_ENABLED") else 0
        return cls(reactor, cache_size, settings.getfloat("DNS_TIMEOUT"), load_hostmap())

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> defer.Deferred[str]:
        address = self.hostmap.lookup(name)
        if address is not None:
            return defer.succeed(address)
        return super().getHostByName(name, timeout)
