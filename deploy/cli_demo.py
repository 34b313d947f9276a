"""``crawlfleet demo``: the whole fleet on this machine, two real crawls, watched live, then a summary.

It starts the local fleet (``deploy.fleet``: services, demo web, two masters, the monitors, two list and two
universal workers), waits until the workers are registered, raises the demo sites' rate limits and sends two crawl
requests through Kafka as any client would (a ``list`` crawl of the demo news site and a ``universal`` crawl of the
demo Chinese site, rules in ``deploy.demo_rules``), and shows their progress once a second (``deploy.progress``) until
both
crawls have their ``crawl_finished`` event on the outbound topic, or the timeout. Then it prints a summary, exports
every stored item to ``<run_dir>/demo-items.jsonl`` and stops everything it started (``--keep`` leaves it running).

Redis runs without its append-only file here: nothing of the demo survives a restart (``crawlfleet up`` runs a
long-lived fleet with one). A fleet that already runs (``crawlfleet up``) is used as it is, and left running.
"""

from __future__ import annotations

import json
import sys
import time
import uuid as uuidlib
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.live import Live

from deploy import fleet as local_fleet
from deploy import progress
from deploy import services as local_services
from deploy.demo_rules import (
    APPS_SITE,
    APPS_START_PATH,
    CHINA_SITE,
    CHINA_START_PATH,
    DEMO_LIST_RULE,
    DEMO_RENDER_RULE,
    DEMO_SITE_RATES,
    DEMO_UNIVERSAL_RULE,
    NEWS_SITE,
    NEWS_START_PATH,
)
from deploy.demoweb import DemoWebError, demoweb_status, site_url
from deploy.procs import wait_for
from frontier.registry import WorkerRegistry
from messaging import clients, spider_types
from messaging.answers import AnswerTimeout, AnswerWaiter
from messaging.settings import Settings, load
from messaging.validation import Rejected, parse_request

# Not a terminal (a log, CI): wide enough that the tables keep crawl ids and job names on one line.
console = Console() if sys.stdout.isatty() else Console(width=140)
DEMO_PAGES = 300  # articles per demo site: at 240 pages a minute per site the Chinese site takes about 1.5 minutes
DEMO_USER = "demo"
PLAIN_OUTPUT_SECONDS = 10.0  # progress lines when the output is not a terminal
ITEMS_FILE = "demo-items.jsonl"
RATE_ANSWER_SECONDS = 60.0  # the Redis monitor answers site-config requests once it wrote ZooKeeper


@click.command("demo")
@click.option("--pages", default=DEMO_PAGES, show_default=True, help="Articles per demo site.")
@click.option("--timeout", default=240.0, show_default=True, help="Seconds to wait for both crawls to finish.")
@click.option("--keep", is_flag=True, help="Leave the fleet running afterwards (stop it with `crawlfleet down`).")
@click.option("--down", "stop", is_flag=True, help="Stop a kept demo (as `crawlfleet down`).")
def demo(pages: int, timeout: float, keep: bool, stop: bool) -> None:
    """Start a local fleet, crawl the demo news site (list spider), Chinese site (universal spider) and client-rendered
    site (universal spider, render: auto) through Kafka,
    show the progress live, summarise, export the items and stop.

    Redis runs without its append-only file: nothing of the demo survives a Redis restart. For a long-lived
    fleet whose accepted requests survive one, use `crawlfleet up`.
    """
    run_dir = load().run_dir
    if stop:
        stopped = local_fleet.down(run_dir)
        console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        return
    reused = local_fleet.status(run_dir)["running"]
    began = time.monotonic()
    spec = local_fleet.FleetSpec(workers=spider_types.default_workers(), masters=2, demoweb=True, pages=pages,
                                 redis_aof=False, mongo_on_disk=False, supervise=False, owner="demo")
    try:
        local_fleet.up(run_dir, spec)
        settings = load(local_fleet.child_env(run_dir))
        jobs = _registered_workers(run_dir, settings)
    except (local_fleet.FleetError, local_services.ServiceError, DemoWebError, TimeoutError) as exc:
        if not reused and not keep:
            local_fleet.down(run_dir)
        raise click.ClickException(str(exc)) from exc
    note = " (the fleet was already running: it is used as it is and left running)" if reused else ""
    console.print(f"[bold]crawlfleet demo[/]: fleet ready in {time.monotonic() - began:.1f}s, "
                  f"{len(jobs)} workers registered (run dir {run_dir}){note}")
    interrupted = False
    try:
        snapshot, crawls = _crawl(run_dir, settings, jobs, timeout)
        _report(run_dir, settings, snapshot, crawls)
    except KeyboardInterrupt:
        interrupted = True
        console.print("[yellow]interrupted[/]")
    finally:
        if keep or reused:
            console.print("The fleet keeps running. Point any crawlfleet command at it with:  "
                          "eval \"$(crawlfleet env)\"\nStop it with:  crawlfleet down")
        else:
            stopped = local_fleet.down(run_dir)
            console.print(f"stopped {len(stopped)} processes and services: {', '.join(stopped)}")
    if interrupted:
        raise SystemExit(130)


