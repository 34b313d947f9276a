"""Local forward proxies and a proxy-list page for the proxy-pool tests.

A test proxy is a child process (``python -m tests.plugins.proxies --bind ADDR --port PORT [--auth u:p]
[--broken]``) built on :mod:`twisted.web.proxy`. It resolves the names it is asked for through the host map of
CRAWLFLEET_HOSTS_FILE (the demo web's ``*.fleet.test``), as the workers do, counts every request it forwarded
(per host) and answers ``GET /__proxy/stats`` (a request to the proxy itself, not a proxied one) with those counts
as JSON. ``--auth`` makes it demand ``Proxy-Authorization`` (407 otherwise; the header is not passed on).
``--broken`` accepts connections and closes them at once, as a dead proxy behind a load balancer does.

Each proxy listens on its own loopback address (127.88.0.<n>), so that proxies have distinct exit addresses.

Fixtures: ``proxy_farm`` (start proxies, write a list page of them, stop one on purpose) and ``list_page`` (a tiny
static HTTP server of one HTML page, in a thread of the test process).
"""

from __future__ import annotations

import argparse
import base64
import http.server
import itertools
import json
import threading
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

import pytest

STATS_PATH = b"/__proxy/stats"
_addresses = itertools.count(1)


# --- the proxy process ----------------------------------------------------------------------------------------------
def _serve(bind: str, port: int, auth: str, broken: bool) -> None:
    from twisted.internet import protocol, reactor
    from twisted.web import http
    from twisted.web.proxy import Proxy, ProxyClientFactory, ProxyRequest

    from messaging.hostmap import load_hostmap

    hostmap = load_hostmap()
    expected = b"Basic " + base64.b64encode(auth.encode()) if auth else None
    forwarded: Counter[str] = Counter()
    refused: Counter[str] = Counter()

    class CountingProxyRequest(ProxyRequest):
        def process(self) -> None:
            if self.uri.startswith(b"/"):  # a request to the proxy itself
                if self.uri.split(b"?")[0] == STATS_PATH:
                    self._answer(200, json.dumps({"forwarded": sum(forwarded.values()), "hosts": dict(forwarded),
                                                  "refused": dict(refused)}).encode())
                else:
                    self._answer(404, b"not a proxied request")
                return
            if expected is not None and self.getHeader(b"proxy-authorization") != expected:
                refused["auth"] += 1
                self.responseHeaders.setRawHeaders(b"Proxy-Authenticate", [b'Basic realm="test-proxy"'])
                self._answer(407, b"proxy authentication required")
                return
            parsed = urlparse(self.uri)
            if parsed.scheme != b"http" or not parsed.hostname:
                self._answer(501, b"plain http only")
                return
            host = parsed.hostname.decode("ascii")
            target_port = parsed.port or 80
            address = hostmap.lookup(host) or host
            forwarded[host] += 1
            headers = self.getAllHeaders().copy()
            headers.pop(b"proxy-authorization", None)
            headers.setdefault(b"host", parsed.netloc)
            rest = urlunparse((b"", b"", parsed.path or b"/", parsed.params, parsed.query, b""))
            self.content.seek(0, 0)
            factory = ProxyClientFactory(self.method, rest, self.clientproto, headers, self.content.read(), self)
            self.reactor.connectTCP(address, target_port, factory)

        def _answer(self, code: int, body: bytes) -> None:
            self.setResponseCode(code)
            self.setHeader(b"Content-Type", b"application/json" if code == 200 else b"text/plain")
            self.setHeader(b"Content-Length", str(len(body)).encode())
            self.write(body)
            self.finish()

    class CountingProxy(Proxy):
        requestFactory = CountingProxyRequest

    class Hangup(protocol.Protocol):
        def connectionMade(self) -> None:
            self.transport.abortConnection()

    if broken:
        factory: Any = protocol.ServerFactory.forProtocol(Hangup)
    else:
        factory = http.HTTPFactory()
        factory.protocol = CountingProxy
    reactor.listenTCP(port, factory, interface=bind)
    print(f"test proxy listening on {bind}:{port}{' (broken)' if broken else ''}", flush=True)
    reactor.run()


