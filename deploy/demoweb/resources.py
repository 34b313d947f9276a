"""The demo web's Twisted side: one leaf resource answers every path of every site through the router.

One :class:`DemoSite` factory listens on every site's loopback address; the site of a request is the one its
Host header names (so ``curl -H Host:`` works too), else the one whose address the connection came to. The
server counts its answers per site and status (``/_demoweb/stats.json``) instead of writing an access log,
which would cost more than serving a static page.

The one piece of state besides the counters is the busy area's (:class:`deploy.demoweb.busy.BusyArea`): whether a
``/busy/`` page asked for now gets the router's page or its 429, and the time of every answer there (in the stats
under each site's ``busy``), read from the reactor's clock.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.web import http, server
from twisted.web.resource import Resource
from twisted.web.static import NoRangeStaticProducer

from deploy.demoweb.busy import BusyArea
from deploy.demoweb.router import STATS_PATH, Reply, Router, StreamReply
from deploy.demoweb.sites import Site

SERVER_HEADER = b"demoweb"


class DemoResource(Resource):
    isLeaf = True

    def __init__(self, router: Router, clock: IReactorTime, busy: BusyArea | None = None) -> None:
        super().__init__()
        self.router = router
        self.clock = clock
        self.busy = busy if busy is not None else BusyArea()
        self.answers: Counter[tuple[str, int]] = Counter()  # (site name, status) -> count
        self.paths: Counter[tuple[str, str]] = Counter()  # (site name, path) -> requests: "fetched twice?" checks

    def render(self, request: server.Request) -> bytes | int:
        request.setHeader(b"server", SERVER_HEADER)
        if request.method not in (b"GET", b"HEAD"):
            request.setHeader(b"allow", b"GET, HEAD")
            return self._send(request, Reply(http.NOT_ALLOWED, b"", "text/plain"))
        site = self.router.site_for(_header(request, b"host"), request.getHost().host)
        if site is None:  # a listener on an address that is no site's: cannot happen unless misconfigured
            return self._send(request, Reply(421, b"", "text/plain"))  # Misdirected Request
        path = request.path.decode("latin-1")
        reply: Reply | StreamReply
        if path == STATS_PATH:
            reply = Reply(200, json.dumps(self.stats()).encode(), "application/json")
        else:
            query = {key.decode("latin-1"): [value.decode("latin-1") for value in values]
                     for key, values in (request.args or {}).items()}
            reply = self.router.route(site, path, query)
            if isinstance(site, Site) and self.router.is_busy_page(site, path):
                now = self.clock.seconds()
                if self.busy.too_busy(site.name, path, now):
                    reply = self.router.too_busy_reply(site, self.busy.retry_after)
                self.busy.record(site.name, path, reply.status, now)
        self.answers[site.name, reply.status] += 1
        if path != STATS_PATH:
            self.paths[site.name, path] += 1
        if isinstance(reply, StreamReply):
            return self._stream(request, reply)
        if reply.delay > 0:
            return self._send_later(request, reply)
        return self._send(request, reply)

    def stats(self) -> dict[str, Any]:
        """Answers so far: ``{site: {"requests": n, "status": {"200": n, …}, "paths": {path: n, …}}}``, plus
        ``"busy"`` (:meth:`BusyArea.stats`: when its window opened, every answer's time) for a site whose busy area
        was asked for."""
        result: dict[str, Any] = {}
        for (name, status), count in sorted(self.answers.items()):
            entry = result.setdefault(name, {"requests": 0, "status": {}, "paths": {}})
            entry["requests"] += count
            entry["status"][str(status)] = count
        for (name, path), count in self.paths.items():
            result.setdefault(name, {"requests": 0, "status": {}, "paths": {}})["paths"][path] = count
        for name in self.busy.sites():
            result.setdefault(name, {"requests": 0, "status": {}, "paths": {}})["busy"] = self.busy.stats(name)
        for site in self.router.sites:  # the robots hosts record what they answered when (deploy.demoweb.robotsweb)
            if hasattr(site, "answers"):
                result.setdefault(site.name, {"requests": 0, "status": {}, "paths": {}})["answers"] = site.answers()
        return result

    @staticmethod
    def _send(request: server.Request, reply: Reply) -> bytes:
        """Set the status and headers; returns the body to write (none for HEAD, which has its length)."""
        request.setResponseCode(reply.status)
        request.setHeader(b"content-type", reply.content_type.encode())
        request.setHeader(b"content-length", str(len(reply.body)).encode())
        if reply.location:
            request.setHeader(b"location", reply.location.encode())
        for name, value in reply.headers:
            request.setHeader(name.encode(), value.encode())
        return b"" if request.method == b"HEAD" else reply.body

    @staticmethod
    def _stream(request: server.Request, reply: StreamReply) -> bytes | int:
        """Write a large body in pieces as the client reads it (a pull producer over a file-like body)."""
        request.setResponseCode(reply.status)
        request.setHeader(b"content-type", reply.content_type.encode())
        request.setHeader(b"content-length", str(reply.length).encode())
        for name, value in reply.headers:
            request.setHeader(name.encode(), value.encode())
        if request.method == b"HEAD":
            return b""
        NoRangeStaticProducer(request, reply.open_body()).start()
        return server.NOT_DONE_YET

    def _send_later(self, request: server.Request, reply: Reply) -> int:
        """Answer after ``reply.delay`` s without blocking the reactor; forget it if the client leaves."""
        body = self._send(request, reply)

        def answer() -> None:
            request.write(body)
            request.finish()

        def client_left(_failure: object) -> None:
            if call.active():
                call.cancel()

        call: IDelayedCall = self.clock.callLater(reply.delay, answer)
        request.notifyFinish().addErrback(client_left)
        return server.NOT_DONE_YET


def _header(request: server.Request, name: bytes) -> str | None:
    value = request.getHeader(name)
    return value.decode("latin-1") if value is not None else None


class DemoSite(server.Site):
    """The HTTP factory: no access log (see the module's doc), no tracebacks in error pages."""

    displayTracebacks = False

    def log(self, request: http.Request) -> None:
        return None


def make_site(router: Router, clock: IReactorTime) -> DemoSite:
    return DemoSite(DemoResource(router, clock))