def _registered_workers(run_dir: str, settings: Settings, timeout: float = 60.0) -> dict[str, str]:
    """The fleet's live workers (job -> spider type), once every one of them is in the ``workers`` registry."""
    jobs = {process["job"]: process["spider"] for process in local_fleet.status(run_dir)["processes"]
            if process["role"] == "worker" and process["alive"]}
    missing = sorted(set(spider_types.NAMES) - set(jobs.values()))
    if missing:
        raise local_fleet.FleetError(f"the running fleet has no live {' or '.join(missing)} worker: "
                                     f"`crawlfleet up {_workers_options()}`, or `crawlfleet down`")
    redis = clients.redis_client(settings)
    try:
        registry = WorkerRegistry(redis)
        wait_for(lambda: set(jobs) <= set(registry.live()), timeout, f"workers {', '.join(jobs)} to register", 0.2)
    finally:
        redis.close()
    return jobs


def _workers_options() -> str:
    return " ".join(f"--workers-{name} {count}" for name, count in spider_types.default_workers().items())


def crawl_requests(run_dir: str, stamp: str) -> list[dict[str, Any]]:
    """The demo's crawl requests, against the running demo web."""
    web = demoweb_status(run_dir)
    news = site_url(NEWS_SITE, web).rstrip("/") + NEWS_START_PATH
    china = site_url(CHINA_SITE, web).rstrip("/") + CHINA_START_PATH
    apps = site_url(APPS_SITE, web).rstrip("/") + APPS_START_PATH
    return [
        {"userid": DEMO_USER, "crawlid": f"demo-news-{stamp}", "url": news, "spider_type": "list",
         "rule": DEMO_LIST_RULE, "uuid": uuidlib.uuid4().hex},
        {"userid": DEMO_USER, "crawlid": f"demo-china-{stamp}", "url": china, "spider_type": "universal",
         "rule": DEMO_UNIVERSAL_RULE, "uuid": uuidlib.uuid4().hex},
        {"userid": DEMO_USER, "crawlid": f"demo-apps-{stamp}", "url": apps, "spider_type": "universal",
         "rule": DEMO_RENDER_RULE, "uuid": uuidlib.uuid4().hex},
    ]


def rate_requests() -> list[dict[str, Any]]:
    """Site-config requests that raise the demo sites' rates (see ``deploy.demo_rules``)."""
    return [{"action": "rate", "userid": DEMO_USER, "domain": site, "rate": hits, "window": window,
             "uuid": uuidlib.uuid4().hex} for site, (hits, window) in DEMO_SITE_RATES.items()]


def _crawl(run_dir: str, settings: Settings, jobs: dict[str, str],
           timeout: float) -> tuple[progress.Snapshot, list[progress.SubmittedCrawl]]:
    """Set the sites' rates, submit both crawls, show the progress until both finished or ``timeout``; returns the
    last snapshot and the crawls."""
    from messaging.kafka_monitor.monitor import topic_partitions

    rates, requests = rate_requests(), crawl_requests(run_dir, time.strftime("%Y%m%d-%H%M%S"))
    for request in rates + requests:
        try:
            parse_request(request, settings.max_message_bytes)
        except Rejected as rejection:
            raise click.ClickException(f"invalid demo request: {rejection.reason}") from None
    clients.ensure_topics(settings, topic_partitions(settings))
    redis = clients.redis_client(settings)
    mongo = clients.mongo_client(settings, serverSelectionTimeoutMS=2000, socketTimeoutMS=5000)
    waiter = AnswerWaiter(settings)  # reads the outbound topic from its end before anything is sent
    producer = clients.kafka_producer(settings)
    try:
        _send(producer, settings, rates)
        try:
            answers = waiter.wait([request["uuid"] for request in rates], RATE_ANSWER_SECONDS)
        except AnswerTimeout as exc:
            raise click.ClickException(f"the site rates were not set: {exc}") from None
        console.print("site rates: " + ", ".join(
            f"{a['domain']} {a['site']['rate']} per {a['site']['window']:g}s" for a in answers.values()))
        baseline = progress.lifetime_completions(redis, list(jobs))
        began = time.monotonic()
        _send(producer, settings, requests)
        crawls = [progress.SubmittedCrawl(r["crawlid"], r["spider_type"], r["url"], time.monotonic())
                  for r in requests]
        console.print("submitted " + ", ".join(f"{c.crawlid} ({c.spider_type}, {c.url})" for c in crawls))
        meter = progress.RateMeter()

        def snapshot() -> progress.Snapshot:
            return progress.collect(redis, mongo[settings.mongo_db], crawls, jobs, time.monotonic(), began,
                                    baseline, meter, settings.weight_window_minutes)

        deadline = began + timeout
        last = snapshot()
        with _Display(last) as display:
            while not all(crawl.finished for crawl in crawls) and time.monotonic() < deadline:
                tick = time.monotonic() + 1.0
                while time.monotonic() < tick and not all(crawl.finished for crawl in crawls):
                    _read_outbound(waiter, requests, crawls, timeout_ms=max(1, int((tick - time.monotonic()) * 1000)))
                last = snapshot()
                display.update(last)
        return last, crawls
    finally:
        producer.close(timeout=10)
        waiter.close()
        redis.close()
        mongo.close()


