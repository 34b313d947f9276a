"""One render: a Scrapy request in, the page's DOM after its scripts ran out, as a Scrapy response.

The page's own request goes out with the Scrapy request's headers (User-Agent, cookies, Referer...), every other
request of the page with its User-Agent. Resource types in ``block`` (images, fonts, media by default) are never
fetched; requests to the page's own host besides the page itself are capped at ``subrequests`` (a render is one hit
of the cluster throttle; its sub-resources are not pages, but a page must not flood its site). The render waits for
the load event, then up to ``settle`` seconds for the network to go quiet (no request in flight for 0.25 s: scripts
fetching their content), and reads the DOM. All of it within ``timeout`` seconds: past it the page is closed and the
download fails with a :class:`RenderTimeout` (a Scrapy ``DownloadTimeoutError``), which Scrapy retries as any
download timeout before the task completes with that reason.

The response carries the main document's status and headers (so Retry-After, redirects, cookies work as for a
static fetch); an HTML body is the serialised DOM in UTF-8, any other body the bytes the server sent.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from scrapy import Request
from scrapy.exceptions import DownloadFailedError, DownloadTimeoutError
from scrapy.http import Headers, HtmlResponse, Response
from scrapy.responsetypes import responsetypes

from spiders.render.browser import BrowserPool

DEFAULT_BLOCK = ("image", "font", "media")
QUIET = 0.25  # seconds without a request in flight after which a loaded page is taken as rendered
_DROPPED_HEADERS = {"content-encoding", "content-length", "transfer-encoding"}
_NOT_FORWARDED = {"host", "content-length", "connection", "proxy-authorization"}


@dataclass
class RenderConfig:
    timeout: float = 30.0
    settle: float = 2.0
    block: Collection[str] = DEFAULT_BLOCK
    subrequests: int = 50


@dataclass
class PageLog:
    """What one render asked of the network (for counts and tests)."""

    same_host: int = 0  # sub-requests to the page's host that went out
    capped: int = 0  # sub-requests to the page's host aborted by the cap
    blocked: int = 0  # requests of a blocked resource type
    other_hosts: int = 0
    urls: list[str] = field(default_factory=list)


class RenderTimeout(DownloadTimeoutError):
    """The render took longer than CRAWLFLEET_RENDER_TIMEOUT (a hung page, or a site that does not answer)."""


class RenderFailed(DownloadFailedError):
    """The browser could not load the page (connection refused, reset, the browser died...)."""


def proxy_of(request: Request) -> str | None:
    """The request's proxy URL with its credentials (HttpProxyMiddleware moved them to Proxy-Authorization)."""
    url = request.meta.get("proxy")
    auth = request.headers.get(b"Proxy-Authorization")
    if not url or not auth or not auth.startswith(b"Basic "):
        return url
    try:
        user, _, password = base64.b64decode(auth[6:]).decode("latin-1").partition(":")
    except ValueError:
        return url
    parts = urlsplit(url if "://" in url else f"http://{url}")
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{parts.hostname}:{parts.port or 80}"
    return parts._replace(netloc=netloc).geturl()


async def render(pool: BrowserPool, request: Request, config: RenderConfig) -> Response:
    """Render ``request`` in a page of ``pool``; its response (``flags`` holds ``"rendered"``)."""
    from playwright.async_api import Error as PlaywrightError

    started = time.monotonic()
    log = PageLog()
    try:
        async with asyncio.timeout(config.timeout):
            async with pool.page(proxy_of(request)) as page:
                response = await _load(page, request, config, log)
    except TimeoutError as exc:
        raise RenderTimeout(f"rendering {request.url} took more than {config.timeout:g} s") from exc
    except PlaywrightError as exc:
        if "Timeout" in type(exc).__name__:
            raise RenderTimeout(f"rendering {request.url}: {exc.message.splitlines()[0]}") from exc
        raise RenderFailed(f"rendering {request.url}: {exc.message.splitlines()[0]}") from exc
    request.meta["download_latency"] = time.monotonic() - started
    request.meta["render_log"] = log
    return response


