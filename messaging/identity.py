"""Who this process is to the cluster: host name, and host IP identity (seed 4.2.2.3)."""

from __future__ import annotations

import socket

from messaging.settings import Settings

# Any address outside the host reached through its default route: TEST-NET-3 (RFC 5737) is never assigned, so no
# more specific route (a VPN, a local network) can capture it. Nothing is ever sent there.
OUTWARD_PROBE = ("203.0.113.1", 9)


def node_name(settings: Settings) -> str:
    return settings.node_name or socket.gethostname()


def outward_address(probe: tuple[str, int] = OUTWARD_PROBE) -> str:
    """The local address of the interface that routes outwards (``127.0.0.1`` when there is no route).

    ``connect`` on a UDP socket only asks the kernel to pick a route and a source address: no packet leaves. The
    host name's address is no substitute: a stock Debian host maps its name to 127.0.1.1 in /etc/hosts, so every
    host of a fleet would share one per-IP throttle."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe_socket:
            probe_socket.connect(probe)
            return str(probe_socket.getsockname()[0])
    except OSError:  # no route outwards (a host without a network): throttles are then per host anyway
        return "127.0.0.1"


def worker_ip(settings: Settings) -> str:
    """The host's address as crawled sites see it without a proxy (CRAWLFLEET_WORKER_IP, else the address of the
    interface that routes outwards)."""
    return settings.worker_ip or outward_address()
