"""The manager's HTTP connections: bodies bounded before they are read, slow clients cut off (seed 5.3).

Twisted reads a request's whole body (into memory, or a temporary file) before any resource sees the request, so a
limit checked by the resource comes too late: ``schedule.json`` once read a 100 MB body before refusing it. Here the
connection itself enforces, for every path:

- **Body size**: a ``Content-Length`` above the limit is answered ``413`` as soon as that header arrives, before a
  byte of the body is read; a chunked body is counted as it arrives and cut off the same way. The limit is
  CRAWLFLEET_MANAGER_MAX_BODY, and CRAWLFLEET_MANAGER_MAX_UPLOAD for scrapyd's egg upload (``addversion.json``).
  After the answer the connection reads (and drops) what the client still sends for a moment, so that the client
  reads the 413 instead of a reset connection, then closes.
- **Header read timeout**: a request's line and headers must all arrive within CRAWLFLEET_MANAGER_HEADER_TIMEOUT
  of its first byte — or of the connection's opening, or of the previous response on a kept-alive connection:
  an idle connection is closed then too. Sending a byte now and then (slowloris) does not extend it.
- **Body read timeout**: the body must have arrived CRAWLFLEET_MANAGER_BODY_TIMEOUT after the headers.

A request cut off so is answered ``408`` (an idle kept-alive connection is closed without an answer). Twisted's
idle timeout still applies while a response is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from twisted.internet.interfaces import IDelayedCall, ITCPTransport
from twisted.internet.protocol import connectionDone
from twisted.python.failure import Failure
from twisted.web import http, server

if TYPE_CHECKING:
    from manager.website import ManagerSite

DRAIN_SECONDS = 2.0  # after a refusal: how long the rest of the request is read and dropped
DRAIN_BYTES = 4 * 1024 * 1024  # and how much of it at most
HEADERS, BODY, HANDLING = "headers", "body", "handling"


@dataclass(frozen=True)
class Limits:
    max_body: int
    max_upload: int
    header_timeout: float
    body_timeout: float
    upload_paths: frozenset[bytes] = field(default=frozenset({b"/addversion.json"}))

    def body_limit(self, path: bytes) -> int:
        return self.max_upload if urlsplit(path).path in self.upload_paths else self.max_body


class ManagerRequest(server.Request):
    """Counts a body as it arrives (a chunked one has no length to check beforehand)."""

    def handleContentChunk(self, data: bytes) -> None:
        channel = self.channel
        if isinstance(channel, ManagerChannel) and not channel.body_received(len(data)):
            return
        super().handleContentChunk(data)


class ManagerChannel(http.HTTPChannel):
    """An HTTP/1.1 channel with the limits and timeouts of the module docstring (``site.limits``)."""

    site: ManagerSite  # set by the site that builds the channel
    transport: ITCPTransport | None  # the manager listens on TCP (manager.app: TCPServer)

    def __init__(self) -> None:
        super().__init__()
        self._phase = HEADERS
        self._timer: IDelayedCall | None = None
        self._body_read = 0
        self._started = False  # a byte of the next request arrived
        self._refused = False
        self._drained = 0

    @property
    def limits(self) -> Limits:
        return self.site.limits

    # --- timers ---------------------------------------------------------------------------------------------------
    def _arm(self, phase: str) -> None:
        self._disarm()
        self._phase = phase
        seconds = self.limits.header_timeout if phase == HEADERS else self.limits.body_timeout
        # one callable: TimeoutMixin's own callLater (a channel no site built) passes no arguments
        self._timer = self.callLater(seconds, partial(self._too_slow, phase))

    def _disarm(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def _too_slow(self, phase: str) -> None:
        self._timer = None
        if self._phase != phase or self._refused or self.transport is None:
            return
        if phase == HEADERS and not self._started:  # an idle connection: closed, nothing to answer
            self.loseConnection()
            return
        self._refuse(http.REQUEST_TIMEOUT, f"the request's {phase} did not arrive within "
                     f"{self.limits.header_timeout if phase == HEADERS else self.limits.body_timeout:g} s")

    # --- the protocol's steps -------------------------------------------------------------------------------------
    def connectionMade(self) -> None:
        super().connectionMade()
        self._arm(HEADERS)

    def dataReceived(self, data: bytes) -> None:
        if self._refused:  # read and dropped, so that the client sees the answer rather than a reset
            self._drained += len(data)
            if self._drained > DRAIN_BYTES and self.transport is not None:
                self.transport.abortConnection()
            return
        if self._phase == HEADERS and data:
            self._started = True
        super().dataReceived(data)

    def lineReceived(self, line: bytes) -> None:
        if not self._refused:
            super().lineReceived(line)

    def rawDataReceived(self, data: bytes) -> None:
        if not self._refused:
            super().rawDataReceived(data)

    def headerReceived(self, line: bytes) -> bool:
        ok = bool(super().headerReceived(line))
        if ok and self.length and self.length > self.limits.body_limit(self._path):
            self._refuse(http.REQUEST_ENTITY_TOO_LARGE, f"request body of {self.length} bytes: at most "
                         f"{self.limits.body_limit(self._path)} are read on {urlsplit(self._path).path.decode()}")
            return False
        return ok

    def allHeadersReceived(self) -> None:
        if self._refused:
            return
        super().allHeadersReceived()
        self._body_read = 0
        if self.length != 0:
            self._arm(BODY)

    def allContentReceived(self) -> None:
        if self._refused:
            return
        self._disarm()
        self._phase = HANDLING
        super().allContentReceived()

    def body_received(self, size: int) -> bool:
        """Count ``size`` more body bytes; False (and a 413) once the body is over its limit."""
        self._body_read += size
        limit = self.limits.body_limit(self._path if hasattr(self, "_path") else b"")
        if self._body_read > limit:
            self._refuse(http.REQUEST_ENTITY_TOO_LARGE, f"request body over {limit} bytes")
            return False
        return True

    def requestDone(self, request: Any) -> None:
        self._started = False
        self._arm(HEADERS)  # the next request (or an idle kept-alive connection) has its own deadline
        super().requestDone(request)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self._disarm()
        super().connectionLost(reason)

    # --- refusing -------------------------------------------------------------------------------------------------
    def _refuse(self, code: int, message: str) -> None:
        if self._refused or self.transport is None:
            return
        self._refused = True
        self._disarm()
        body = json.dumps({"status": "error", "message": message}).encode() + b"\n"
        head = (f"HTTP/1.1 {code} {http.RESPONSES[code].decode()}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        self.transport.write(head + body)
        self.transport.loseWriteConnection()
        self.callLater(DRAIN_SECONDS, self._close)

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.abortConnection()
