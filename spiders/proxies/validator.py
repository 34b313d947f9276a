"""The validator (seed ``Validator.checkProxy`` / ``process_start``): is each proxy of the pool usable, and how fast?

A check fetches CRAWLFLEET_PROXY_TEST_URL through the proxy, as a plain-HTTP forward-proxy request (Twisted's
:class:`~twisted.web.client.ProxyAgent`: the absolute URL sent to the proxy, ``Proxy-Authorization`` when the proxy
has credentials), and must get a 2xx answer with its whole body within CRAWLFLEET_PROXY_TIMEOUT seconds (seed: 4 s).
The proxy resolves the test URL's name itself; a proxy given by name is resolved through the host map first.

:meth:`Validator.check_all` reads the pool, checks every proxy with at most CRAWLFLEET_PROXY_CHECK_CONCURRENCY
checks at once, and records all results in one bulk call (:meth:`ProxyStore.record_checks`: speed and last success,
or one more failure; CRAWLFLEET_PROXY_MAX_FAILURES failures in a row and the proxy leaves the pool). Everything
runs on the reactor without blocking it: checks are asynchronous, MongoDB calls run in threads.
:meth:`Validator.run_periodically` re-checks the pool every CRAWLFLEET_PROXY_CHECK_INTERVAL seconds in the
background (``crawlfleet proxies serve``); ``crawlfleet proxies validate`` runs one pass.
"""

from __future__ import annotations

import base64
import ipaddress
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from twisted.internet import defer, task
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.internet.threads import deferToThread
from twisted.web.client import ProxyAgent, readBody
from twisted.web.http_headers import Headers

from messaging.hostmap import HostMap, resolve_host
from messaging.reactor import IFleetReactor, running_reactor
from messaging.settings import Settings
from spiders.proxies.model import Proxy
from spiders.proxies.store import CheckResult, ProxyStore

logger = logging.getLogger(__name__)
USER_AGENT = b"Mozilla/5.0 (compatible; crawlfleet-proxy-validator)"


def proxy_authorization(proxy: Proxy) -> bytes | None:
    """The ``Proxy-Authorization`` value of a proxy with credentials (as Scrapy's HttpProxyMiddleware makes it)."""
    if not proxy.user:
        return None
    pair = f"{unquote(proxy.user)}:{unquote(proxy.password)}".encode("latin-1", "replace")
    return b"Basic " + base64.b64encode(pair)


class Validator:
    def __init__(self, store: ProxyStore, test_url: str, timeout: float = 4.0, concurrency: int = 20, *,
                 reactor: IFleetReactor | None = None, hostmap: HostMap | None = None,
                 run_in_thread: Callable[..., defer.Deferred[Any]] = deferToThread) -> None:
        self.store = store
        self.test_url = test_url.encode("ascii")
        self.timeout = timeout
        self.semaphore = defer.DeferredSemaphore(max(1, concurrency))
        self.reactor = reactor if reactor is not None else running_reactor()
        self.hostmap = hostmap if hostmap is not None else HostMap()
        self.run_in_thread = run_in_thread  # blocking MongoDB calls and name lookups, off the reactor
        self.passes = 0

    @classmethod
    def from_settings(cls, settings: Settings, store: ProxyStore | None = None, **kwargs: Any) -> Validator:
        from messaging.hostmap import load_hostmap

        return cls(store if store is not None else ProxyStore.from_settings(settings),
                   settings["CRAWLFLEET_PROXY_TEST_URL"], settings["CRAWLFLEET_PROXY_TIMEOUT"],
                   settings["CRAWLFLEET_PROXY_CHECK_CONCURRENCY"], hostmap=load_hostmap(settings), **kwargs)

    # --- one proxy ------------------------------------------------------------------------------------------------
    def check(self, proxy: Proxy) -> defer.Deferred[CheckResult]:
        """Fetch the test URL through ``proxy``; never errbacks (a failure is a :class:`CheckResult`)."""
        return defer.Deferred.fromCoroutine(self._check(proxy))

    async def _check(self, proxy: Proxy) -> CheckResult:
        started = self.reactor.seconds()
        try:
            address = await self._address(proxy.host)
            endpoint = TCP4ClientEndpoint(self.reactor, address, proxy.port, timeout=self.timeout)
            headers = Headers({b"User-Agent": [USER_AGENT]})
            authorization = proxy_authorization(proxy)
            if authorization:
                headers.addRawHeader(b"Proxy-Authorization", authorization)
            fetch = ProxyAgent(endpoint, self.reactor).request(b"GET", self.test_url, headers)
            fetch.addCallback(_status_after_body)
            left = max(0.001, self.timeout - (self.reactor.seconds() - started))
            fetch.addTimeout(left, self.reactor)
            code = await fetch
        except defer.TimeoutError:
            return CheckResult(proxy.id, False, error=f"no answer within {self.timeout:g} s")
        except Exception as exc:  # refused, reset, unresolvable: the proxy's fault either way
            return CheckResult(proxy.id, False, error=f"{type(exc).__name__}: {exc}"[:200])
        if not 200 <= code < 300:
            return CheckResult(proxy.id, False, error=f"HTTP {code}")
        return CheckResult(proxy.id, True, seconds=round(self.reactor.seconds() - started, 3))

    async def _address(self, host: str) -> str:
        try:
            return str(ipaddress.ip_address(host))
        except ValueError:
            return await self.run_in_thread(resolve_host, host, self.hostmap)

    # --- the pool -------------------------------------------------------------------------------------------------
    def check_all(self) -> defer.Deferred[list[CheckResult]]:
        """Check every proxy of the pool (bounded concurrency) and record the results."""
        return defer.Deferred.fromCoroutine(self._check_all())

    async def _check_all(self) -> list[CheckResult]:
        proxies = await self.run_in_thread(self.store.proxies)
        results = await defer.gatherResults([self.semaphore.run(self.check, proxy) for proxy in proxies])
        removed = await self.run_in_thread(self.store.record_checks, results) if results else []
        self.passes += 1
        alive = sum(1 for result in results if result.ok)
        logger.info("checked %d proxies: %d alive, %d failed, %d removed", len(results), alive,
                    len(results) - alive, len(removed))
        for result in results:
            if not result.ok:
                logger.debug("proxy %s failed its check: %s", result.proxy_id, result.error)
        return results

    def run_periodically(self, interval: float) -> task.LoopingCall:
        """Check the pool now and every ``interval`` seconds (a pass that fails is logged; the loop goes on)."""
        def one_pass() -> defer.Deferred[Any]:
            return self.check_all().addErrback(lambda failure: logger.error("proxy check failed: %s",
                                                                             failure.getErrorMessage()))

        loop = task.LoopingCall(one_pass)
        loop.clock = self.reactor
        loop.start(interval, now=True)
        return loop


def _status_after_body(response: Any) -> defer.Deferred[int]:
    """The response's status once its whole body arrived (a proxy that stalls mid-body times out)."""
    return readBody(response).addCallback(lambda _: int(response.code))
