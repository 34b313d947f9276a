"""The pool over HTTP: a Twisted web resource, served by ``crawlfleet proxies serve`` (the manager may mount it).

- ``GET /proxy``: one live proxy chosen at random, ``{"proxy": {...}}``; 404 ``{"error": ...}`` when none is live.
- ``GET /proxies``: ``{"count": n, "proxies": [...]}``, the live ones fastest first; ``?all=1`` every proxy of the
  pool, dead or unchecked ones too.

A proxy is shown with its figures (:meth:`Proxy.public`: address, speed, last success, failures, the list's
location, anonymity, type, speed and alive time) but never its credentials. MongoDB is read in a thread.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable
from typing import Any

from twisted.internet.threads import deferToThread
from twisted.web import resource, server

from spiders.proxies.model import Proxy
from spiders.proxies.store import ProxyStore

logger = logging.getLogger(__name__)


class _Json(resource.Resource):
    isLeaf = True

    def __init__(self, store: ProxyStore, run_in_thread: Callable[..., Any], rng: random.Random) -> None:
        super().__init__()
        self.store = store
        self.run_in_thread = run_in_thread
        self.rng = rng

    def answer(self, request: server.Request) -> tuple[int, dict[str, Any]]:
        raise NotImplementedError

    def render_GET(self, request: server.Request) -> Any:
        deferred = self.run_in_thread(self.answer, request)

        def send(result: tuple[int, dict[str, Any]]) -> None:
            code, body = result
            request.setResponseCode(code)
            request.setHeader(b"Content-Type", b"application/json")
            request.setHeader(b"Cache-Control", b"no-store")
            request.write(json.dumps(body, sort_keys=True).encode())
            request.finish()

        def fail(failure: Any) -> None:
            logger.error("proxy API: cannot read the pool: %s", failure.getErrorMessage())
            send((503, {"error": "the proxy pool cannot be read now"}))

        deferred.addCallbacks(send, fail)
        request.notifyFinish().addErrback(lambda _: None)  # a client that went away: nothing to do
        return server.NOT_DONE_YET


class _OneProxy(_Json):
    def answer(self, request: server.Request) -> tuple[int, dict[str, Any]]:
        live = self.store.proxies(live_only=True)
        if not live:
            return 404, {"error": "no live proxy"}
        return 200, {"proxy": self.rng.choice(live).public()}


class _AllProxies(_Json):
    def answer(self, request: server.Request) -> tuple[int, dict[str, Any]]:
        every = request.args.get(b"all", [b"0"])[0] in (b"1", b"true", b"yes")
        proxies: list[Proxy] = self.store.proxies(live_only=not every)
        return 200, {"count": len(proxies), "proxies": [proxy.public() for proxy in proxies]}


class ProxyPoolResource(resource.Resource):
    """``/proxy`` and ``/proxies`` under wherever it is mounted."""

    def __init__(self, store: ProxyStore, run_in_thread: Callable[..., Any] = deferToThread,
                 rng: random.Random | None = None) -> None:
        super().__init__()
        rng = rng or random.Random()
        self.putChild(b"proxy", _OneProxy(store, run_in_thread, rng))
        self.putChild(b"proxies", _AllProxies(store, run_in_thread, rng))

    def render_GET(self, request: server.Request) -> bytes:
        request.setHeader(b"Content-Type", b"application/json")
        return json.dumps({"endpoints": ["/proxy", "/proxies", "/proxies?all=1"]}).encode()
