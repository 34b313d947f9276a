"""``crawlfleet master``: the dispatcher process (run one or more; one leads, the others stand by)."""

from __future__ import annotations

import click

from messaging.service import run_service, setup_logging
from messaging.settings import load


@click.command("master")
@click.option("--id", "identifier", default=None,
              help="Name of this master in the election (default: <node name>:<pid>).")
def master(identifier: str | None) -> None:
    """Dispatch tasks from seeds to the workers (weighted round robin with feedback), detect worker leaves,
    announce finished crawls. Several may run: a ZooKeeper election picks the one that dispatches."""
    from master.service import STATS_MODULE, MasterService

    settings = load()
    setup_logging(settings.log_level)
    service = MasterService(settings, identifier)
    run_service(service, settings, STATS_MODULE, lambda url: f"master {service.identifier}: running (metrics {url})")
