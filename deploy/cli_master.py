"""``crawlfleet master``: the dispatcher process (run one or more; one leads, the others stand by)."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import Any

import click

from messaging.settings import load


@click.command("master")
@click.option("--id", "identifier", default=None,
              help="Name of this master in the election (default: <node name>:<pid>).")
def master(identifier: str | None) -> None:
    """Dispatch tasks from seeds to the workers (weighted round robin with feedback), detect worker leaves,
    announce finished crawls. Several may run: a ZooKeeper election picks the one that dispatches."""
    from master.service import MasterService

    settings = load()
    logging.basicConfig(level=settings.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(max(logging.WARNING, logging.getLogger().level))
    logging.getLogger("kazoo").setLevel(max(logging.WARNING, logging.getLogger().level))
    service = MasterService(settings, identifier)

    def stop(signum: int, frame: Any) -> None:
        logging.getLogger(__name__).info("signal %d: stopping", signum)
        threading.Thread(target=service.stop, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    service.run()