def _send(producer: Any, settings: Settings, requests: list[dict[str, Any]]) -> None:
    for request in requests:
        producer.send(settings.topic_incoming, request)
    producer.flush(timeout=30)


def _read_outbound(waiter: AnswerWaiter, requests: list[dict[str, Any]], crawls: list[progress.SubmittedCrawl],
                   timeout_ms: int) -> None:
    """One poll of the outbound topic: rejections of our requests, crawl_finished events of our crawls."""
    by_uuid = {request["uuid"]: request for request in requests}
    by_id = {crawl.crawlid: crawl for crawl in crawls}
    for records in waiter.consumer.poll(timeout_ms=timeout_ms).values():
        for record in records:
            try:
                message = json.loads(record.value)
            except (TypeError, ValueError):
                continue
            if not isinstance(message, dict):
                continue
            if message.get("uuid") in by_uuid and message.get("status") not in ("accepted", "duplicate"):
                raise click.ClickException(f"crawl {by_uuid[message['uuid']]['crawlid']} was not accepted: "
                                           f"{message.get('status')}: {message.get('reason')}")
            crawl = by_id.get(message.get("crawlid", ""))
            if message.get("event") == "crawl_finished" and crawl is not None and crawl.finished is None:
                crawl.finished, crawl.event = time.monotonic(), message


class _Display:
    """rich Live on a terminal (refreshed every second); a plain line every few seconds otherwise."""

    def __init__(self, first: progress.Snapshot) -> None:
        self.live = Live(progress.progress_view(first), console=console, refresh_per_second=1,
                         auto_refresh=False) if console.is_terminal else None
        self.printed = 0.0

    def __enter__(self) -> _Display:
        if self.live is not None:
            self.live.__enter__()
        return self

    def update(self, snapshot: progress.Snapshot) -> None:
        if self.live is not None:
            self.live.update(progress.progress_view(snapshot), refresh=True)
        elif time.monotonic() - self.printed >= PLAIN_OUTPUT_SECONDS:
            self.printed = time.monotonic()
            console.print(progress.progress_line(snapshot), soft_wrap=True)

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)


def _report(run_dir: str, settings: Settings, snapshot: progress.Snapshot,
            crawls: list[progress.SubmittedCrawl]) -> None:
    crawl_table, worker_table = progress.summary_tables(snapshot)
    console.print(crawl_table)
    console.print(worker_table)
    dead = [f"{p['name']} ({p['log']})" for p in local_fleet.status(run_dir)["processes"] if not p["alive"]]
    for crawl in snapshot.crawls:
        if not crawl.finished:
            console.print(f"[red]{progress.diagnose(crawl, snapshot.workers, dead)}[/]")
    path, count = export_items(settings, [crawl.crawlid for crawl in crawls], Path(run_dir) / ITEMS_FILE)
    console.print(f"exported {count:,} items to {path}")


def export_items(settings: Settings, crawlids: list[str], path: Path) -> tuple[Path, int]:
    """Every stored item of the crawls as JSON lines (the MongoDB documents without ``_id``)."""
    mongo = clients.mongo_client(settings)
    count = 0
    try:
        database = mongo[settings.mongo_db]
        with open(path, "w", encoding="utf-8") as out:
            for crawlid in crawlids:
                for document in database[crawlid].find({}, {"_id": False}):
                    out.write(json.dumps(document, ensure_ascii=False, default=str, sort_keys=True) + "\n")
                    count += 1
    finally:
        mongo.close()
    return path, count
