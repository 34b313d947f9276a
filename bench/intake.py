"""Intake rate of one Kafka monitor: crawl requests validated and enqueued into ``seeds`` per second.

    python -m bench.intake [--requests N] [--crawls C] [--json]

It produces N valid crawl requests (C crawls, each with its own ``list`` rule, every request a distinct URL) to a
fresh incoming topic, starts one ``crawlfleet kafka-monitor`` process, waits until it holds its partitions, and
times from the first task in ``seeds`` to the last: the rate covers validation, the plugin chain, the Redis writes
and the commits, not the group join. With ``--json`` the last line is ``{"requests_per_s": …}``.

Services: its own local services in a temporary directory (stopped at the end), or the running ones when
CRAWLFLEET_REDIS_URL is set explicitly — then use a scratch Redis database: ``seeds`` is emptied before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from deploy import services
from deploy.procs import spawn, stop_pid, wait_for
from messaging import clients, keys
from messaging.kafka_monitor.monitor import topic_partitions
from messaging.settings import load

REPO = Path(__file__).resolve().parents[1]


def requests(count: int, crawls: int) -> list[dict[str, Any]]:
    rules = [{"first_page_xpath": {"list_from": f"//ul[@id='list{c}']/li", "second_page_url": "a/@href",
                                   "title": "a/text()", "date": "span[@class='date']/text()", "continue": True},
              "second_page_xpath": {"body": "//div[@class='article']", "author": "//span[@class='author']/text()"},
              "required": ["title"]} for c in range(crawls)]
    return [{"userid": "bench", "crawlid": f"bench-{i % crawls}", "spider_type": "list", "rule": rules[i % crawls],
             "url": f"http://site{i % 50}.bench.test/list/{i}.html", "priority": 100 + i % 3, "maxdepth": 3}
            for i in range(count)]


def clear(redis: Any) -> None:
    redis.delete(keys.SEEDS, keys.SEEDS_SEQUENCE, keys.CRAWLS)
    for pattern in (keys.crawl("bench-*"), keys.intake_seen("*")):
        batch = list(redis.scan_iter(match=pattern, count=1000))
        for start in range(0, len(batch), 500):
            redis.delete(*batch[start:start + 500])


def measure(env: dict[str, str], count: int, crawls: int, log_dir: Path) -> dict[str, Any]:
    settings = load(env)
    redis = clients.redis_client(settings)
    clear(redis)
    clients.ensure_topics(settings, topic_partitions(settings))
    producer = clients.kafka_producer(settings, linger_ms=20, batch_size=256 * 1024, acks=1)
    for request in requests(count, crawls):
        producer.send(settings.topic_incoming, request)
    producer.flush(timeout=120)
    producer.close()
    log = log_dir / "kafka-monitor.log"
    monitor = spawn([sys.executable, "-m", "deploy.cli", "kafka-monitor"], log, env=env, cwd=REPO)
    try:
        wait_for(lambda: "partitions assigned: " + settings.topic_incoming in log.read_text(), 60,
                 "the monitor to hold its partitions", alive=lambda: monitor.poll() is not None and log.read_text())
        first = wait_for(lambda: redis.zcard(keys.SEEDS), 60, "the first task in seeds", 0.005)
        started = time.monotonic()
        wait_for(lambda: redis.zcard(keys.SEEDS) >= count, 600, f"{count} tasks in seeds", 0.01)
        elapsed = time.monotonic() - started
    finally:
        stop_pid(monitor.pid)
    enqueued = int(redis.zcard(keys.SEEDS))
    clear(redis)
    measured = enqueued - int(first)
    return {"requests": count, "crawls": crawls, "measured_requests": measured, "seconds": round(elapsed, 3),
            "requests_per_s": round(measured / elapsed, 1) if elapsed > 0 else None}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--crawls", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    name = f"bench-intake-{uuid.uuid4().hex[:8]}"
    topics = {"CRAWLFLEET_TOPIC_INCOMING": f"{name}.incoming", "CRAWLFLEET_TOPIC_OUTBOUND": f"{name}.outbound",
              "CRAWLFLEET_TOPIC_FAILED": f"{name}.failed", "CRAWLFLEET_KAFKA_GROUP": name,
              "CRAWLFLEET_KAFKA_SESSION_TIMEOUT_MS": "6000", "CRAWLFLEET_KAFKA_HEARTBEAT_MS": "500",
              "CRAWLFLEET_LOG_LEVEL": "INFO"}
    with tempfile.TemporaryDirectory(prefix="crawlfleet-bench-") as tmp:
        run_dir = Path(tmp)
        own = "CRAWLFLEET_REDIS_URL" not in os.environ
        env = {**os.environ, **topics, "PYTHONPATH": str(REPO)}
        if own:
            env["CRAWLFLEET_RUN_DIR"] = str(run_dir)
            services.up(run_dir, services.Options(only=("redis", "kafka"), timeout=60))
        try:
            result = measure(env, args.requests, args.crawls, run_dir)
        finally:
            if own:
                services.down(run_dir)
    print(f"one kafka-monitor: {result['measured_requests']} crawl requests validated and enqueued in "
          f"{result['seconds']} s = {result['requests_per_s']} requests/s "
          f"({result['requests']} produced, {result['crawls']} crawls)")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
