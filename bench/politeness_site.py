"""The site of ``bench.politeness`` and of the pacing tests: generated pages on several host names, an access log.

One :class:`ThreadingHTTPServer` per loopback address (127.0.0.1 unless a host is given another), all on one port,
answers every host name by its ``Host`` header: ``/p/<n>.html`` is a page with an ``<h1>`` and links to pages
``3n+1 .. 3n+3`` (so the crawl frontier never runs dry), ``/robots.txt`` allows everything — or answers the status
given for its host (``robots_status``: 500 makes the host's robots.txt unreachable, RFC 9309 2.3.1.3). Every
request is logged when it *arrives* — what the site sees — as ``(time, host, path)`` (:attr:`PacedSite.log`, and
one line ``<epoch seconds> <host> <path>`` in the access-log file, which :func:`read_log` reads back).
:meth:`PacedSite.set_latency` makes one host answer that many seconds late from now on (a site that slows down).

Run as a process of its own (``python -m bench.politeness_site --log FILE --ready FILE --host NAME[=ADDRESS] …
[--robots-status NAME=STATUS]``), so that the timestamps of its log never wait for the GIL of the process that
reads them (a test's, with its Kafka and ZooKeeper clients): it writes its port to the ``--ready`` file once it
listens, and serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import socket
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PAGES = 100_000
LOOPBACK = "127.0.0.1"


def page(host: str, number: int) -> bytes:
    links = "".join(f'<li><a href="/p/{child}.html">page {child}</a></li>'
                    for child in range(3 * number + 1, 3 * number + 4) if child < PAGES)
    return (f"<!doctype html><html><head><title>{host} {number}</title></head><body>"
            f"<h1>{host} page {number}</h1><ul>{links}</ul></body></html>").encode()


def read_log(path: Path) -> list[tuple[float, str, str]]:
    """``(time, host, path)`` of every request an access-log file holds, in arrival order."""
    entries = []
    for line in path.read_text().splitlines() if path.exists() else []:
        at, host, request_path = line.split(" ", 2)
        entries.append((float(at), host, request_path))
    return entries


class PacedSite:
    def __init__(self, hosts: list[str], access_log: Path, *, addresses: Mapping[str, str] | None = None,
                 robots_status: Mapping[str, int] | None = None) -> None:
        self.hosts = hosts
        self.addresses = {host: (addresses or {}).get(host, LOOPBACK) for host in hosts}
        self.robots_status = dict(robots_status or {})
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
                    status = site.robots_status.get(host, 200)
                    self._answer(status, b"User-agent: *\nAllow: /\n" if status == 200 else b"down\n", "text/plain")
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

        self.servers = _servers(sorted(set(self.addresses.values())), Handler)
        self.port = self.servers[0].server_address[1]
        self._threads = [threading.Thread(target=server.serve_forever, name=f"politeness-site-{n}", daemon=True)
                         for n, server in enumerate(self.servers)]

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
        path.write_text("".join(f"{self.addresses[host]} {host}\n" for host in self.hosts))
        return path

    def hits(self, host: str) -> list[float]:
        """Arrival times of the host's pages (robots.txt aside)."""
        with self._lock:
            return sorted(t for t, h, p in self.log if h == host and p != "/robots.txt")

    def start(self) -> PacedSite:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()
        self._file.close()


def _servers(addresses: list[str], handler: Any, tries: int = 20) -> list[ThreadingHTTPServer]:
    """One server per address, all on one port (the first's, free on every address: tried again if not)."""
    for _ in range(tries):
        first = ThreadingHTTPServer((addresses[0], 0), handler)
        servers = [first]
        try:
            servers += [ThreadingHTTPServer((address, first.server_address[1]), handler) for address in addresses[1:]]
        except OSError:
            for server in servers:
                server.server_close()
            continue
        for server in servers:
            server.daemon_threads = True
        return servers
    raise OSError(f"no port free on every one of {addresses}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", type=Path, required=True, help="the access-log file")
    parser.add_argument("--ready", type=Path, required=True, help="written with the port once the site listens")
    parser.add_argument("--host", action="append", default=[], help="NAME or NAME=ADDRESS (a loopback address)")
    parser.add_argument("--robots-status", action="append", default=[], help="NAME=STATUS of its robots.txt")
    args = parser.parse_args(argv)
    hosts = dict(entry.partition("=")[::2] for entry in args.host)
    addresses = {host: address for host, address in hosts.items() if address}
    for address in addresses.values():
        if not socket.inet_aton(address) or not address.startswith("127."):
            parser.error(f"{address}: only loopback addresses are served")
    robots = {name: int(status) for name, _, status in (entry.partition("=") for entry in args.robots_status)}
    site = PacedSite(list(hosts), args.log, addresses=addresses, robots_status=robots).start()
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    args.ready.write_text(str(site.port))
    stopped.wait()
    site.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
