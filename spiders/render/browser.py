"""One browser per worker: Debian's headless Chromium driven by Playwright on the reactor's asyncio loop.

The browser starts on the first render (a worker whose crawls never render never starts one) with the binary of
``CRAWLFLEET_RENDER_BROWSER`` (default: Debian's ``chromium-headless-shell``, else ``chromium``) through Playwright's
``executable_path``: nothing is downloaded. Names of ``CRAWLFLEET_HOSTS_FILE`` (the demo web) are given to Chromium's
resolver as ``--host-resolver-rules``, as the worker's own resolver knows them.

Pages live in browser *contexts*, one per proxy (a context's proxy is fixed when it opens; ``None`` is direct). A
context serves ``context_pages`` pages, then is retired: new pages go to a fresh context and the old one closes when
its last page is done, taking its cookies, cache and renderer memory with it. At most ``pages`` pages are open at
once (the page pool). A browser that dies (crashed, killed) is forgotten with its contexts; the next render starts
another.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

logger = logging.getLogger(__name__)

LAUNCH_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage")
DEBIAN_BROWSERS = ("/usr/lib/chromium/chromium-headless-shell", "/usr/lib/chromium/chromium")
CLOSE_TIMEOUT = 5.0  # seconds a page or context may take to close before it is left to the browser


class BrowserUnavailable(RuntimeError):
    """No browser binary to render with: install Debian's chromium-headless-shell or chromium."""


def find_browser(configured: str = "") -> str:
    """The Chromium binary to launch: the configured one, else Debian's headless shell, else Debian's chromium."""
    if configured:
        path = shutil.which(configured) or configured
        if not os.access(path, os.X_OK):
            raise BrowserUnavailable(f"CRAWLFLEET_RENDER_BROWSER={configured!r} is not an executable")
        return path
    for path in DEBIAN_BROWSERS:
        if os.access(path, os.X_OK):
            return path
    found = shutil.which("chromium-headless-shell") or shutil.which("chromium")
    if found is None:
        raise BrowserUnavailable("no Chromium to render with: run deploy/install-deps.sh (Debian's "
                                 "chromium-headless-shell or chromium)")
    return found


def resolver_rules(hosts: Mapping[str, str]) -> str:
    """``--host-resolver-rules`` for names only the hosts file knows (Chromium asks no one else for them)."""
    return ", ".join(f"MAP {name} {address}" for name, address in sorted(hosts.items()))


def playwright_proxy(url: str | None) -> dict[str, str] | None:
    """Playwright's proxy option for a Scrapy ``meta["proxy"]`` URL (credentials in it become its username and
    password)."""
    if not url:
        return None
    parts = urlsplit(url if "://" in url else f"http://{url}")
    proxy = {"server": f"{parts.scheme}://{parts.hostname}:{parts.port or 80}"}
    if parts.username:
        proxy["username"] = unquote(parts.username)
        proxy["password"] = unquote(parts.password or "")
    return proxy


@dataclass
class PoolConfig:
    executable: str
    pages: int = 4
    context_pages: int = 100
    hosts: Mapping[str, str] = field(default_factory=dict)


@dataclass(eq=False)
class _Context:
    context: Any
    proxy: str | None
    served: int = 0
    open_pages: int = 0
    retired: bool = False


class BrowserPool:
    def __init__(self, config: PoolConfig) -> None:
        if config.pages < 1 or config.context_pages < 1:
            raise ValueError("the page pool and the pages per context must be at least 1")
        self.config = config
        self._slots = asyncio.Semaphore(config.pages)
        self._lock = asyncio.Lock()
        self._playwright: Any = None
        self._browser: Any = None
        self._current: dict[str | None, _Context] = {}  # proxy -> the context new pages open in
        self._contexts: set[_Context] = set()
        self.launched = 0  # browsers started (more than one: the browser died and was started again)
        self.contexts_opened = 0
        self.in_use = 0

    @contextlib.asynccontextmanager
    async def page(self, proxy: str | None = None) -> AsyncIterator[Any]:
        """A new page (in the proxy's current context) for one render; closed, and its context recycled, after."""
        async with self._slots:
            async with self._lock:
                entry = await self._context_for(proxy)
                entry.served += 1
                entry.open_pages += 1
            self.in_use += 1
            page = None
            try:
                page = await entry.context.new_page()
                yield page
            finally:
                self.in_use -= 1
                await self._release(entry, page)

    async def close(self) -> None:
        async with self._lock:
            for entry in list(self._contexts):
                await self._close_context(entry)
            if self._browser is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._browser.close(), CLOSE_TIMEOUT)
                self._browser = None
            if self._playwright is not None:
                with contextlib.suppress(Exception):
                    await self._playwright.stop()
                self._playwright = None

    # --- internals ------------------------------------------------------------------------------------------------
    async def _context_for(self, proxy: str | None) -> _Context:
        browser = await self._browser_running()
        entry = self._current.get(proxy)
        if entry is not None and entry.served >= self.config.context_pages:
            entry.retired = True  # closes when its last page is done
            del self._current[proxy]
            if entry.open_pages == 0:
                await self._close_context(entry)
            entry = None
        if entry is None:
            options: dict[str, Any] = {"java_script_enabled": True, "service_workers": "block"}
            if (settings := playwright_proxy(proxy)) is not None:
                options["proxy"] = settings
            entry = _Context(await browser.new_context(**options), proxy)
            self._current[proxy] = entry
            self._contexts.add(entry)
            self.contexts_opened += 1
        return entry

    async def _browser_running(self) -> Any:
        if self._browser is not None and self._browser.is_connected():
            return self._browser
        if self._browser is not None:
            logger.warning("the browser is gone: starting another")
            self._current.clear()
            self._contexts.clear()
        if self._playwright is None:
            from playwright.async_api import async_playwright

            self._playwright = await async_playwright().start()
        args = list(LAUNCH_ARGS)
        if self.config.hosts:
            args.append(f"--host-resolver-rules={resolver_rules(self.config.hosts)}")
        self._browser = await self._playwright.chromium.launch(executable_path=self.config.executable,
                                                                headless=True, args=args, handle_sigint=False,
                                                                handle_sigterm=False, handle_sighup=False)
        self.launched += 1
        logger.info("browser started: %s %s (page pool %d, %d pages a context)", self.config.executable,
                    self._browser.version, self.config.pages, self.config.context_pages)
        return self._browser

    async def _release(self, entry: _Context, page: Any) -> None:
        if page is not None:
            try:
                await asyncio.wait_for(page.close(run_before_unload=False), CLOSE_TIMEOUT)
            except Exception as exc:  # a page that will not close (a renderer spinning): its context goes
                logger.warning("a page did not close (%s): retiring its context", exc)
                entry.retired = True
                if self._current.get(entry.proxy) is entry:
                    del self._current[entry.proxy]
        async with self._lock:
            entry.open_pages -= 1
            if entry.retired and entry.open_pages == 0:
                await self._close_context(entry)

    async def _close_context(self, entry: _Context) -> None:
        self._contexts.discard(entry)
        if self._current.get(entry.proxy) is entry:
            del self._current[entry.proxy]
        try:
            await asyncio.wait_for(entry.context.close(), CLOSE_TIMEOUT)
        except Exception as exc:  # the browser went away, or the context hangs: nothing more to free here
            logger.debug("closing a context: %s", exc)

    @property
    def open_contexts(self) -> int:
        return len(self._contexts)
