"""``crawlfleet master``: the dispatcher process (run one or more; one leads, the others stand by)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import click

from messaging.service import run_service, setup_logging
from messaging.settings import load


@click.command("master")
@click.option("--id", "identifier", default=None,
              help="Name of this master in the election (default: <node name>:<pid>).")
@click.option("--keep-supervisor", is_flag=True,
              help="Also keep the local fleet's supervisor running: start it again when it dies or hangs "
                   "(`crawlfleet up` starts its masters so).")
def master(identifier: str | None, keep_supervisor: bool) -> None:
    """Dispatch tasks from seeds to the workers (weighted round robin with feedback), detect worker leaves,
    announce finished crawls. Several may run: a ZooKeeper election picks the one that dispatches."""
    from master.service import STATS_MODULE, MasterService

    settings = load()
    setup_logging(settings.log_level)
    if keep_supervisor:
        from deploy.keeper import keep

        keep(Path(settings.run_dir).resolve(), settings.supervisor_heartbeat_ttl, threading.Event())
    service = MasterService(settings, identifier)
    _register_metrics(service, settings)
    run_service(service, settings, STATS_MODULE, lambda url: f"master {service.identifier}: running (metrics {url})")


def _register_metrics(service: Any, settings: Any) -> None:
    """The master's /metrics: the cluster's gauges (queues, workers, crawls, responses) and its leadership."""
    from prometheus_client import REGISTRY

    from frontier.metrics import ClusterCollector, LeaderCollector
    from messaging.siteconfig import SitePaths

    REGISTRY.register(ClusterCollector(service.redis, settings.heartbeat_ttl,
                                       stall_show_after=settings.stall_show_after))
    REGISTRY.register(LeaderCollector(service.zk, SitePaths(settings.zk_root).election, service.identifier))
