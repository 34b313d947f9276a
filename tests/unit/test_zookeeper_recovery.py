"""A site change retried across a session expiry (issue 29, item 3); the real outage: tests/integration."""

from __future__ import annotations

from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss, NoNodeError, SessionExpiredError

from messaging.redis_monitor.plugins import Context
from messaging.redis_monitor.plugins.zookeeper import ZookeeperPlugin
from messaging.settings import load

pytestmark = pytest.mark.unit


class _ReturningZooKeeper:
    """A ZooKeeper that has just come back: the first calls meet the expired session, then a new one works."""

    def __init__(self, failures: list[Exception]) -> None:
        self.failures = list(failures)
        self.nodes: dict[str, bytes] = {}

    def _maybe_fail(self) -> None:
        if self.failures:
            raise self.failures.pop(0)

    def get(self, path: str) -> Any:
        self._maybe_fail()
        if path not in self.nodes:
            raise NoNodeError(path)
        raise AssertionError("not needed here")

    def create(self, path: str, value: bytes, makepath: bool = False) -> None:
        self._maybe_fail()
        self.nodes[path] = value


def test_a_site_change_sent_as_zookeeper_returns_is_retried_not_dropped(tmp_path):
    settings = load({"CRAWLFLEET_RUN_DIR": str(tmp_path)})
    zk = _ReturningZooKeeper([SessionExpiredError(), ConnectionLoss(), SessionExpiredError()])
    context = Context(redis=None, settings=settings, _zk=zk)
    answer = ZookeeperPlugin().handle("zk:rate:site.test:u:1",
                                      {"action": "rate", "domain": "site.test", "rate": 5, "window": 10}, context)
    assert answer["site"]["rate"] == 5 and not zk.failures
    assert list(zk.nodes) == ["/crawlfleet/sites/site.test"]
