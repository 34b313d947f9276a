"""A small site on loopback with an access log, for the failed-URL and pause tests: what the site saw is the truth.

Sections of numbered pages (``/<section>/`` links to ``/<section>/<n>`` for ``n`` below its size; each page has a
title and links back to its section). Chosen pages fail as the test says — ``404``, ``500`` or ``timeout`` (no answer
for :data:`TIMEOUT_SECONDS`, longer than the workers' download timeout in those tests) — until the test fixes the
site. Every request is logged (time, path, the answer: a status or ``timeout``) before it is answered. A thread of
the test process serves it (``ThreadingHTTPServer``); :meth:`LoggedSite.close` stops it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TIMEOUT_SECONDS = 4.0
FAILURES = ("404", "500", "timeout")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # a test process busy elsewhere accepts late: with the default backlog (5) a burst of connections overflows it,
    # a SYN is dropped, and the client's attempt times out without the site ever seeing (and logging) it
    request_queue_size = 128


@dataclass(frozen=True)
class Hit:
    at: float  # time.time() when the request arrived
    path: str
    answer: str  # "200", "404", "500", "timeout"


@dataclass
class LoggedSite:
    sections: dict[str, int]  # section -> pages
    failing: dict[str, str] = field(default_factory=dict)  # path -> "404" | "500" | "timeout"
    log: list[Hit] = field(default_factory=list)

    def __post_init__(self) -> None:
        site = self
        self.fixed = False
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                answer = site._answer(path)
                site._record(Hit(time.time(), path, answer))
                if answer == "timeout":
                    time.sleep(TIMEOUT_SECONDS)  # the client gave up long before
                    answer = "200"
                body = site._body(path, answer)
                try:
                    self.send_response(int(answer))
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the client went away (a timed-out request)
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def url(self, path: str) -> str:
        return self.origin + path

    def pages(self, section: str) -> list[str]:
        """Every path of a section that a crawl from its index finds: the index and its pages."""
        return [f"/{section}/", *(f"/{section}/{n}" for n in range(self.sections[section]))]

    def fix(self) -> None:
        """From now on every page answers 200."""
        self.fixed = True

    def hits(self, since: float = 0.0, until: float = float("inf")) -> list[Hit]:
        """Requests for pages (robots.txt left out) that arrived in [since, until)."""
        with self._lock:
            return [hit for hit in self.log if since <= hit.at < until and hit.path != "/robots.txt"]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    # --- internals ------------------------------------------------------------------------------------------------
    def _record(self, hit: Hit) -> None:
        with self._lock:
            self.log.append(hit)

    def _answer(self, path: str) -> str:
        section, _, rest = path.strip("/").partition("/")
        if section not in self.sections or (rest and not (rest.isdigit() and int(rest) < self.sections[section])):
            return "404"
        return "200" if self.fixed else self.failing.get(path, "200")

    def _body(self, path: str, answer: str) -> bytes:
        section, _, rest = path.strip("/").partition("/")
        if answer != "200":
            return f"<html><head><title>{answer}</title></head><body>{answer}</body></html>".encode()
        if not rest:
            links = "".join(f'<li><a href="/{section}/{n}">page {n}</a></li>' for n in range(self.sections[section]))
            return (f"<html><head><title>{section}</title></head><body><h1>{section}</h1><ul>{links}</ul>"
                    "</body></html>").encode()
        return (f'<html><head><title>{section} {rest}</title></head><body><h1>{section} page {rest}</h1>'
                f'<p>Text of page {rest}.</p><a href="/{section}/">back</a></body></html>').encode()
