"""The fleet's supervisor decides on simulated time: restart after the bound, with back-off, and say why."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest

from deploy.supervisor import Supervisor

pytestmark = pytest.mark.unit


class Fake:
    def __init__(self) -> None:
        self.health: dict[str, tuple[bool, str]] = {"mongo": (True, "ok"), "redis": (True, "ok")}
        self.procs: list[dict[str, Any]] = [
            {"name": "worker-a", "role": "worker", "job": "a", "alive": True},
            {"name": "master-m1", "role": "master", "job": None, "alive": True}]
        self.fenced: set[str] = set()
        self.restarted: list[str] = []
        self.replaced: list[tuple[str, bool]] = []
        self.fail_restart = False

    def services(self) -> dict[str, tuple[bool, str]]:
        return dict(self.health)

    def restart_service(self, name: str) -> None:
        self.restarted.append(name)
        if self.fail_restart:
            raise RuntimeError("port taken")
        self.health[name] = (True, "ok")

    def processes(self) -> list[dict[str, Any]]:
        return [dict(p) for p in self.procs]

    def retired(self, jobs: list[str]) -> set[str]:
        return self.fenced & set(jobs)

    def replace(self, name: str, kill: bool) -> str:
        self.replaced.append((name, kill))
        for process in self.procs:
            if process["name"] == name:
                process["alive"] = True
        self.fenced.clear()
        return name


def test_a_store_failing_writes_is_restarted_after_the_bound_not_before(caplog):
    now = [0.0]
    fake = Fake()
    supervisor = Supervisor(fake, bound=20, backoff=5, backoff_max=60, clock=lambda: now[0])
    caplog.set_level(logging.INFO, logger="deploy.supervisor")
    fake.health["mongo"] = (False, "OperationFailure: No space left on device")
    for t in range(0, 20, 5):
        now[0] = t
        assert supervisor.check() == []
    now[0] = 20
    assert supervisor.check() == ["service:mongo"]
    assert fake.restarted == ["mongo"]
    messages = [r.getMessage() for r in caplog.records]
    assert any("restarting mongo: unhealthy for 20s (OperationFailure: No space left on device)" in m
               for m in messages), messages


def test_restarts_back_off_while_a_restart_does_not_help():
    now = [0.0]
    fake = Fake()
    fake.fail_restart = True
    supervisor = Supervisor(fake, bound=10, backoff=5, backoff_max=40, clock=lambda: now[0])
    fake.health["redis"] = (False, "ConnectionError")
    times = []
    for t in range(0, 200):
        now[0] = float(t)
        if supervisor.check():
            times.append(t)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert times[0] == 10 and gaps[:4] == [5, 10, 20, 40] and set(gaps[4:]) == {40}


def test_a_dead_process_is_started_again_and_a_fenced_worker_is_killed_and_replaced():
    now = [0.0]
    fake = Fake()
    supervisor = Supervisor(fake, bound=20, backoff=5, backoff_max=60, clock=lambda: now[0])
    fake.procs[1]["alive"] = False
    assert supervisor.check() == ["process:master-m1"]
    assert fake.replaced == [("master-m1", False)]
    now[0] = 100
    fake.fenced = {"a"}  # SIGSTOPped past its heartbeat: alive, but retired by the master
    assert supervisor.check() == ["process:worker-a"]
    assert fake.replaced[-1] == ("worker-a", True)
    now[0] = 101
    assert supervisor.check() == []
