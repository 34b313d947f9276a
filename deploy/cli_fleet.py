"""``crawlfleet up``, ``down`` and ``fleet status``: a long-lived local fleet (see :mod:`deploy.fleet`)."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deploy import fleet as local_fleet
from deploy import services as local_services
from deploy.demoweb import DEFAULT_PAGES, DemoWebError, demoweb_status
from deploy.keeper import supervisor_status
from messaging import keys, spider_types
from messaging.clients import as_text
from messaging.settings import load
from messaging.stalls import UNKNOWN
from messaging.waits import NO_WORKER, STORAGE

console = Console()

PERSISTENCE = (
    "Redis runs with an append-only file (appendfsync everysec): crawl requests accepted by a Kafka monitor, the "
    "queues, leases and crawl state survive a Redis restart, losing at most the last second of writes. MongoDB "
    "keeps its data on disk under <run dir>/mongo/data: stored items survive its restart. Kafka (Tansu) runs in "
    "memory: topics do not survive its restart. A supervisor (`crawlfleet supervise`, one of the fleet's processes) "
    "restarts a service that stays unhealthy (checked through a write) and replaces dead or fenced workers. "
    "`crawlfleet demo` runs Redis without its append-only file and without a supervisor: its queues do not survive a "
    "restart there (its items do, on disk)."
)


def _run_dir() -> str:
    return load().run_dir


def _workers_options(command: Any) -> Any:
    """``--workers-<type> N`` for each spider type of the registry (messaging.spider_types), its default there."""
    for entry in reversed(list(spider_types.REGISTRY.values())):
        command = click.option(f"--workers-{entry.name}", f"workers_{entry.name}", default=entry.workers,
                               show_default=True, type=click.IntRange(0),
                               help=f"Workers of the {entry.name} spider.")(command)
    return command


@click.command("up", epilog=PERSISTENCE)
@_workers_options
@click.option("--masters", default=2, show_default=True, type=click.IntRange(1),
              help="Masters (one leads, the others stand by).")
@click.option("--demoweb/--no-demoweb", default=True, show_default=True, help="Also run the demo web.")
@click.option("--pages", default=DEFAULT_PAGES, show_default=True, help="Articles per demo site.")
@click.option("--timeout", default=90.0, show_default=True, help="Seconds to wait for everything to be ready.")
@click.option("--status", "only_status", is_flag=True, help="Only show the fleet (as `crawlfleet fleet status`).")
def up(masters: int, demoweb: bool, pages: int, timeout: float, only_status: bool, **workers: int) -> None:
    """Start a long-lived local fleet under the run directory: the services (Redis with an append-only file), the
    demo web, the masters, a Kafka monitor, a Redis monitor and the workers, each a recorded child process.

    Idempotent: with a fleet already recorded, nothing new starts; processes that died are started again (a
    worker under a new job id). Stop it all with `crawlfleet down`.
    """
    run_dir = _run_dir()
    if only_status:
        _show(run_dir)
        return
    counts = {name: workers[f"workers_{name}"] for name in spider_types.NAMES}
    spec = local_fleet.FleetSpec(workers=counts, masters=masters, demoweb=demoweb, pages=pages, redis_aof=True,
                                 mongo_on_disk=True, supervise=True, owner="up", timeout=timeout)
    began = time.monotonic()
    try:
        result = local_fleet.up(run_dir, spec)
    except (local_fleet.FleetError, local_services.ServiceError, DemoWebError, TimeoutError) as exc:
        raise click.ClickException(str(exc)) from exc
    started = result["started"]
    if started:
        console.print(f"fleet up in {time.monotonic() - began:.1f}s (run dir {run_dir}); started: {', '.join(started)}")
    else:
        console.print(f"the fleet already runs (run dir {run_dir}): nothing started")
    _show(run_dir)
    if not _redis_has_aof(run_dir):
        console.print("[yellow]Redis was already running without its append-only file (started by the demo or "
                      "`services up`): restart the services (`crawlfleet down`, then `up`) for persistence.[/]")
    if result.get("targets_file"):
        console.print(f"Prometheus targets (file_sd, kept current): {result['targets_file']}\n"
                      f"  scrape them with:  file_sd_configs: [{{files: [{result['targets_file']}]}}]", markup=False,
                      highlight=False)
    console.print("Stop everything with:  crawlfleet down")


@click.command("down")
def down() -> None:
    """Stop the fleet by PID (workers first, so that they hand their leases back), then the demo web and the
    services."""
    try:
        stopped = local_fleet.down(_run_dir())
    except local_services.ServiceError as exc:
        raise click.ClickException(str(exc)) from exc
    console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")


@click.group("fleet")
def fleet() -> None:
    """The local fleet started by `crawlfleet up` or `crawlfleet demo --keep`."""


@fleet.command("status")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: each process with its pid and liveness, "
                                                       "the stalled crawls and the stores refusing writes.")
def fleet_status(as_json: bool) -> None:
    """List the fleet's processes, alive or dead, say how its supervisor is (missing, hung), which workers' item
    stores refuse writes (since when, why, items waiting) and which crawls are stalled, and why; exits 1 when a
    process is dead, the supervisor is missing or hangs, no fleet is recorded, or a crawl is stalled for a reason of
    the fleet's own (its store refusing writes, no worker of its spider type, no progress with nothing to explain
    it; a site's pace, block or robots.txt outage is shown, not failed)."""
    run_dir = _run_dir()
    report = {**local_fleet.status(run_dir), "supervisor": _supervisor(run_dir), **_stalls()}
    if as_json:
        click.echo(json.dumps(report, sort_keys=True))
    else:
        _show(run_dir)
        for line in stall_lines(report):
            console.print(line)
    healthy = report["processes"] and all(process["alive"] for process in report["processes"])
    fleet_stalls = [c for c in report.get("stalled") or [] if c["reason"] in FLEET_STALL_REASONS]
    sys.exit(0 if healthy and report["supervisor"]["state"] in ("ok", "none") and not fleet_stalls else 1)


