"""A plain Python worker that pulls through the politeness engine, for the throttle benchmark and the tests.

    python -m bench.politeness_worker --job J --spider-type T --ip IP [--start-at S] [--end-at E]
                                      [--process-seconds P]

It reads its settings (Redis, ZooKeeper, lease time, robots.txt) from the environment like every component, follows
the site configuration in ZooKeeper (:class:`~frontier.config_watch.SiteConfigWatch`), walks its domain queues fairly
(:class:`~frontier.domain_walk.DomainWalk`) and takes each task through the politeness step. It fetches nothing:
"processing" a task is a sleep of ``--process-seconds``, after which the lease is acknowledged. Every task taken is
printed as one JSON line ``{"hit": <Redis time of its slot>, "domain", "url", "job", "spider_type", "ip"}`` when
it "goes out": no earlier than the slot its step reserved (``Lease.not_before``), as the Scrapy worker does, so the
caller can check the throttle windows from the outside; tasks the step dropped (robots.txt, blacklist) as
``{"removed": [urls], "job"}``. Between ``--start-at`` and ``--end-at`` (Redis time)
it works; it prints ``ready`` once its config watch has read ZooKeeper, and stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time

from frontier.client import FrontierClient
from frontier.config_watch import SiteConfigWatch
from frontier.domain_walk import DomainWalk
from frontier.politeness import Politeness
from frontier.robots_cache import RobotsCache, fetch_http
from messaging import clients
from messaging.clock import RedisClock
from messaging.settings import load
from messaging.siteconfig import SitePaths
from messaging.stats import Stats

REQUEUE_EVERY = 5.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job", required=True)
    parser.add_argument("--spider-type", required=True)
    parser.add_argument("--ip", required=True)
    parser.add_argument("--start-at", type=float, default=0.0, help="Redis time to start at (default: now)")
    parser.add_argument("--end-at", type=float, default=float("inf"), help="Redis time to stop at")
    parser.add_argument("--process-seconds", type=float, default=0.0)
    args = parser.parse_args(argv)

    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    settings = load()
    redis = clients.redis_client(settings)
    zk = clients.zk_client(settings)
    clock = RedisClock(redis)
    try:
        config = SiteConfigWatch(zk, SitePaths(settings.zk_root)).start()
        robots = (RobotsCache(redis, lambda url: fetch_http(url, user_agent=settings.robotstxt_user_agent),
                              ttl=settings.robots_ttl, error_ttl=settings.robots_error_ttl)
                  if settings.robotstxt_obey else None)
        rules = Politeness(config, robots, settings.robotstxt_user_agent, stats=Stats(redis, "politeness"))
        engine = FrontierClient(redis, args.job, args.spider_type, args.ip, rules, lease_seconds=settings.lease_seconds)
        walk = DomainWalk(engine.take, engine.domains, max_sleep=0.25, on_removed=lambda tasks: print(
            json.dumps({"removed": [task.url for task in tasks], "job": args.job}), flush=True))
        config.add_listener(walk.reopen)  # a changed site is asked again at once, as in the Scrapy worker
        print("ready", flush=True)
        while not stopping and clock.now() < args.start_at:
            time.sleep(min(0.01, max(0.0, args.start_at - clock.now())))
        requeued_at = time.monotonic()
        while not stopping:
            now = clock.now()
            if now >= args.end_at:
                break
            if time.monotonic() - requeued_at >= REQUEUE_EVERY:
                for domain in engine.domains():
                    engine.requeue_expired(domain)
                requeued_at = time.monotonic()
            result = walk.next(timeout=min(0.25, args.end_at - now))
            if result is None or result.lease is None:
                continue
            task = result.lease.task
            time.sleep(max(0.0, result.lease.not_before - clock.now()))  # no earlier than its slot
            print(json.dumps({"hit": result.lease.not_before, "domain": result.domain, "url": task.url, "job": args.job,
                              "spider_type": args.spider_type, "ip": args.ip}), flush=True)
            if args.process_seconds:
                time.sleep(args.process_seconds)
            engine.ack(result.lease)
        print(f"stopped skips={dict(walk.skips)}", flush=True)
        return 0
    finally:
        zk.stop()
        zk.close()
        redis.close()


if __name__ == "__main__":
    sys.exit(main())
