"""The demo web's changing site (continuous crawling, ``frontier.revisit``): ``changing.fleet.test``.

Pages change as Poisson processes with per-page rates, on a **compressed clock**: the site's time runs ``scale`` times
faster than real time (``scale`` 120: a site hour lasts 30 real seconds), so a test of hours of a site's life takes
minutes. A crawl that revisits it gives its intervals in real seconds, i.e. site seconds / ``scale``: the site's clock
and the crawl's intervals are scaled together.

- ``/a/<n>.html`` — article ``n``; its rate by ``n % 6``: 4 changes a site hour, 1 an hour, 0.25 an hour, and
  half the articles never change (:data:`RATES`). A change rewrites its main text. Every answer also has a
  "rendered at" line and a rotating ad, so the raw HTML differs at every fetch while the main text changes only
  with the page. Validators by ``n % 3``: an
  ETag and a Last-Modified (0), a Last-Modified only (1), none (2); a request whose ``If-None-Match`` (or, without it,
  ``If-Modified-Since``) says the client has the current version gets 304.
- ``/`` — the list page: the articles published so far, newest first, without validators. It starts with
  ``initial`` articles and gains one every ``publish_every`` site seconds.
- ``/_changing/state.json`` — what the site knows, for tests and ``bench.recrawl``: its site time, every page's rate,
  validators, publication and change times so far and fetches (site time, status, version), the list page's fetch
  times, and counts: answers by status, and the
  revisits of unchanged pages that have validators (the client's last copy is the current version) with how many of
  them were answered 304.

Everything is a function of the seed and the site time (:class:`ChangingSite` has no Twisted in it);
``python -m deploy.demoweb.changing`` serves it (:func:`main`), :func:`start_changing` runs it in the background.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime
from pathlib import Path
from typing import Any

from deploy.demoweb.sites import DOMAIN
from deploy.demoweb.text import ENGLISH

log = logging.getLogger("deploy.demoweb.changing")
CHANGING_NAME = f"changing.{DOMAIN}"
CHANGING_IP = "127.0.0.26"  # a process of its own, the demo web's 16th address (its default range)
CHANGING_OFFSET = 15  # from CRAWLFLEET_DEMOWEB_ADDRESSES
STATE_PATH = "/_changing/state.json"
RATES = (4.0, 1.0, 0.25, 0.0, 0.0, 0.0)  # changes per site hour, by article number % 6
SITE_EPOCH = 1_767_225_600  # the site's time 0 as an HTTP date: 2026-01-01T00:00:00Z
ETAG_AND_DATE, DATE_ONLY, NO_VALIDATORS = "etag+last-modified", "last-modified", "none"


@dataclass
class Page:
    number: int
    rate: float  # changes per site hour
    validators: str
    published: float  # site time the article appears
    changes: list[float] = field(default_factory=list)  # change times, generated ahead as needed
    fetches: list[tuple[float, int, int]] = field(default_factory=list)  # (site time, status, version served)
    served_version: int | None = None  # the version the client last got (200) or had confirmed (304)

    def version(self, now: float) -> int:
        return sum(1 for t in self.changes if t <= now)


class ChangingSite:
    """The site's pages, clock and answers (see the module docstring)."""

    def __init__(self, seed: str = "crawlfleet", scale: float = 120.0, initial: int = 24, publish_every: float = 900.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.seed, self.scale, self.initial, self.publish_every = seed, scale, initial, publish_every
        self.clock = clock
        self.started = clock()
        self.pages: dict[int, Page] = {}
        self.counts: Counter[str] = Counter()
        self.list_fetches: list[float] = []  # site times the list page was fetched

    def now(self) -> float:
        """The site's time: real seconds since the start x scale."""
        return (self.clock() - self.started) * self.scale

    def published(self, now: float) -> int:
        return self.initial + max(0, math.floor(now / self.publish_every)) if self.publish_every > 0 else self.initial

    def page(self, number: int, now: float) -> Page | None:
        if number < 0 or number >= self.published(now):
            return None
        page = self.pages.get(number)
        if page is None:
            appears = 0.0 if number < self.initial else (number - self.initial + 1) * self.publish_every
            validators = (ETAG_AND_DATE, DATE_ONLY, NO_VALIDATORS)[number % 3]
            page = self.pages[number] = Page(number, RATES[number % len(RATES)], validators, appears)
        self._extend(page, now)
        return page

    def _extend(self, page: Page, now: float) -> None:
        if page.rate <= 0:
            return
        rng = random.Random(f"{self.seed}:{page.number}:{len(page.changes)}")
        last = page.changes[-1] if page.changes else page.published
        while last <= now:
            last += rng.expovariate(page.rate / 3600.0)
            page.changes.append(last)

    # --- answers ----------------------------------------------------------------------------------------------
    def answer(self, path: str, headers: dict[str, str]) -> tuple[int, list[tuple[str, str]], bytes]:
        now = self.now()
        if path == STATE_PATH:
            return 200, [("Content-Type", "application/json")], json.dumps(self.state(now)).encode()
        if path == "/":
            self.counts["list"] += 1
            self.list_fetches.append(now)
            return 200, _HTML, self.list_page(now).encode()
        number = _article_number(path)
        page = self.page(number, now) if number is not None else None
        if page is None:
            self.counts["404"] += 1
            return 404, _HTML, b"<html><body><h1>Not found</h1></body></html>"
        version = page.version(now)
        current = [v for v in (page.served_version,) if v is not None]
        if page.validators != NO_VALIDATORS and current and current[0] == version:
            self.counts["unchanged_revisits"] += 1
        reply_headers = list(_HTML)
        etag = f'"{page.number}-{version}"'
        modified_at = page.changes[version - 1] if version else page.published
        if page.validators == ETAG_AND_DATE:
            reply_headers.append(("ETag", etag))
        if page.validators != NO_VALIDATORS:
            reply_headers.append(("Last-Modified", formatdate(SITE_EPOCH + math.floor(modified_at), usegmt=True)))
        if page.validators != NO_VALIDATORS and _not_modified(headers, etag if page.validators == ETAG_AND_DATE
                                                              else None, modified_at):
            if current and current[0] == version:
                self.counts["unchanged_304"] += 1
            self.counts["304"] += 1
            page.fetches.append((now, 304, version))
            page.served_version = version
            return 304, [h for h in reply_headers if h[0] != "Content-Type"], b""
        self.counts["200"] += 1
        page.fetches.append((now, 200, version))
        page.served_version = version
        return 200, reply_headers, self.article_page(page, version, now).encode()

    def list_page(self, now: float) -> str:
        items = "".join(f'<li><a href="/a/{n}.html">{_title(self.seed, n)}</a></li>'
                        for n in reversed(range(self.published(now))))
        return (f"<html><head><title>Changing News</title></head><body><header><h1>Changing News</h1></header>"
                f"<main><ul class='articles'>{items}</ul></main><aside>{_ad(now)}</aside>"
                f"<footer>rendered at {now:.3f}</footer></body></html>")

    def article_page(self, page: Page, version: int, now: float) -> str:
        rng = random.Random(f"{self.seed}:{page.number}:text:{version}")
        paragraphs = "".join(f"<p>{ENGLISH.paragraph(rng)}</p>" for _ in range(4))
        return (f"<html><head><title>{_title(self.seed, page.number)}</title></head><body>"
                f"<nav><a href='/'>Home</a></nav><article><h1>{_title(self.seed, page.number)}</h1>"
                f"<p class='version'>Edition {version}.</p>{paragraphs}</article>"
                f"<aside>{_ad(now)}</aside><footer>rendered at {now:.3f}</footer></body></html>")

    def state(self, now: float) -> dict[str, Any]:
        pages = {}
        for number in range(self.published(now)):
            page = self.page(number, now)
            assert page is not None
            pages[f"/a/{number}.html"] = {"rate": page.rate, "validators": page.validators,
                                          "published": page.published,
                                          "changes": [t for t in page.changes if t <= now],
                                          "fetches": page.fetches}
        return {"now": now, "scale": self.scale, "publish_every": self.publish_every, "pages": pages,
                "list_fetches": self.list_fetches, "counts": dict(self.counts)}


_HTML = [("Content-Type", "text/html; charset=utf-8")]


def _article_number(path: str) -> int | None:
    if path.startswith("/a/") and path.endswith(".html") and path[3:-5].isdigit():
        return int(path[3:-5])
    return None


def _title(seed: str, number: int) -> str:
    return f"Story {number}: {ENGLISH.headline(random.Random(f'{seed}:{number}:title'))}"


def _ad(now: float) -> str:
    return f"<div class='ad'>Advertisement #{int(now * 1000) % 9973}</div>"


def _not_modified(headers: dict[str, str], etag: str | None, modified_at: float) -> bool:
    """RFC 9110 13.1: If-None-Match decides when it is sent (and the page has an ETag); else If-Modified-Since."""
    if_none_match = headers.get("if-none-match")
    if if_none_match is not None and etag is not None:
        return etag in [tag.strip() for tag in if_none_match.split(",")] or if_none_match.strip() == "*"
    since = headers.get("if-modified-since")
    if since:
        try:
            return SITE_EPOCH + math.floor(modified_at) <= parsedate_to_datetime(since).timestamp()
        except (TypeError, ValueError):
            return False
    return False


# --- serving --------------------------------------------------------------------------------------------------
def make_resource(site: ChangingSite) -> Any:
    from twisted.web import resource

    class Changing(resource.Resource):
        isLeaf = True

        def render_GET(self, request: Any) -> bytes:
            headers = {name.decode("latin-1").lower(): value.decode("latin-1")
                       for name, values in request.requestHeaders.getAllRawHeaders() for value in values}
            status, reply_headers, body = site.answer(request.path.decode("latin-1"), headers)
            request.setResponseCode(status)
            for name, value in reply_headers:
                request.setHeader(name.encode(), value.encode())
            return body

    return Changing()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m deploy.demoweb.changing", description=__doc__.split("\n")[0])
    parser.add_argument("--run-dir", type=Path, required=True, help="write the hosts file here once listening")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--seed", default="crawlfleet")
    parser.add_argument("--scale", type=float, default=120.0, help="site seconds per real second")
    parser.add_argument("--initial", type=int, default=24, help="articles at the start")
    parser.add_argument("--publish-every", type=float, default=900.0, help="site seconds between new articles")
    parser.add_argument("--ip", default=CHANGING_IP, help="its loopback address")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s: %(message)s",
                        stream=sys.stdout)
    from twisted.web import http, server

    from deploy.demoweb.__main__ import write_hosts_file
    from messaging.reactor import running_reactor, serve_http

    class QuietSite(server.Site):
        def log(self, request: http.Request) -> None:
            return None  # the site counts what it answers itself

    site = ChangingSite(args.seed, args.scale, args.initial, args.publish_every)
    serve_http(QuietSite(make_resource(site)), args.port, args.ip)
    write_hosts_file(args.run_dir / "hosts", f"{args.ip}\t{CHANGING_NAME}\n")
    log.info("%s on http://%s:%d/ (scale %g)", CHANGING_NAME, args.ip, args.port, args.scale)
    running_reactor().run()
    return 0


