"""``crawlfleet demo``: the whole local fleet on this machine, started from nothing.

It brings up the real services and the demo web under the run directory, then shows their status and how to use
them. ``crawlfleet demo --down`` stops all of it by PID.
"""

from __future__ import annotations

import time

import click
from rich.console import Console
from rich.panel import Panel

from deploy import services as local_services
from deploy.cli_services import print_status
from deploy.demoweb import DEFAULT_PAGES, DemoWebError, demoweb_status, site_url, start_demoweb, stop_demoweb
from messaging.settings import load

console = Console()


@click.command("demo")
@click.option("--pages", default=DEFAULT_PAGES, show_default=True, help="Articles per demo site.")
@click.option("--down", "stop", is_flag=True, help="Stop the demo web and the services instead.")
def demo(pages: int, stop: bool) -> None:
    """Start the services and the demo web on loopback and show what runs where."""
    run_dir = load().run_dir
    if stop:
        stop_demoweb(run_dir)
        stopped = local_services.down(run_dir)
        console.print(f"stopped the demo web and {', '.join(stopped) or 'no services'}")
        return
    started = time.monotonic()
    try:
        local_services.up(run_dir)
        web = demoweb_status(run_dir)
        if not web.get("running"):
            web = start_demoweb(run_dir, pages=pages)
    except (local_services.ServiceError, DemoWebError, TimeoutError) as exc:
        raise click.ClickException(str(exc)) from exc
    console.print(f"[bold]crawlfleet demo[/] is up in {time.monotonic() - started:.1f}s (run dir {run_dir})")
    print_status(local_services.status(run_dir))
    sites = "\n".join(f"  {site_url(name, web)}  ({ip})" for name, ip in sorted(web["sites"].items()))
    console.print(Panel(
        f"demo web ({web['pages']} articles per site):\n{sites}\n\n"
        "Point any crawlfleet command at this run with:  eval \"$(crawlfleet env)\"\n"
        "Stop everything with:  crawlfleet demo --down",
        title="what runs", expand=False,
    ))  # fmt: skip
