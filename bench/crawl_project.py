"""``bench.crawl``'s own-project sides (issue 35): a plain Scrapy project's spider, unchanged, under plain ``scrapy
crawl`` and on the fleet.

The project is :mod:`bench.ownproject` (its ``articles`` ``CrawlSpider``, the rules of ``DEMO_UNIVERSAL_RULE``), one
crawl over the benchmark's three sites:

- ``project_scrapy``: ``scrapy crawl articles`` in one process, Scrapy's scheduler and dupefilter, the items written
  to MongoDB by the fleet's MongoDB pipeline (batched upserts) added with ``-s ITEM_PIPELINES``, so that both sides
  store alike;
- ``project_fleet_2``: two ``scrapy crawl articles`` processes with the fleet's add-on (``-s ADDONS``, as a user's
  project lists it) and the crawl's id (CRAWLFLEET_CRAWL), and a master: the workers join the crawl, one of them
  pushes its start requests, both take its tasks through the politeness step, dedup by the project's request
  fingerprints in the crawl's Bloom filter, and store the items with the fleet's store; the side ends when the master
  declares the crawl finished.

Both sides' time runs from the first request in nginx's log to the last item stored, and both are checked as every
side is (every page once with a 200, every article stored once).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from deploy.procs import spawn, wait_for
from messaging import keys
from messaging.tasks import CrawlFields, CrawlState

PROJECT_SIDES = ("project_scrapy", "project_fleet_2")
SETTINGS_MODULE = "bench.ownproject.settings"
FLEET_ADDON = json.dumps({"spiders.addon.FleetAddon": 0})
STORE = json.dumps({"spiders.pipelines.mongo.MongoPipeline": 900})


def project_crawls(side: str, round_no: int, urls: list[str]) -> dict[str, str]:
    """One crawl over every site: crawl id -> the start URLs, comma-separated."""
    return {f"r{round_no}-{side}": ",".join(urls)}


def run_project(bench: Any, side: str, crawls: dict[str, str]) -> float | None:
    """Run an own-project side to its end (``bench``: :class:`bench.crawl_sides.CrawlBench`)."""
    ((crawlid, urls),) = crawls.items()
    env = {**bench.env, "SCRAPY_SETTINGS_MODULE": SETTINGS_MODULE}
    argv = [sys.executable, "-m", "scrapy", "crawl", "articles", "-a", f"urls={urls}", "-a", f"crawlid={crawlid}"]
    procs: dict[str, Any] = {}

    def start(name: str, args: list[str]) -> Any:
        log = bench.logs / f"{side}-{name}.log"
        log.unlink(missing_ok=True)
        proc = spawn(args, log, env=env, cwd=bench.run_dir)
        procs[name] = (proc, log)
        bench._procs.append(proc)
        return proc

    bench._procs = []
    if side == "project_scrapy":
        proc = start("scrapy", [*argv, "-s", f"ITEM_PIPELINES={STORE}"])
        bench.side_groups["workers"] = [proc.pid]
        wait_for(lambda: proc.poll() is not None, bench.timeout, "scrapy crawl articles to end", interval=0.2)
        if proc.returncode != 0:
            raise RuntimeError(f"scrapy crawl articles exited with {proc.returncode}; see {procs['scrapy'][1]}")
        return None
    master = start("master", [sys.executable, "-m", "deploy.cli", "master", "--id", f"{side}-master"])
    workers = [start(f"w{n}", [*argv, "-s", f"ADDONS={FLEET_ADDON}", "-s", f"CRAWLFLEET_CRAWL={crawlid}",
                               "-s", f"CRAWLFLEET_JOB={crawlid}-{int(time.time())}-w{n}"]) for n in (1, 2)]
    bench.side_groups.update(workers=[w.pid for w in workers], master=[master.pid])

    def finished() -> bool:
        return bench._redis.hget(keys.crawl(crawlid), CrawlFields.STATE) == CrawlState.FINISHED.encode()

    def dead() -> str | None:
        gone = [name for name, (proc, _) in procs.items() if proc.poll() is not None and proc.returncode != 0]
        return f"{', '.join(gone)} failed (logs in {bench.logs})" if gone else None

    wait_for(finished, bench.timeout, f"the {side} crawl to finish", interval=0.2, alive=dead)
    return None  # the clock starts at its first HTTP request, as plain Scrapy's
