"""ZooKeeper down and back (issue 29, item 3), on a ZooKeeper of this test's own: a client's reconnect back-off is
capped (CRAWLFLEET_ZK_RECONNECT_MAX_DELAY, not kazoo's hour), its session resumes once ZooKeeper returns, and a site
change sent as it returns is retried, not dropped. The test asserts on the cap, never on how long the resume took:
the machine is shared, so a wall-clock bound would measure the load, not the client."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from kazoo.protocol.states import KazooState

from deploy.procs import free_port, kill_hard, port_free, wait_for
from deploy.services.zookeeper import ZooKeeperService
from messaging import clients
from messaging.redis_monitor.plugins import Context
from messaging.redis_monitor.plugins.zookeeper import ZookeeperPlugin
from messaging.settings import load
from messaging.siteconfig import SiteConfig, SitePaths

pytestmark = pytest.mark.integration

DOWN_SECONDS = 15.0  # long enough that kazoo's default back-off (0.1 s doubling) would wait ~13 s more
RESUME_WAIT = 60.0  # a bound on the wait only; the speed comes from the cap checked below


def test_sessions_resume_fast_and_a_site_change_sent_as_zookeeper_returns_is_applied(tmp_path: Path) -> None:
    service = ZooKeeperService(port=free_port())
    record = service.start(tmp_path / "zk1")
    client = writer = None
    try:
        service.wait_ready(record, 60)
        settings = load({"CRAWLFLEET_RUN_DIR": str(tmp_path), "CRAWLFLEET_ZK_HOSTS": f"127.0.0.1:{record.port}"})
        client, writer = clients.zk_client(settings), clients.zk_client(settings)
        # the back-off between reconnect attempts stops at the setting: a return is tried within about a second
        assert client._conn_retry.max_delay == settings.zk_reconnect_max_delay <= 2.0
        connected = threading.Event()
        client.add_listener(lambda state: connected.set() if state == KazooState.CONNECTED else connected.clear())
        connected.set()
        kill_hard(record.pids[0])
        wait_for(lambda: not connected.is_set(), 20, "the client to notice ZooKeeper is gone")
        time.sleep(DOWN_SECONDS)  # the outage (its length is the fault, nothing is waited for)
        wait_for(lambda: port_free(record.port), 20, "ZooKeeper's port to be free")
        answers: list[dict] = []
        errors: list[BaseException] = []

        def change_rate() -> None:  # sent as ZooKeeper returns; the monitor's client's session expired meanwhile
            try:
                answers.append(ZookeeperPlugin().handle(
                    "zk:rate:site.test:u:1", {"action": "rate", "domain": "site.test", "rate": 7, "window": 10},
                    Context(redis=None, settings=settings, _zk=writer)))
            except BaseException as exc:
                errors.append(exc)

        record = service.start(tmp_path / "zk1")
        sender = threading.Thread(target=change_rate, daemon=True)
        sender.start()
        service.wait_ready(record, 60)
        wait_for(connected.is_set, RESUME_WAIT, "the session resumed after ZooKeeper's return", interval=0.05)
        sender.join(timeout=70)
        assert not errors and answers[0]["site"]["rate"] == 7, errors
        raw, _ = client.get(SitePaths(settings.zk_root).site("site.test"))
        assert SiteConfig.from_json(raw).rate == 7
    finally:
        for zk in (client, writer):
            if zk is not None:
                zk.stop()
                zk.close()
        service.stop(record)
