"""``crawlfleet services``, ``crawlfleet env`` and ``crawlfleet settings``."""

from __future__ import annotations

import json
import shlex
import sys
import time

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deploy import services as local_services
from messaging.settings import SETTINGS, load

console = Console(stderr=True)


def _run_dir() -> str:
    return load().run_dir


@click.group()
def services() -> None:
    """Real services on 127.0.0.1 for tests and the demo (Redis, ZooKeeper, Kafka, MongoDB)."""


@services.command("up")
@click.option("--redis-cluster", is_flag=True, help="A 3-master Redis Cluster instead of one Redis server.")
@click.option("--redis-aof", is_flag=True, help="Redis with an append-only file (persistence).")
@click.option("--mongo-storage", default=None,
              help="SecantusDB storage path (default: <run dir>/mongo/data); ':memory:' keeps the data in memory, "
                   "at most its cache (CRAWLFLEET_LOCAL_MONGO_CACHE).")
@click.option("--only", multiple=True, type=click.Choice(local_services.SERVICE_NAMES),
              help="Start only these services (repeatable).")
@click.option("--timeout", default=60.0, show_default=True, help="Seconds to wait for each service.")
def services_up(redis_cluster: bool, redis_aof: bool, mongo_storage: str | None, only: tuple[str, ...],
                timeout: float) -> None:
    """Start the services that are not running (idempotent)."""
    run_dir = _run_dir()
    options = local_services.Options(redis_cluster=redis_cluster, redis_aof=redis_aof, mongo_storage=mongo_storage,
                                     only=only or local_services.SERVICE_NAMES, timeout=timeout)
    started = time.monotonic()
    try:
        local_services.up(run_dir, options)
    except local_services.ServiceError as exc:
        raise click.ClickException(str(exc)) from exc
    console.print(f"services up in {time.monotonic() - started:.1f}s (run dir {run_dir})")
    print_status(local_services.status(run_dir))


@services.command("down")
def services_down() -> None:
    """Stop every recorded service by PID and wait for its ports to be free."""
    try:
        stopped = local_services.down(_run_dir())
    except local_services.ServiceError as exc:
        raise click.ClickException(str(exc)) from exc
    console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")


@services.command("status")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: each service's health and connection.")
def services_status(as_json: bool) -> None:
    """Ping each recorded service; exits 1 when one is unhealthy."""
    report = local_services.status(_run_dir())
    if as_json:
        click.echo(json.dumps(report, sort_keys=True))
    else:
        print_status(report)
    unhealthy = [name for name in local_services.SERVICE_NAMES if name in report and not report[name]["healthy"]]
    sys.exit(1 if unhealthy else 0)


def print_status(report: dict) -> None:
    table = Table(title="crawlfleet services")
    for column in ("service", "health", "pids", "ports", "connection"):
        table.add_column(column)
    for name in local_services.SERVICE_NAMES:
        if name not in report:
            table.add_row(name, "[dim]not running[/]", "", "", "")
            continue
        entry = report[name]
        connection = next((str(v) for k, v in entry.items() if k.endswith(("_url", "_uri", "_hosts", "_bootstrap"))),
                          "")
        health = "[green]healthy[/]" if entry["healthy"] else f"[red]{escape(str(entry['detail']))}[/]"
        table.add_row(name, health, ",".join(map(str, entry["pids"])), ",".join(map(str, entry["ports"])),
                      escape(connection))
    Console().print(table)


@click.command("env")
def env_command() -> None:
    """Print ``export CRAWLFLEET_…=…`` lines for the local run (eval "$(crawlfleet env)")."""
    settings = load()
    for name, value in settings.as_env().items():
        if settings.source(name) != "default" or name == "CRAWLFLEET_RUN_DIR":
            click.echo(f"export {name}={shlex.quote(value)}")


@click.command("settings")
@click.option("--markdown", is_flag=True, help="A Markdown table (the README's configuration table).")
def settings_command(markdown: bool) -> None:
    """Every setting with its current value, where it came from, and what it does."""
    settings = load()
    if markdown:
        click.echo("| variable | default | what |\n|---|---|---|")
        for setting in SETTINGS.values():
            default = f"`{setting.default}`" if setting.default not in ("", None) else ""
            click.echo(f"| `{setting.name}` | {default} | {setting.doc} |")
        return
    table = Table(title="crawlfleet settings")
    for column in ("variable", "value", "from", "what"):
        table.add_column(column, overflow="fold")
    for name, setting in SETTINGS.items():
        table.add_row(*map(escape, (name, setting.shown(settings[name]), settings.source(name), setting.doc)))
    Console().print(table)
