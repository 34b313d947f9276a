"""``crawlfleet demoweb up|down|status``: the local run's bundled demo web (see :mod:`deploy.demoweb`)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from deploy.demoweb import DEFAULT_PAGES, DemoWebError, demoweb_status, start_demoweb, stop_demoweb
from messaging.settings import load

console = Console(stderr=True)


def _run_dir() -> str:
    return load().run_dir


@click.group()
def demoweb() -> None:
    """The demo web: deterministic news sites on *.fleet.test (loopback) for demo, tests and benchmarks."""


@demoweb.command("up")
@click.option("--pages", default=DEFAULT_PAGES, show_default=True, help="Articles per site.")
@click.option("--static", is_flag=True, help="Pre-render every page into memory (throughput benchmarks).")
@click.option("--port", type=int, default=None, help="Port on every site's address (default: a free one).")
@click.option("--slow-seconds", default=3.0, show_default=True, help="Delay of each site's slow page /live/.")
@click.option("--timeout", type=float, default=None, help="Seconds to wait for it to answer (default: 15, "
              "plus the pre-rendering time in static mode).")
def demoweb_up(
    pages: int, static: bool, port: int | None, slow_seconds: float, timeout: float | None
) -> None:
    """Start the demo web and record it (and its hosts file) in the run's state file."""
    try:
        status = start_demoweb(_run_dir(), pages=pages, static=static, port=port, timeout=timeout,
                               slow_seconds=slow_seconds)
    except (DemoWebError, TimeoutError) as exc:
        raise click.ClickException(str(exc)) from exc
    _print_status(status)


@demoweb.command("down")
def demoweb_down() -> None:
    """Stop the recorded demo web by PID and wait for its port to be free."""
    stopped = stop_demoweb(_run_dir())
    console.print("demo web stopped" if stopped else "the demo web was not running")


@demoweb.command("status")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: pid, port, sites, URLs, hosts file.")
def demoweb_status_command(as_json: bool) -> None:
    """Show the demo web; exits 1 when it is not running."""
    status = demoweb_status(_run_dir())
    if as_json:
        click.echo(json.dumps(status, sort_keys=True))
    else:
        _print_status(status)
    sys.exit(0 if status["running"] else 1)


@demoweb.command("requests")
def demoweb_requests() -> None:
    """Print the demo's two crawl requests for the running demo web, as JSON lines (the news site with the list rule,
    the China site with the universal rule): `crawlfleet demoweb requests | crawlfleet submit -`."""
    import time

    from deploy.cli_demo import crawl_requests

    try:
        requests = crawl_requests(str(_run_dir()), time.strftime("%H%M%S"))
    except (DemoWebError, KeyError) as exc:
        raise click.ClickException(f"the demo web is not running ({exc}): start it with `crawlfleet up`") from None
    for request in requests:
        request.pop("uuid", None)  # submit adds its own
        click.echo(json.dumps(request, ensure_ascii=False))


def _print_status(status: dict[str, Any]) -> None:
    if not status["running"]:
        console.print("the demo web is not running" + (" (its process is gone)" if "pid" in status else ""))
        return
    mode = "static" if status["static"] else "dynamic"
    table = Table(title=f"crawlfleet demo web: pid {status['pid']}, port {status['port']}, {mode}, "
                        f"{status['pages']} articles per site")
    for column in ("site", "address", "url"):
        table.add_column(column)
    for name, address in sorted(status["sites"].items()):
        table.add_row(name, address, status["urls"][name])
    console.print(table)
    console.print(f"hosts file: {status['hosts_file']} (CRAWLFLEET_HOSTS_FILE comes from the state file)")