def main() -> None:
    parser = argparse.ArgumentParser(description="A counting forward proxy for tests.")
    parser.add_argument("--bind", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--auth", default="", help="user:password the proxy demands")
    parser.add_argument("--broken", action="store_true", help="close every connection at once")
    args = parser.parse_args()
    _serve(args.bind, args.port, args.auth, args.broken)


# --- fixtures -------------------------------------------------------------------------------------------------------
@dataclass
class LocalProxy:
    host: str
    port: int
    proc: Any
    user: str = ""
    password: str = ""
    broken: bool = False
    location: str = "Loopback"

    @property
    def id(self) -> str:
        return f"{self.host}:{self.port}"

    def stats(self) -> dict[str, Any]:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"http://{self.host}:{self.port}{STATS_PATH.decode()}", timeout=5) as response:
            return json.loads(response.read())

    def forwarded(self, host: str | None = None) -> int:
        stats = self.stats()
        return int(stats["hosts"].get(host, 0) if host else stats["forwarded"])


class ProxyFarm:
    """Test proxies of one test, on distinct loopback addresses; stopped by PID with the test's ``procs``."""

    def __init__(self, procs: Any, env: dict[str, str]) -> None:
        self.procs = procs
        self.env = env
        self.proxies: list[LocalProxy] = []

    def start(self, broken: bool = False, auth: str = "") -> LocalProxy:
        from deploy.procs import free_port, port_open, wait_for

        n = next(_addresses)
        host = f"127.88.{n // 250}.{n % 250 + 1}"
        port = free_port(host)
        argv = ["-m", "tests.plugins.proxies", "--bind", host, "--port", str(port)]
        if auth:
            argv += ["--auth", auth]
        if broken:
            argv.append("--broken")
        proc = self.procs.python(*argv, env=self.env, name=f"proxy-{host}")
        wait_for(lambda: port_open(port, host), 30, f"test proxy on {host}:{port}", 0.05,
                 lambda: f"exited with {proc.returncode}" if proc.poll() is not None else None)
        user, _, password = auth.partition(":")
        proxy = LocalProxy(host, port, proc, user, password, broken)
        self.proxies.append(proxy)
        return proxy

    def stop(self, proxy: LocalProxy) -> None:
        """The proxy dies (its connections are refused from now on)."""
        from deploy.procs import stop_pid

        stop_pid(proxy.proc.pid, timeout=10)


def list_page_html(proxies: list[LocalProxy], credentials: bool = False) -> str:
    """A proxy-list page in the seed's columns (table 4-7), a header row and a separator row included."""
    rows = ["<tr><th>IP</th><th>Port</th><th>Location</th><th>Anonymity</th><th>Type</th><th>Speed</th>"
            "<th>Alive</th>" + ("<th>User</th><th>Password</th>" if credentials else "") + "</tr>",
            "<tr><td colspan='7'><hr/></td></tr>"]
    for n, proxy in enumerate(proxies):
        cells = [proxy.host, str(proxy.port), proxy.location, "high", "HTTP", f"0.{n + 1}s", f"{n + 1} days"]
        if credentials:
            cells += [proxy.user, proxy.password]
        rows.append("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in cells) + "</tr>")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>Free proxies</title></head><body>"
            "<table id='proxies'>" + "".join(rows) + "</table></body></html>")


class ListPage:
    """One static HTML page on a loopback HTTP server (a thread of the test process); ``url`` serves it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        handler = _quiet_handler(root)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="list-page", daemon=True)
        self.thread.start()

    def publish(self, html: str, name: str = "proxies.html") -> str:
        (self.root / name).write_text(html, encoding="utf-8")
        return f"http://127.0.0.1:{self.server.server_address[1]}/{name}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def _quiet_handler(root: Path) -> type[http.server.SimpleHTTPRequestHandler]:
    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def proxy_farm(procs: Any, cf: Any, demoweb: dict[str, Any]) -> ProxyFarm:
    return ProxyFarm(procs, cf.with_env(CRAWLFLEET_HOSTS_FILE=demoweb["hosts_file"]))


@pytest.fixture
def list_page(tmp_path: Path) -> Iterator[ListPage]:
    root = tmp_path / "list-page"
    root.mkdir()
    page = ListPage(root)
    try:
        yield page
    finally:
        page.close()


if __name__ == "__main__":
    main()
