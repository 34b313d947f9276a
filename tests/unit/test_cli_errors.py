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

from deploy.cli_errors import FriendlyGroup, Unreachable, one_line, reachable

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


def test_a_client_librarys_retries_stay_off_a_commands_output():
    @click.group(cls=FriendlyGroup)
    def main() -> None:
        pass

    @main.command()
    def retries() -> None:
        import logging

        for _ in range(13):  # what kazoo logs at each reconnection while ZooKeeper is away
            logging.getLogger("kazoo.client").warning("Connection dropped: socket connection error: refused")
        click.echo("done")

    result = CliRunner().invoke(main, ["retries"])
    assert result.exit_code == 0 and result.output == "done\n"


def test_pymongos_error_is_cut_to_its_reason():
    from pymongo.errors import ServerSelectionTimeoutError

    error = ServerSelectionTimeoutError(
        "127.0.0.1:27099: [Errno 111] Connection refused (configured timeouts: socketTimeoutMS: 20000.0ms, "
        "connectTimeoutMS: 20000.0ms), Timeout: 10.0s, Topology Description: <TopologyDescription id: 1, "
        "topology_type: Unknown, servers: [<ServerDescription ('127.0.0.1', 27099) server_type: Unknown>]>")
    assert one_line(error) == "127.0.0.1:27099: [Errno 111] Connection refused"


def test_where_an_unanswered_request_waits_is_said_even_with_redis_away(tmp_path):
    from deploy.cli_unconfirmed import unconfirmed_message
    from messaging.settings import load

    settings = load({"CRAWLFLEET_RUN_DIR": str(tmp_path), "CRAWLFLEET_REDIS_URL": f"redis://127.0.0.1:{closed_port()}"})
    text = unconfirmed_message(settings, "site", {"uuid": "u1", "domain": "a.com", "action": "rate"}, 5)
    assert text.startswith("sent; not confirmed yet: no answer within 5s (request u1).")
    assert "Redis is unreachable" in text and "`crawlfleet site show a.com`" in text


def test_stats_are_explained_and_never_cut(monkeypatch):
    from rich.console import Console

    import deploy.cli_messaging as messaging

    narrow = Console(width=50, record=True, force_terminal=False)
    monkeypatch.setattr(messaging, "console", narrow)
    plugins = {"universal:200": {"60": 10, "300": 12, "step3600": 50, "lifetime": 100},
               "robots_noindex_and_a_long_name": {"60": 1, "lifetime": 2}}
    messaging._render_stats({"modules": {
        "kafka-monitor": {"alive": {}, "plugins": {"crawl": {"60": 1, "lifetime": 5}}},
        "crawler": {"alive": {"10.0.0.1": {"host": "h1", "expires_in": 9, "workers": 2}}, "seeds": 4, "workers": 2,
                    "plugins": plugins}}})
    text = narrow.export_text()
    words = " ".join(text.split())
    assert "alive on" not in text and "step3600" not in text and "…" not in text  # nothing cut
    assert "kafka-monitor: not running anywhere (no heartbeat in Redis)" in words
    assert "crawler: running: 2 workers on 10.0.0.1 (h1); tasks in seeds 4" in words
    assert "hour: since the top of this hour" in words
    assert "robots_noindex_and_a_lo" in text and "ng_name" in text  # folded onto the next line, not cut
