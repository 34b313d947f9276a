"""Pages that need a browser (issue 27), end to end: Kafka, masters, Scrapy workers rendering in Debian's headless
Chromium, MongoDB, on the demo web's client-rendered site (deploy/demoweb/spa.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from deploy.demoweb.spa import LOGO_PATH, SPA_NAME, SPIN_PATH, ClientSite
from deploy.procs import kill_hard, pid_alive, wait_for
from frontier.client import FrontierReader
from messaging import keys
from messaging.hostmap import HostMap
from messaging.siteconfig import Rate
from spiders.render.browser import find_browser, resolver_rules

pytestmark = pytest.mark.e2e

CRAWL_TIMEOUT = 180
STORIES_RULE = {"rules": [{"allow": "/stories/[0-9]+\\.html$", "follow": True,
                           "extract": {"title": "//article/h1", "body": "//article"}}]}
# The learning is per worker after CRAWLFLEET_RENDER_LEARN_PAGES pages; this site mixes static and client-rendered
# pages, so it never learns either way, but the exact count of renders below should not depend on the crawl's order.
NO_LEARNING = {"CRAWLFLEET_RENDER_LEARN_PAGES": "10000"}


def site_of(fleet: Any) -> ClientSite:
    return ClientSite(fleet.demoweb["manifest"]["seed"])


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {path: n - before.get(path, 0) for path, n in after.items() if n > before.get(path, 0)}


def render_counts(fleet: Any) -> dict[str, int]:
    """The workers' cluster counters (``stats:crawler:universal:rendered|static:lifetime``), once flushed."""
    return {how: int(fleet.redis.get(keys.stats_counter("crawler", f"universal:{how}", "lifetime")) or 0)
            for how in ("rendered", "static")}


def titles_in_a_browser(fleet: Any, paths: list[str]) -> dict[str, str | None]:
    """The ``<h1>`` of each page as Debian's headless Chromium shows it once its scripts ran."""
    from playwright.sync_api import sync_playwright

    rules = resolver_rules(HostMap.from_file(fleet.demoweb["hosts_file"]))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=find_browser(), args=[
            "--no-sandbox", "--disable-gpu", f"--host-resolver-rules={rules}"])
        try:
            page = browser.new_page()
            titles = {}
            for path in paths:
                page.goto(fleet.url(SPA_NAME, path))
                page.wait_for_selector("h1", timeout=20_000)
                titles[fleet.url(SPA_NAME, path)] = page.text_content("h1")
            return titles
        finally:
            browser.close()


