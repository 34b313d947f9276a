"""Every long-running crawlfleet process runs the same way: logging, signals, heartbeat, ``/metrics``, shutdown.

A service object (the Kafka monitor, the Redis monitor, the master, …) provides ``run()`` (until ``stop()``),
``stop()`` (from another thread), ``close()``, and its ``redis`` client and ``stats``; :func:`run_service` does the
rest, so that every module is seen alive (``stats:<module>:<ip>``), is scraped the same way, is probed the same way
(``/livez``: its heartbeat thread and the loops the service registers turn; ``/readyz``: its Redis answers, and the
service's own readiness checks, from its optional ``health_checks(health)``; :mod:`messaging.health`), and stops
cleanly on SIGTERM/SIGINT.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, Protocol

from messaging.clients import RedisClient
from messaging.health import HEALTH, redis_answers
from messaging.identity import worker_ip
from messaging.memory import TrimThread
from messaging.metrics import serve_metrics
from messaging.outage import quiet_reconnects
from messaging.settings import Settings
from messaging.stats import Heartbeat, Stats

logger = logging.getLogger(__name__)
QUIET_LIBRARIES = ("kafka", "kazoo")


class Service(Protocol):
    redis: RedisClient
    stats: Stats

    def run(self) -> None: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...


def setup_logging(level: str) -> None:
    """Log to stderr at ``level``; the client libraries only from WARNING (their INFO is per-connection noise)."""
    logging.basicConfig(level=level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger().level))
    quiet_reconnects(QUIET_LIBRARIES)  # their reconnection warnings: once per outage, not once per attempt


def run_service(service: Service, settings: Settings, module: str, banner: Callable[[str], str]) -> None:
    """Run ``service`` until SIGTERM/SIGINT; ``banner(metrics_url)`` is logged once it runs."""
    endpoint = serve_metrics(settings, module, HEALTH)
    heartbeat = Heartbeat(service.stats, worker_ip(settings), extra=[lambda: endpoint.register(service.redis)])
    HEALTH.age("heartbeat", heartbeat.age)
    HEALTH.ready("redis", redis_answers(settings))
    health_checks = getattr(service, "health_checks", None)
    if health_checks is not None:
        health_checks(HEALTH)

    def on_signal(signum: int, frame: Any) -> None:
        logger.info("%s: signal %d, stopping", module, signum)
        # stop() may wait (e.g. for a ZooKeeper node to be released): never inside the signal handler
        threading.Thread(target=service.stop, name=f"stop-{module}", daemon=True).start()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    connect = getattr(service, "connect", None)
    if connect is not None:
        connect()
    heartbeat.start()
    trim = TrimThread(settings.malloc_trim_interval).start()  # freed memory back to the system (issue 40)
    logger.info(banner(endpoint.url))
    try:
        service.run()
    finally:
        trim.stop()
        heartbeat.stop()
        service.close()
        endpoint.close()
        logger.info("%s: stopped", module)