FLEET_STALL_REASONS = (STORAGE, NO_WORKER, UNKNOWN)


def _stalls() -> dict[str, Any]:
    """``stalled`` (``messaging.stalls.stalled_crawls``) and ``stores`` (job -> its store refusing writes), read from
    Redis; ``stalls_error`` instead when Redis does not answer."""
    from messaging import clients, storage
    from messaging.stalls import stalled_crawls

    settings = load()
    try:
        redis = clients.redis_client(settings, socket_timeout=5, socket_connect_timeout=3)
        try:
            live = [as_text(job) for job in redis.zrange(keys.WORKERS, 0, -1)]
            stores = {job: dataclasses.asdict(state) for job, state in storage.read(redis, live).items()}
            return {"stalled": stalled_crawls(redis, lambda domain: None, settings.stall_show_after),
                    "stores": stores}
        finally:
            redis.close()
    except Exception as exc:  # Redis away: the processes are still worth showing
        return {"stalled": [], "stores": {}, "stalls_error": f"{type(exc).__name__}: {exc}"}


def stall_lines(report: dict[str, Any]) -> list[str]:
    """What the status says of stores refusing writes and stalled crawls (rich markup)."""
    from messaging.storage import describe

    lines = [f"[red]store refusing writes[/] worker {escape(job)}: "
             f"{escape(describe(s['since'], s['reason'], s['waiting']))}"
             for job, s in sorted(report["stores"].items())]
    lines += [f"[red]stalled[/] crawl {escape(c['crawlid'])}: {escape(c['text'])}" for c in report["stalled"]]
    if report.get("stalls_error") and report.get("processes"):  # no fleet here: no Redis to ask is no news
        lines.append(f"stalled crawls unknown: Redis does not answer ({escape(report['stalls_error'])})")
    return lines


def _supervisor(run_dir: str) -> dict[str, Any]:
    return supervisor_status(Path(run_dir).resolve(), load().supervisor_heartbeat_ttl)


def _show(run_dir: str) -> None:
    console.print(fleet_table(local_fleet.status(run_dir), demoweb_status(run_dir)))
    if local_fleet.status(run_dir)["processes"]:
        console.print(supervisor_line(_supervisor(run_dir)))


def supervisor_line(status: dict[str, Any]) -> str:
    """What the status says of the supervisor (rich markup)."""
    state, pid, age = status["state"], status["pid"], status.get("heartbeat_age")
    if state == "ok":
        beat = f", heartbeat {age:.1f} s ago" if age is not None else ", starting"
        return f"supervisor: [green]running[/] (pid {pid}{beat}); the masters restart it if it dies or hangs"
    if state == "missing":
        return (f"supervisor: [red]MISSING[/] (pid {pid} is not running): nothing restarts dead processes until a "
                "master starts it again (every second; `crawlfleet up` does too)")
    if state == "hung":
        return (f"supervisor: [red]HUNG[/] (pid {pid}, no heartbeat for {age:.0f} s): the masters kill it and "
                "start another")
    return "supervisor: none (this fleet runs without one: `crawlfleet demo`)"


def fleet_table(report: dict[str, Any], web: dict[str, Any] | None = None) -> Table:
    redis_aof = report.get("redis_aof")
    aof = ("Redis AOF on" if redis_aof else "Redis AOF off") if isinstance(redis_aof, bool) else ""
    title = f"crawlfleet fleet ({report.get('owner') or 'not running'}{', ' + aof if aof else ''})"
    table = Table(title=title)
    for column in ("process", "pid", "state", "job", "log"):
        table.add_column(column, overflow="fold")
    for process in report["processes"]:
        state = "[green]alive[/]" if process["alive"] else "[red]dead[/]"
        table.add_row(process["name"], str(process["pid"]), state, process.get("job") or "", process["log"])
    if web and web.get("running"):
        table.add_row("demoweb", str(web["pid"]), "[green]alive[/]", "", web.get("log", ""))
    return table


def _redis_has_aof(run_dir: str) -> bool:
    from messaging import clients

    try:
        client = clients.redis_client(load({"CRAWLFLEET_RUN_DIR": run_dir}), socket_timeout=2)
        try:
            value = client.config_get("appendonly").get("appendonly")
            return as_text(value) == "yes"
        finally:
            client.close()
    except Exception:  # Redis away: the status table already says so
        return True


@click.command("supervise")
def supervise() -> None:
    """Watch the local fleet of the run directory until SIGTERM (`crawlfleet up` starts this as one of the fleet's
    processes): restart a service that stays unhealthy past CRAWLFLEET_SUPERVISE_BOUND in place, start a process
    that died again, replace a worker the master retired; with back-off, saying why in the log."""
    from deploy import supervisor
    from messaging.service import setup_logging

    settings = load()
    setup_logging(settings.log_level)
    supervisor.run(settings)


COMMANDS = (up, down, fleet, supervise)
