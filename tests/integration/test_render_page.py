"""One render in Debian's headless Chromium against the demo web's client-rendered site (spiders.render.page)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request

from deploy.demoweb import fetch
from deploy.demoweb.router import STATS_PATH
from deploy.demoweb.spa import BUSY_PATH, BUSY_SECONDS, LOGO_PATH, SPA_NAME, SPIN_PATH, ClientSite
from messaging.hostmap import HostMap
from spiders.render.browser import BrowserPool, PoolConfig, find_browser
from spiders.render.page import RenderConfig, RenderFailed, RenderTimeout, render
from tests.plugins.proxies import proxy_farm  # noqa: F401 - fixture

pytestmark = pytest.mark.integration


def pool_for(demoweb: dict[str, Any], **config: Any) -> BrowserPool:
    return BrowserPool(PoolConfig(find_browser(), hosts=HostMap.from_file(demoweb["hosts_file"]), **config))


def url(demoweb: dict[str, Any], path: str) -> str:
    return f"http://{SPA_NAME}:{demoweb['port']}{path}"


def served(demoweb: dict[str, Any]) -> dict[str, int]:
    """Requests the demo web answered per path of the site (its own count)."""
    _, _, body = fetch(demoweb["sites"][SPA_NAME], demoweb["port"], SPA_NAME, STATS_PATH)
    return dict(json.loads(body).get(SPA_NAME, {}).get("paths", {}))


def test_a_client_rendered_page_is_rendered_as_a_browser_shows_it(demoweb: dict[str, Any]) -> None:
    site = ClientSite(demoweb["manifest"]["seed"])
    story = 4  # needs the browser
    before = served(demoweb)

    async def go() -> Any:
        pool = pool_for(demoweb)
        try:
            request = Request(url(demoweb, site.story_path(story)), headers={"User-Agent": "fleet-render-test/1.0"})
            return await render(pool, request, RenderConfig(timeout=20, settle=2)), request
        finally:
            await pool.close()

    response, request = asyncio.run(go())
    assert "rendered" in response.flags and response.status == 200
    assert response.xpath("//h1/text()").get() == site.title(story)
    assert len(response.xpath("//article/p")) == 3
    links = response.xpath("//ul[@class='links']//a/@href").getall()
    assert links == [site.story_path(n) for n in site.next_stories(story)]
    after = served(demoweb)
    grew = {path: after.get(path, 0) - before.get(path, 0) for path in after if after[path] != before.get(path, 0)}
    assert grew.get(f"/api/stories/{story}.json") == 1 and grew.get(site.story_path(story)) == 1
    assert LOGO_PATH not in grew, "images are blocked"
    log = request.meta["render_log"]
    assert log.blocked >= 1 and log.same_host == 2  # app.js and the JSON


def test_same_host_subrequests_are_capped(demoweb: dict[str, Any]) -> None:
    site = ClientSite(demoweb["manifest"]["seed"])

    async def go() -> Any:
        pool = pool_for(demoweb)
        try:
            request = Request(url(demoweb, site.story_path(1)))
            return await render(pool, request, RenderConfig(timeout=20, settle=1, subrequests=1)), request
        finally:
            await pool.close()

    response, request = asyncio.run(go())
    assert request.meta["render_log"].capped == 1  # app.js went, its JSON did not
    assert response.xpath("//h1").get() is None


def test_a_hung_page_times_out_and_the_pool_keeps_working(demoweb: dict[str, Any]) -> None:
    site = ClientSite(demoweb["manifest"]["seed"])

    async def go() -> tuple[BaseException | None, Any]:
        pool = pool_for(demoweb, pages=1, context_pages=2)
        try:
            failure = None
            try:
                await render(pool, Request(url(demoweb, SPIN_PATH)), RenderConfig(timeout=3, settle=1))
            except RenderTimeout as exc:
                failure = exc
            after = await render(pool, Request(url(demoweb, site.story_path(2))), RenderConfig(timeout=20, settle=2))
            return failure, after
        finally:
            await pool.close()

    failure, after = asyncio.run(go())
    assert failure is not None and "took more than 3 s" in str(failure)
    assert after.xpath("//h1/text()").get() == site.title(2)


def test_contexts_are_recycled_and_the_page_pool_is_bounded(demoweb: dict[str, Any]) -> None:
    site = ClientSite(demoweb["manifest"]["seed"])

    async def go() -> tuple[list[str | None], int, int]:
        pool = pool_for(demoweb, pages=2, context_pages=3)
        most = 0

        async def one(n: int) -> str | None:
            nonlocal most
            response = await render(pool, Request(url(demoweb, site.story_path(n))), RenderConfig(timeout=30))
            most = max(most, pool.in_use)
            return response.xpath("//h1/text()").get()

        try:
            titles = await asyncio.gather(*(one(n) for n in range(1, 9)))
            return titles, pool.contexts_opened, most
        finally:
            await pool.close()

    titles, contexts, most = asyncio.run(go())
    assert titles == [site.title(n) for n in range(1, 9)]
    assert contexts >= 3  # 8 pages, 3 a context
    assert most <= 2


def test_a_render_goes_through_the_tasks_proxy_with_its_credentials(
        demoweb: dict[str, Any], proxy_farm: Any) -> None:  # noqa: F811
    site = ClientSite(demoweb["manifest"]["seed"])
    proxy = proxy_farm.start(auth="ann:Pr0xy-Secret")
    before = served(demoweb)
    # as HttpProxyMiddleware leaves a proxied request: the URL in meta, the credentials in Proxy-Authorization
    request = Request(url(demoweb, site.story_path(5)), meta={"proxy": f"http://{proxy.host}:{proxy.port}"},
                      headers={"Proxy-Authorization": b"Basic " + base64.b64encode(b"ann:Pr0xy-Secret")})

    async def go() -> Any:
        pool = pool_for(demoweb)
        try:
            return await render(pool, request, RenderConfig(timeout=20))
        finally:
            await pool.close()

    response = asyncio.run(go())
    assert response.xpath("//h1/text()").get() == site.title(5)
    grew = sum(n - before.get(path, 0) for path, n in served(demoweb).items())
    assert proxy.forwarded(SPA_NAME) == grew == 3  # the page, app.js, its JSON: all through the proxy
    assert proxy.stats()["refused"].get("auth", 0) <= 1  # at most the browser's first, unauthenticated try


def test_a_rendered_429_keeps_its_status_and_retry_after(demoweb: dict[str, Any]) -> None:
    async def go() -> Any:
        pool = pool_for(demoweb)
        try:
            return await render(pool, Request(url(demoweb, BUSY_PATH)), RenderConfig(timeout=20))
        finally:
            await pool.close()

    response = asyncio.run(go())  # RetryAfterMiddleware sees what it sees of a static fetch
    assert response.status == 429 and response.headers.get(b"Retry-After") == str(BUSY_SECONDS).encode()


def browser_pids() -> list[int]:
    """This test process's Chromium processes (below its Playwright driver), from /proc."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")[0]
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if cmdline.endswith(b"chromium-headless-shell") and parent_chain_has(parent, os.getpid()):
                pids.append(int(entry))
    return pids


def parent_chain_has(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            return False
    return False


def test_a_browser_that_dies_is_started_again(demoweb: dict[str, Any]) -> None:
    site = ClientSite(demoweb["manifest"]["seed"])

    async def go() -> tuple[Any, int]:
        pool = pool_for(demoweb)
        try:
            await render(pool, Request(url(demoweb, site.story_path(1))), RenderConfig(timeout=20))
            victims = browser_pids()
            assert victims, "no browser process found"
            for pid in victims:
                os.kill(pid, signal.SIGKILL)
            for _ in range(3):  # the first render may still meet the dying browser
                try:
                    response = await render(pool, Request(url(demoweb, site.story_path(2))), RenderConfig(timeout=20))
                    return response, pool.launched
                except RenderFailed:
                    await asyncio.sleep(0.5)
            raise AssertionError("no render after the browser died")
        finally:
            await pool.close()

    response, launched = asyncio.run(go())
    assert response.xpath("//h1/text()").get() == site.title(2)
    assert launched == 2