def test_auto_renders_exactly_the_pages_that_need_it_and_never_stores_the_shells(fleet: Any) -> None:
    site = site_of(fleet)
    fleet.start()
    fleet.start_workers("universal", [f"{fleet.cf.name}-render-{n}" for n in range(2)], **NO_LEARNING)
    before = fleet.served(SPA_NAME)
    fleet.submit({"userid": "rita", "crawlid": "apps-auto", "spider_type": "universal",
                  "url": fleet.url(SPA_NAME, "/"), "rule": {**STORIES_RULE, "required": ["title"], "render": "auto"}})
    fleet.wait_finished(["apps-auto"], CRAWL_TIMEOUT)
    served = delta(before, fleet.served(SPA_NAME))  # what the crawl asked of the site (before the browser below)

    # What a browser sees (Chromium, driven here without the fleet): every story, with its title, once.
    items = fleet.items("apps-auto")
    browser_sees = titles_in_a_browser(fleet, [site.story_path(n) for n in range(site.articles)])
    assert browser_sees == {fleet.url(SPA_NAME, site.story_path(n)): site.title(n) for n in range(site.articles)}
    assert {item["url"]: item["title"] for item in items} == browser_sees
    assert len(items) == site.articles
    assert all(len(item["text"]) > 200 for item in items), "the main text of rendered pages is extracted too"

    # Rendered only where needed, as the site saw it: a client-rendered page is fetched statically, then rendered
    # (twice, and its JSON once); a static page once, its JSON never; images never.
    needs = [n for n in range(site.articles) if site.needs_browser(n)]
    static = [n for n in range(site.articles) if not site.needs_browser(n)]
    assert {n: served.get(site.story_path(n)) for n in needs} == dict.fromkeys(needs, 2)
    assert {n: served.get(site.story_path(n)) for n in static} == dict.fromkeys(static, 1)
    assert {path for path in served if path.startswith("/api/")} == (
        {"/api/home.json"} | {f"/api/stories/{n}.json" for n in needs})
    assert LOGO_PATH not in served, "images are blocked in the browser"
    counts = wait_for(lambda: (c := render_counts(fleet))["rendered"] + c["static"] >= 1 + site.articles and c,
                      10, "the render counters")
    share = counts["rendered"] / (counts["rendered"] + counts["static"])
    print(f"\nrender auto: {counts['rendered']} rendered, {counts['static']} static ({share:.0%} rendered); "
          f"{len(needs) + 1} of {site.articles + 1} pages need a browser")
    assert counts == {"rendered": 1 + len(needs), "static": len(static)}

    # never: the same rule without a browser stores shells (pages without their title) and misses most stories.
    fleet.submit({"userid": "rita", "crawlid": "apps-never", "spider_type": "universal",
                  "url": fleet.url(SPA_NAME, "/"), "rule": {**STORIES_RULE, "render": "never"}})
    fleet.wait_finished(["apps-never"], CRAWL_TIMEOUT)
    never = {item["url"]: item for item in fleet.items("apps-never")}
    # Statically, the home page links to story 0 only (its header), story 0 to stories 1 and 2, which are shells:
    # stored without their title or body (the page's <title> is the app's name, which the extraction takes).
    reached = [0, *site.next_stories(0)]
    assert sorted(never) == sorted(fleet.url(SPA_NAME, site.story_path(n)) for n in reached)
    for n in reached:
        item = never[fleet.url(SPA_NAME, site.story_path(n))]
        if site.needs_browser(n):
            assert item.get("title") in (None, "", "Fleet Apps") and not item.get("body"), item
        else:
            assert item["title"] == site.title(n) and item["body"]


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (its Playwright driver and browser), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def test_kill_9_of_a_rendering_worker_loses_no_task(fleet: Any) -> None:
    site = site_of(fleet)
    fleet.start(rate=Rate(4, 1))  # slow enough that the victim holds leases while it renders
    victim = fleet.start_worker("universal", "render-victim", **NO_LEARNING)
    fleet.submit({"userid": "vic", "crawlid": "apps-crash", "spider_type": "universal",
                  "url": fleet.url(SPA_NAME, "/"), "rule": {**STORIES_RULE, "required": ["title"], "render": "always"}})
    collection = fleet.cf.mongo()["apps-crash"]

    def rendering() -> bool:
        leased = FrontierReader(fleet.redis).queue_depths(["render-victim"])["render-victim"][1]
        return collection.estimated_document_count() >= 2 and leased > 0 and len(descendants(victim.pid)) > 1

    wait_for(rendering, 120, "the victim rendering with tasks leased")
    browser = descendants(victim.pid)
    kill_hard(victim.pid)
    fleet.start_worker("universal", "render-survivor", **NO_LEARNING)
    fleet.wait_finished(["apps-crash"], CRAWL_TIMEOUT)

    urls = [item["url"] for item in fleet.items("apps-crash")]
    assert len(urls) == len(set(urls)) == site.articles
    wait_for(lambda: not [pid for pid in browser if pid_alive(pid)], 30, "the victim's browser to go with it")


def test_a_hung_page_times_out_and_its_task_completes_with_the_reason(fleet: Any) -> None:
    fleet.start()
    job = f"{fleet.cf.name}-hang"
    worker = fleet.start_worker("universal", job, CRAWLFLEET_RENDER_TIMEOUT="3")
    fleet.submit({"userid": "hal", "crawlid": "apps-hang", "spider_type": "universal",
                  "url": fleet.url(SPA_NAME, SPIN_PATH), "rule": {**STORIES_RULE, "render": "always"}})
    event = fleet.wait_finished(["apps-hang"], CRAWL_TIMEOUT)["apps-hang"]
    assert event["items"] == 0 and fleet.items("apps-hang") == []
    log = fleet.procs.log(worker)
    assert f"task {fleet.url(SPA_NAME, SPIN_PATH)} failed: rendering" in log and "took more than 3 s" in log
    assert FrontierReader(fleet.redis).queue_depths([job])[job] == (0, 0)
