"""A command whose service cannot be reached ends with one line naming the setting and ``crawlfleet up``."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import click
import pytest
import redis
from click.testing import CliRunner

from deploy.cli_errors import FriendlyGroup, Unreachable, reachable

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("args", [["info", "daily"], ["stop", "daily"], ["stats"], ["site", "rate", "a.com", "3"],
                                  ["submit", "-"]])
def test_kafka_unreachable_is_one_line_not_a_hang(args, tmp_path):
    env = {"PATH": "/usr/bin:/bin", "CRAWLFLEET_RUN_DIR": str(tmp_path),
           "CRAWLFLEET_KAFKA_BOOTSTRAP": f"127.0.0.1:{closed_port()}"}
    stdin = json.dumps({"userid": "u", "crawlid": "c", "spider_type": "universal", "url": "http://a.com/",
                        "rule": {"rules": [{"allow": "/news/", "follow": True}], "start": "url"}})
    # the old code retried the bootstrap for 30 s and printed a traceback: the timeout bounds the wait
    result = subprocess.run([sys.executable, "-m", "deploy.cli", *args], env=env, cwd=REPO, input=stdin,
                            capture_output=True, text=True, timeout=20)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "CRAWLFLEET_KAFKA_BOOTSTRAP" in lines[0] and "crawlfleet up" in lines[0]
    assert "Traceback" not in result.stderr


def test_reachable_says_why_not():
    assert reachable(f"127.0.0.1:{closed_port()}", 9092)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert reachable(f"127.0.0.1:{server.getsockname()[1]}", 9092) == ""


def test_a_library_connection_error_becomes_one_line():
    @click.group(cls=FriendlyGroup)
    def main() -> None:
        pass

    @main.command()
    def ping() -> None:
        redis.Redis(port=closed_port(), socket_connect_timeout=2).ping()

    result = CliRunner().invoke(main, ["ping"])
    assert result.exit_code == 1
    assert "cannot reach Redis" in result.output and "CRAWLFLEET_REDIS_URL" in result.output
    assert "crawlfleet up" in result.output and len(result.output.strip().splitlines()) == 1


def test_unreachable_names_service_address_and_setting():
    message = Unreachable("Kafka", "h:1", "CRAWLFLEET_KAFKA_BOOTSTRAP", "refused").format_message()
    assert message.startswith("cannot reach Kafka at h:1 (refused): check CRAWLFLEET_KAFKA_BOOTSTRAP")


def test_demoweb_requests_without_a_demo_web_says_to_start_it(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "CRAWLFLEET_RUN_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-m", "deploy.cli", "demoweb", "requests"], env=env, cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "crawlfleet up" in result.stderr and result.stdout == ""
