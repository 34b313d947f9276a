"""``crawlfleet manager``: the Twisted manager of a worker host — scrapyd's API, crawlfleet's API and the pages."""

from __future__ import annotations

import click


@click.command("manager")
@click.option("--bind", default=None, help="Address to listen on (default: CRAWLFLEET_MANAGER_BIND, 127.0.0.1). "
                                           "Any other than loopback requires CRAWLFLEET_MANAGER_AUTH.")
@click.option("--port", type=int, default=None, help="Port (default: CRAWLFLEET_MANAGER_PORT, 6800).")
def manager(bind: str | None, port: int | None) -> None:
    """Start and stop spiders over HTTP (scrapyd-compatible), feed crawls to Kafka, serve the pages."""
    from manager.app import run
    from manager.config import InsecureBind, ManagerConfig
    from messaging.service import setup_logging
    from messaging.settings import load

    settings = load()
    setup_logging(settings.log_level)
    try:
        config = ManagerConfig.from_settings(settings, bind=bind, port=port)
    except (InsecureBind, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    run(config)
