"""The site of ``bench.politeness``: generated pages on several host names, an access log, a latency knob.

One :class:`ThreadingHTTPServer` on 127.0.0.1 answers every host name (by its ``Host`` header): ``/p/<n>.html`` is a
page with an ``<h1>`` and links to pages ``3n+1 .. 3n+3`` (so the crawl frontier never runs dry), ``/robots.txt``
allows everything. Every request is logged when it *arrives* — what the site sees — as ``(time, host, path)``
(:attr:`PacedSite.log`, and one line ``<epoch seconds> <host> <path>`` in the access-log file).
:meth:`PacedSite.set_latency` makes one host answer that many seconds late from now on (a site that slows down).
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PAGES = 100_000


def page(host: str, number: int) -> bytes:
    links = "".join(f'<li><a href="/p/{child}.html">page {child}</a></li>'
                    for child in range(3 * number + 1, 3 * number + 4) if child < PAGES)
    return (f"<!doctype html><html><head><title>{host} {number}</title></head><body>"
            f"<h1>{host} page {number}</h1><ul>{links}</ul></body></html>").encode()


class PacedSite:
    def __init__(self, hosts: list[str], access_log: Path) -> None:
        self.hosts = hosts
        self.access_log = access_log
        self.log: list[tuple[float, str, str]] = []
        self.latency: dict[str, float] = {}
        self._lock = threading.Lock()
        self._file = access_log.open("a", buffering=1)
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                host = (self.headers.get("Host") or "").split(":")[0].lower()
                site.record(host, self.path)
                delay = site.latency.get(host, 0.0)
                if delay:
                    time.sleep(delay)
                if self.path == "/robots.txt":
                    self._answer(200, b"User-agent: *\nAllow: /\n", "text/plain")
                elif self.path.startswith("/p/") and self.path.endswith(".html") and self.path[3:-5].isdigit():
                    self._answer(200, page(host, int(self.path[3:-5])), "text/html; charset=utf-8")
                else:
                    self._answer(404, b"not found", "text/plain")

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # the access log is ours
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="politeness-site", daemon=True)

    def record(self, host: str, path: str) -> None:
        now = time.time()
        with self._lock:
            self.log.append((now, host, path))
            self._file.write(f"{now:.6f} {host} {path}\n")

    def set_latency(self, host: str, seconds: float) -> None:
        self.latency = {**self.latency, host: seconds}

    def url(self, host: str, path: str = "/p/0.html") -> str:
        return f"http://{host}:{self.port}{path}"

    def hosts_file(self, path: Path) -> Path:
        path.write_text("".join(f"127.0.0.1 {host}\n" for host in self.hosts))
        return path

    def hits(self, host: str) -> list[float]:
        """Arrival times of the host's pages (robots.txt aside)."""
        with self._lock:
            return sorted(t for t, h, p in self.log if h == host and p != "/robots.txt")

    def start(self) -> PacedSite:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._file.close()
