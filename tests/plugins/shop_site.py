"""A small shop on loopback for the tests of one's own Scrapy projects on the fleet (issue 35), with its access log.

Pages: ``/`` links the categories, the login form and a dead link; ``/category/<c>`` (``?page=2``) lists products and
links the other categories; ``/product/<id>`` names a product and its price and links its neighbours (links found
many times, as on real sites); ``/login`` is a form whose POST sets a session cookie and redirects (302) to
``/account``, which lists orders only to a logged-in visitor; ``/order/<n>`` answers 403 without the session; every
other path is 404. ``hits`` counts every request by (method, path with query): what the site's access log shows.
``delay`` slows the product pages (a crawl that lasts long enough to kill a worker in the middle).

The server is Python's threading HTTP server, in a thread of the test process (a real server on a loopback port).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

CATEGORIES = 3
PER_PAGE = 6
PAGES = 2
ORDERS = 6
SESSION = "s3cr3t"


def _page(title: str, body: str) -> bytes:
    return f"<html><head><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>".encode()


class ShopSite:
    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.hits: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site._answer(self, "GET")

            def do_POST(self) -> None:
                site._answer(self, "POST")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="shop-site", daemon=True)

    def start(self) -> ShopSite:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reset(self) -> None:
        with self._lock:
            self.hits.clear()

    def counts(self) -> Counter[tuple[str, str]]:
        with self._lock:
            return Counter(self.hits)

    # --- the pages ---------------------------------------------------------------------------------------------------
    def _answer(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        with self._lock:
            self.hits[(method, handler.path)] += 1
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0)) if method == "POST" else b""
        logged_in = f"session={SESSION}" in (handler.headers.get("Cookie") or "")
        status, headers, page = self._route(method, parts.path, parse_qs(parts.query), body, logged_in)
        handler.send_response(status)
        for name, value in {"Content-Type": "text/html; charset=utf-8", **headers}.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(page)))
        handler.end_headers()
        handler.wfile.write(page)

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: bytes,
               logged_in: bool) -> tuple[int, dict[str, str], bytes]:
        segments = [s for s in path.split("/") if s]
        if path == "/":
            links = "".join(f'<a href="/category/{c}">Category {c}</a>' for c in range(1, CATEGORIES + 1))
            return 200, {}, _page("Shop", links + '<a href="/login">Log in</a><a href="/gone">Old page</a>')
        if len(segments) == 2 and segments[0] == "category" and segments[1].isdigit():
            return 200, {}, self._category(int(segments[1]), int((query.get("page") or ["1"])[0]))
        if len(segments) == 2 and segments[0] == "product" and segments[1].isdigit():
            if self.delay:
                time.sleep(self.delay)
            return 200, {}, self._product(int(segments[1]))
        if path == "/login" and method == "GET":
            form = ('<form action="/login" method="post"><input name="user"><input name="pw" type="password">'
                    '<input type="submit" value="Log in"></form>')
            return 200, {}, _page("Log in", form)
        if path == "/login" and method == "POST":
            fields = parse_qs(body.decode())
            if fields.get("user") == ["ann"] and fields.get("pw") == ["secret"]:
                return 302, {"Location": "/account", "Set-Cookie": f"session={SESSION}; Path=/"}, b""
            return 403, {}, _page("Wrong password", "")
        if path == "/account":
            if not logged_in:
                return 403, {}, _page("Log in first", "")
            orders = "".join(f'<a class="order" href="/order/{n}">Order {n}</a>' for n in range(1, ORDERS + 1))
            return 200, {}, _page("Your account", orders)
        if len(segments) == 2 and segments[0] == "order" and segments[1].isdigit():
            if not logged_in:
                return 403, {}, _page("Log in first", "")
            return 200, {}, _page(f"Order {segments[1]}", f'<span class="total">{int(segments[1]) * 7}</span>')
        return 404, {}, _page("Not found", "")

    def _category(self, category: int, page: int) -> bytes:
        first = category * 100 + (page - 1) * PER_PAGE
        links = "".join(f'<a class="product" href="/product/{n}">P{n}</a>'
                        for n in range(first + 1, first + 1 + PER_PAGE))
        others = "".join(f'<a href="/category/{c}">Category {c}</a>' for c in range(1, CATEGORIES + 1))
        more = f'<a class="next" href="/category/{category}?page={page + 1}">Next</a>' if page < PAGES else ""
        return _page(f"Category {category}", links + others + more)

    def _product(self, number: int) -> bytes:
        category = number // 100
        neighbours = "".join(f'<a href="/product/{n}">P{n}</a>' for n in (number - 1, number + 1)
                             if category * 100 < n <= category * 100 + PER_PAGE * PAGES)
        return _page(f"Product {number}", f'<span class="price">{number * 1.5:.2f}</span>'
                                          f'<a href="/category/{category}">Back</a>{neighbours}')


@pytest.fixture(scope="module")
def shop_site() -> Iterator[ShopSite]:
    site = ShopSite().start()
    try:
        yield site
    finally:
        site.stop()