def start_changing(run_dir: Path, *, seed: str = "crawlfleet", scale: float = 120.0, initial: int = 24,
                   publish_every: float = 900.0, timeout: float = 15.0) -> dict[str, Any]:
    """Run the changing site in the background until :func:`stop_changing`; its status (pid, port, url,
    hosts_file, scale)."""
    from deploy.demoweb.runner import PROJECT_ROOT, fetch
    from deploy.demoweb.sites import address
    from deploy.procs import free_port, spawn, stop_pid, wait_for
    from messaging.settings import load

    ip = address(load().demoweb_addresses, CHANGING_OFFSET)
    run_dir.mkdir(parents=True, exist_ok=True)
    port = free_port(ip)
    hosts_file = run_dir / "hosts"
    hosts_file.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "deploy.demoweb.changing", "--run-dir", str(run_dir), "--port", str(port),
            "--seed", seed, "--scale", str(scale), "--initial", str(initial), "--publish-every", str(publish_every),
            "--ip", ip]
    proc = spawn(argv, log_path=run_dir / "changing.log", cwd=PROJECT_ROOT)

    def answers() -> bool:
        status, _, _ = fetch(ip, port, CHANGING_NAME, STATE_PATH, timeout=1.0)
        return status == 200 and hosts_file.exists()

    try:
        wait_for(answers, timeout, "the changing site", interval=0.1,
                 alive=lambda: None if proc.poll() is None else f"it exited with {proc.poll()}")
    except BaseException:
        stop_pid(proc.pid)
        raise
    return {"pid": proc.pid, "port": port, "url": f"http://{CHANGING_NAME}:{port}/", "hosts_file": str(hosts_file),
            "scale": scale, "ip": ip, "name": CHANGING_NAME}


def stop_changing(status: dict[str, Any]) -> None:
    from deploy.procs import stop_pid

    stop_pid(status["pid"])


def read_state(status: dict[str, Any]) -> dict[str, Any]:
    from deploy.demoweb.runner import fetch

    _, _, body = fetch(status["ip"], status["port"], status["name"], STATE_PATH)
    return json.loads(body)


if __name__ == "__main__":
    sys.exit(main())
