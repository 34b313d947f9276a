"""Who this process is to the cluster: host name, and host IP identity (seed 4.2.2.3)."""

from __future__ import annotations

import socket

from messaging.settings import Settings


def node_name(settings: Settings) -> str:
    return settings.node_name or socket.gethostname()


def worker_ip(settings: Settings) -> str:
    """The host's address as crawled sites see it without a proxy (CRAWLFLEET_WORKER_IP, else the host name's)."""
    if settings.worker_ip:
        return settings.worker_ip
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"
