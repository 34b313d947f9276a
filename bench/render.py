"""Rendering throughput and memory of one worker: pages/min rendered, and no leak over many renders.

    python -m bench.render [--renders N] [--pages P] [--context-pages C] [--json]

One Scrapy process, the worker's own download handler (:class:`spiders.render.handler.RenderDownloadHandler`, the
browser pool of ``P`` pages, contexts recycled every ``C`` pages, images/fonts/media blocked) on Scrapy's asyncio
reactor, renders ``N`` client-rendered pages of the demo web (``apps.fleet.test``, started here: a shell whose script
fetches its JSON and builds the page). Every response is checked (its ``<h1>`` is the story's title).

Figures:

- ``pages_per_min``: renders per minute, from the first response to the last (the browser's start excluded);
- ``rss_mb_after_500`` and ``rss_mb_end``: the resident memory of the worker *and its browser* (the Scrapy process,
  the Playwright driver and every Chromium process, summed from /proc) after the first 500 renders and at the end;
  ``rss_growth`` = end / after-500 - 1, which must stay within +10 % (``leak_ok``); ``rss_mb_max`` the highest
  sample after the first 500.

The issue's size is 10,000 renders (``--renders 10000``, about half an hour here); ``make bench`` runs 1,000.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WARMUP = 500
SAMPLE_EVERY = 100
LEAK_LIMIT = 0.10


def tree_rss_kib(root: int, exclude: set[int]) -> int:
    """VmRSS of ``root`` and every process below it (but ``exclude`` and theirs), in KiB, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        if pid in exclude:
            continue
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
        todo.extend(children.get(pid, []))
    return total


def run(renders: int, pages: int, context_pages: int) -> dict[str, Any]:
    from deploy.demoweb import start_demoweb, stop_demoweb
    from deploy.demoweb.spa import SPA_NAME, ClientSite

    with tempfile.TemporaryDirectory(prefix="bench-render-") as tmp:
        status = start_demoweb(Path(tmp) / "web", pages=10)
        try:
            os.environ["CRAWLFLEET_HOSTS_FILE"] = status["hosts_file"]
            site = ClientSite(status["seed"])
            origin = f"http://{SPA_NAME}:{status['port']}"
            return crawl(renders, pages, context_pages, site, origin, exclude={status["pid"]})
        finally:
            stop_demoweb(Path(tmp) / "web")


def crawl(renders: int, pages: int, context_pages: int, site: Any, origin: str, exclude: set[int]) -> dict[str, Any]:
    import scrapy
    from scrapy.crawler import CrawlerProcess

    stories = [n for n in range(site.articles) if site.needs_browser(n)]
    state: dict[str, Any] = {"done": 0, "wrong": 0, "failed": 0, "samples": [], "first": None, "last": None,
                             "latency": []}

    class RenderBench(scrapy.Spider):
        name = "render-bench"

        async def start(self) -> Any:
            for i in range(renders):
                story = stories[i % len(stories)]
                yield scrapy.Request(origin + site.story_path(story), callback=self.parse, errback=self.failed,
                                     dont_filter=True, meta={"fleet_render": True, "story": story})

        def parse(self, response: Any) -> None:
            state["first"] = state["first"] or time.monotonic()
            state["last"] = time.monotonic()
            state["done"] += 1
            state["latency"].append(response.meta.get("download_latency", 0.0))
            if response.xpath("//h1/text()").get() != site.title(response.meta["story"]):
                state["wrong"] += 1
            if state["done"] % SAMPLE_EVERY == 0 or state["done"] == WARMUP:
                state["samples"].append((state["done"], tree_rss_kib(os.getpid(), exclude)))

        def failed(self, failure: Any) -> None:
            state["failed"] += 1

    process = CrawlerProcess({
        "DOWNLOAD_HANDLERS": {"http": "spiders.render.handler.RenderDownloadHandler",
                              "https": "spiders.render.handler.RenderDownloadHandler"},
        "CONCURRENT_REQUESTS": pages, "CONCURRENT_REQUESTS_PER_DOMAIN": pages, "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False, "LOG_LEVEL": "WARNING", "RETRY_ENABLED": False,
        "CRAWLFLEET_RENDER_PAGES": pages, "CRAWLFLEET_RENDER_CONTEXT_PAGES": context_pages,
        "TWISTED_DNS_RESOLVER": "spiders.resolver.HostMapResolver",
    })
    process.crawl(RenderBench)
    process.start()
    return figures(state, renders, pages, context_pages)


def figures(state: dict[str, Any], renders: int, pages: int, context_pages: int) -> dict[str, Any]:
    elapsed = (state["last"] or 0) - (state["first"] or 0)
    samples = state["samples"]
    after = [rss for done, rss in samples if done >= WARMUP]
    base = next((rss for done, rss in samples if done == WARMUP), None)
    result: dict[str, Any] = {
        "renders": renders, "pages": pages, "context_pages": context_pages, "rendered": state["done"],
        "wrong": state["wrong"], "failed": state["failed"],
        "pages_per_min": round(60 * (state["done"] - 1) / elapsed, 1) if elapsed > 0 else None,
        "latency_median_s": round(statistics.median(state["latency"]), 3) if state["latency"] else None,
        "rss_mb_first_sample": round(samples[0][1] / 1024, 1) if samples else None,
    }
    if base is not None and after:
        end = after[-1]
        result.update(rss_mb_after_500=round(base / 1024, 1), rss_mb_end=round(end / 1024, 1),
                      rss_mb_max=round(max(after) / 1024, 1), rss_growth=round(end / base - 1, 4),
                      leak_ok=end <= base * (1 + LEAK_LIMIT))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--renders", type=int, default=1000, help="renders in all (the issue's size: 10000)")
    parser.add_argument("--pages", type=int, default=4, help="the page pool (CRAWLFLEET_RENDER_PAGES)")
    parser.add_argument("--context-pages", type=int, default=100, help="CRAWLFLEET_RENDER_CONTEXT_PAGES")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args(argv)
    if args.renders <= WARMUP:
        parser.error(f"--renders must be more than {WARMUP} (memory is compared with its value after {WARMUP})")
    result = run(args.renders, args.pages, args.context_pages)
    if args.json:
        print(json.dumps(result))
    else:
        for name, value in result.items():
            print(f"{name:>22}: {value}")
    ok = result["failed"] == 0 and result["wrong"] == 0 and result.get("leak_ok", False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
