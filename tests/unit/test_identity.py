"""The host IP identity (CRAWLFLEET_WORKER_IP's default): the outward interface's address, not the host name's."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import pytest

from messaging import identity
from messaging.settings import load

pytestmark = pytest.mark.unit


def has_default_route() -> bool:
    """Whether the kernel's IPv4 table has a default route (destination 00000000 in /proc/net/route)."""
    try:
        rows = Path("/proc/net/route").read_text().splitlines()[1:]
    except OSError:
        return False
    return any(row.split()[1] == "00000000" for row in rows if len(row.split()) > 1)


@pytest.fixture
def debian_hosts(monkeypatch):
    """A stock Debian /etc/hosts: the host name resolves to 127.0.1.1."""
    monkeypatch.setattr(socket, "gethostbyname", lambda name: "127.0.1.1")


def test_the_default_is_the_outward_interfaces_address_not_the_host_names(tmp_path, debian_hosts):
    settings = load({"CRAWLFLEET_RUN_DIR": str(tmp_path)})
    address = identity.worker_ip(settings)
    assert address != "127.0.1.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as bound:
        bound.bind((address, 0))  # only an address of one of this host's interfaces can be bound
    if has_default_route():
        assert not ipaddress.ip_address(address).is_loopback


def test_the_probe_picks_a_route_and_sends_nothing(monkeypatch, debian_hosts, tmp_path):
    calls: list[str] = []

    class Probe:
        def __init__(self, family: int, kind: int) -> None:
            assert (family, kind) == (socket.AF_INET, socket.SOCK_DGRAM)

        def __enter__(self) -> Probe:
            return self

        def __exit__(self, *exc: object) -> None:
            calls.append("close")

        def connect(self, address: tuple[str, int]) -> None:
            calls.append("connect")

        def getsockname(self) -> tuple[str, int]:
            return ("10.20.30.40", 50000)

        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"the probe must not {name}")

    monkeypatch.setattr(socket, "socket", Probe)
    assert identity.worker_ip(load({"CRAWLFLEET_RUN_DIR": str(tmp_path)})) == "10.20.30.40"
    assert calls == ["connect", "close"]


def test_no_route_falls_back_to_loopback_and_the_setting_wins(monkeypatch, tmp_path):
    def unreachable(*args: object) -> None:
        raise OSError("Network is unreachable")

    monkeypatch.setattr(socket.socket, "connect", unreachable)
    assert identity.outward_address() == "127.0.0.1"
    settings = load({"CRAWLFLEET_RUN_DIR": str(tmp_path), "CRAWLFLEET_WORKER_IP": "198.51.100.7"})
    assert identity.worker_ip(settings) == "198.51.100.7"
