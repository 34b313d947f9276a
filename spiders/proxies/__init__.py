"""The proxy pool (seed 4.3.1.2, fig. 4-19): collect proxies from list pages, check them, hand out live ones.

- :mod:`~spiders.proxies.store`: the pool in MongoDB (CRAWLFLEET_PROXY_COLLECTION), one document per ``ip:port``;
- :mod:`~spiders.proxies.collect`: the list pages' rule and the collector's pipeline (the spider is
  :class:`spiders.spiders.proxy.ProxySpider`, ``scrapy crawl proxy``);
- :mod:`~spiders.proxies.validator`: checks every proxy through a test URL, in the background;
- :mod:`~spiders.proxies.api` and :mod:`~spiders.proxies.resource`: ``live_proxies()``, ``random_live_proxy()``,
  ``GET /proxy`` and ``GET /proxies``;
- :mod:`~spiders.proxies.chooser`: a worker's memory copy of the live proxies and the order to try them, for the
  politeness step and :class:`spiders.middlewares.proxy.FleetProxyMiddleware`.
"""

from spiders.proxies.api import live_proxies, random_live_proxy
from spiders.proxies.chooser import LivePool, ProxyChooser, shared_chooser
from spiders.proxies.model import Proxy
from spiders.proxies.store import CheckResult, ProxyStore

__all__ = ["CheckResult", "LivePool", "Proxy", "ProxyChooser", "ProxyStore", "live_proxies", "random_live_proxy",
           "shared_chooser"]
