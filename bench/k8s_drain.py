"""How long a worker takes to drain on SIGTERM under load, and that the crawl loses and doubles nothing.

    python -m bench.k8s_drain [--json] [--pages N] [--runs R] [--after K]

A local fleet (``deploy.fleet``: the services, the demo web with ``--pages`` articles per site, a master, both
monitors, two ``universal`` workers) crawls two demo sites at full speed (the sites' rates raised so that politeness
never binds); once a worker has completed ``--after`` tasks and holds leases it gets SIGTERM, as a pod's container
does. Measured: the seconds from the signal to the exit, with the leases and queued tasks it held then. The crawl
must then finish with every article stored once and no page fetched twice (the demo web's own counts), or the
benchmark fails. ``--runs`` repeats it (a new worker replaces the drained one, new crawls each time). The worst
drain is what the manifests' terminationGracePeriodSeconds (deploy/k8s_workers.py) must cover.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from deploy import fleet as local_fleet
from deploy.demo_rules import DEMO_UNIVERSAL_RULE
from deploy.demoweb import fetch
from deploy.demoweb.router import STATS_PATH
from deploy.demoweb.runner import demoweb_status, site_url
from deploy.demoweb.sites import build_sites
from deploy.procs import pid_alive, wait_for
from frontier.client import FrontierReader
from messaging import clients, keys
from messaging.settings import load
from messaging.siteconfig import Rate, SitePaths, write_defaults

SITES = ("news.fleet.test", "china.fleet.test")
UNBOUND = Rate(600_000, 60)


def served(web: dict[str, Any], site: str) -> dict[str, int]:
    _, _, body = fetch(web["sites"][site], web["port"], site, STATS_PATH)
    return dict(json.loads(body).get(site, {}).get("paths", {}))


def one_run(run_dir: Path, settings: Any, redis: Any, producer: Any, after: int) -> dict[str, Any]:
    web = demoweb_status(run_dir)
    before = {site: served(web, site) for site in SITES}
    stamp = uuid.uuid4().hex[:6]
    crawls = {f"drain-{site.split('.')[0]}-{stamp}": site for site in SITES}
    for crawlid, site in crawls.items():
        producer.send(settings.topic_incoming, {"userid": "bench", "crawlid": crawlid, "spider_type": "universal",
                                                "url": site_url(site, web), "rule": DEMO_UNIVERSAL_RULE},
                      key=crawlid)
    producer.flush(timeout=30)
    workers = {p["job"]: p for p in local_fleet.status(run_dir)["processes"] if p["role"] == "worker" and p["alive"]}
    start = {job: int(redis.hget(keys.worker_activity(job), "done") or 0) for job in workers}
    chosen: list[str] = []

    def loaded() -> bool:  # the first worker that has completed enough in this run and holds leases now
        depths = FrontierReader(redis).queue_depths(list(workers))
        for job in workers:
            done = int(redis.hget(keys.worker_activity(job), "done") or 0) - start[job]
            if done >= after and depths[job][1] > 0:
                chosen[:] = [job]
                return True
        return False

    wait_for(loaded, 300, f"a worker to complete {after} tasks and hold leases", interval=0.02)
    job = chosen[0]
    victim = workers[job]
    queued, leased = FrontierReader(redis).queue_depths([job])[job]
    os.kill(victim["pid"], signal.SIGTERM)
    began = time.monotonic()
    wait_for(lambda: not pid_alive(victim["pid"]), 120, f"{job} to exit", interval=0.05)
    drained = time.monotonic() - began

    def finished() -> bool:
        return all(clients.as_text(redis.hget(keys.crawl(c), "state") or b"") == "finished" for c in crawls)

    wait_for(finished, 600, "the crawls to finish")
    mongo = clients.mongo_client(settings)[settings.mongo_db]
    articles = {site.name: site.articles for site in build_sites(web["pages"]) if getattr(site, "name", None)}
    lost = {c: articles[s] - mongo[c].count_documents({}) for c, s in crawls.items()}
    doubled = {site: [p for p, n in served(web, site).items() if n - before[site].get(p, 0) > 1] for site in SITES}
    local_fleet.replace_process(run_dir, victim["name"])
    return {"drain_s": round(drained, 2), "leased": leased, "queued": queued, "lost": sum(lost.values()),
            "doubled": sum(len(paths) for paths in doubled.values())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print a JSON line last")
    parser.add_argument("--pages", type=int, default=1000, help="articles per demo site")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--after", type=int, default=200, help="tasks the worker completes before its SIGTERM")
    args = parser.parse_args(argv)
    run_dir = Path(tempfile.mkdtemp(prefix="k8s-drain-"))
    os.environ["CRAWLFLEET_RUN_DIR"] = str(run_dir)
    spec = local_fleet.FleetSpec(workers={"universal": 2}, masters=1, pages=args.pages, redis_aof=False,
                                 mongo_on_disk=False, supervise=False, owner="bench")
    runs: list[dict[str, Any]] = []
    try:
        local_fleet.up(run_dir, spec)
        settings = load(local_fleet.child_env(run_dir))
        zk = clients.zk_client(settings)
        write_defaults(zk, SitePaths(settings.zk_root), UNBOUND)
        zk.stop()
        zk.close()
        redis, producer = clients.redis_client(settings), clients.kafka_producer(settings)
        for number in range(args.runs):
            run = one_run(run_dir, settings, redis, producer, args.after)
            runs.append(run)
            print(f"run {number + 1}: drained in {run['drain_s']:.2f}s holding {run['leased']} leases and "
                  f"{run['queued']} queued tasks; lost {run['lost']}, fetched twice {run['doubled']}")
        producer.close(timeout=5)
    finally:
        local_fleet.down(run_dir)
    drains = [run["drain_s"] for run in runs]
    print(f"drain on SIGTERM under load: median {statistics.median(drains):.2f}s, worst {max(drains):.2f}s "
          f"({len(runs)} runs)")
    if args.json:
        print(json.dumps({"drain_s": drains, "runs": runs}))
    return 0 if all(run["lost"] == 0 and run["doubled"] == 0 for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
