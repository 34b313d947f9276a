"""``crawlfleet up``, ``down`` and ``fleet status``: a long-lived local fleet (see :mod:`deploy.fleet`)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from deploy import fleet as local_fleet
from deploy import services as local_services
from deploy.demoweb import DEFAULT_PAGES, DemoWebError, demoweb_status
from deploy.keeper import supervisor_status
from messaging import spider_types
from messaging.clients import as_text
from messaging.settings import load

console = Console()

PERSISTENCE = (
    "Redis runs with an append-only file (appendfsync everysec): crawl requests accepted by a Kafka monitor, the "
    "queues, leases and crawl state survive a Redis restart, losing at most the last second of writes. MongoDB "
    "keeps its data on disk under <run dir>/mongo/data: stored items survive its restart. Kafka (Tansu) runs in "
    "memory: topics do not survive its restart. A supervisor (`crawlfleet supervise`, one of the fleet's processes) "
    "restarts a service that stays unhealthy (checked through a write) and replaces dead or fenced workers. "
    "`crawlfleet demo` runs everything in memory and without a supervisor: nothing survives a restart there."
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
@click.option("--json", "as_json", is_flag=True, help="One JSON object: each process with its pid and liveness.")
def fleet_status(as_json: bool) -> None:
    """List the fleet's processes, alive or dead, and say how its supervisor is (missing, hung); exits 1 when a
    process is dead, the supervisor is missing or hangs, or no fleet is recorded."""
    run_dir = _run_dir()
    report = {**local_fleet.status(run_dir), "supervisor": _supervisor(run_dir)}
    if as_json:
        click.echo(json.dumps(report, sort_keys=True))
    else:
        _show(run_dir)
    healthy = report["processes"] and all(process["alive"] for process in report["processes"])
    sys.exit(0 if healthy and report["supervisor"]["state"] in ("ok", "none") else 1)


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