async def _load(page: Any, request: Request, config: RenderConfig, log: PageLog) -> Response:
    headers = _scrapy_headers(request)
    host = urlsplit(request.url).hostname
    network = _Network(page)
    await page.route("**/*", _router(page, headers, host, config, log))
    main = await page.goto(request.url, wait_until="load", timeout=config.timeout * 1000)
    await network.quiet(QUIET, config.settle)  # a page that keeps polling never goes quiet: its DOM at the limit
    return await _response(page, main, request)


class _Network:
    """The page's requests in flight, to tell when it has gone quiet: no request for ``QUIET`` seconds. Playwright's
    ``networkidle`` waits 500 ms of silence, which is most of a render of a small page; a script that fetches its
    content renders it as the response arrives."""

    def __init__(self, page: Any) -> None:
        self.in_flight = 0
        self.changed = time.monotonic()
        page.on("request", self._started)
        page.on("requestfinished", self._ended)
        page.on("requestfailed", self._ended)

    def _started(self, _: Any) -> None:
        self.in_flight += 1
        self.changed = time.monotonic()

    def _ended(self, _: Any) -> None:
        self.in_flight = max(0, self.in_flight - 1)
        self.changed = time.monotonic()

    async def quiet(self, idle: float, limit: float) -> bool:
        deadline = time.monotonic() + limit
        while (now := time.monotonic()) < deadline:
            if self.in_flight == 0 and now - self.changed >= idle:
                return True
            await asyncio.sleep(idle / 5)
        return False


def _scrapy_headers(request: Request) -> dict[str, str]:
    return {name.decode("latin-1").lower(): b", ".join(values).decode("latin-1")
            for name, values in request.headers.items()
            if values and name.decode("latin-1").lower() not in _NOT_FORWARDED}


def _router(page: Any, headers: dict[str, str], host: str | None, config: RenderConfig, log: PageLog) -> Any:
    user_agent = {"user-agent": headers["user-agent"]} if "user-agent" in headers else {}
    navigated = False

    async def route(route: Any, req: Any) -> None:
        nonlocal navigated
        if not navigated and req.is_navigation_request() and req.frame == page.main_frame:
            navigated = True  # the page itself: as the static fetch would have sent it
            await route.continue_(headers={**req.headers, **headers})
            return
        if req.resource_type in config.block:
            log.blocked += 1
            await route.abort("blockedbyclient")
            return
        if urlsplit(req.url).hostname == host:
            if log.same_host >= config.subrequests:
                log.capped += 1
                await route.abort("blockedbyclient")
                return
            log.same_host += 1
            log.urls.append(req.url)
        else:
            log.other_hosts += 1
        await route.continue_(headers={**req.headers, **user_agent})

    return route


async def _response(page: Any, main: Any, request: Request) -> Response:
    if main is None:  # nothing was navigated to (e.g. the same document): the DOM as it is
        headers, status, url = Headers({"Content-Type": "text/html; charset=utf-8"}), 200, page.url
    else:
        headers = Headers()
        for header in await main.headers_array():
            if header["name"].lower() not in _DROPPED_HEADERS:
                headers.appendlist(header["name"], header["value"])
        status, url = main.status, main.url
    content_type = (headers.get(b"Content-Type", b"text/html") or b"").decode("latin-1").lower()
    if "html" in content_type:
        headers[b"Content-Type"] = b"text/html; charset=utf-8"  # the DOM, serialised in UTF-8
        body = (await page.content()).encode("utf-8")
        return HtmlResponse(url=url, status=status, headers=headers, body=body, request=request,
                            flags=["rendered"], encoding="utf-8")
    body = await main.body()
    cls = responsetypes.from_args(headers=headers, url=url, body=body)
    return cls(url=url, status=status, headers=headers, body=body, request=request, flags=["rendered"])
