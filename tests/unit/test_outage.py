"""One OutageLog for every long-lived loop: a line when an outage starts, a line when it ends, nothing in between."""

from __future__ import annotations

import logging
import threading

import pytest
import redis as redis_py

from messaging.clock import ManualClock
from messaging.outage import OutageLog

pytestmark = pytest.mark.unit


def _lines(caplog, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == name and r.levelno >= logging.INFO]


def test_an_outage_is_two_lines_however_long_it_lasts(caplog):
    clock = ManualClock(1000.0)
    outage = OutageLog(logging.getLogger("test.outage"), "the thing (Redis)", clock=clock)
    caplog.set_level(logging.DEBUG, logger="test.outage")
    assert outage.ok() is None  # nothing to end
    assert outage.failed(ConnectionError("refused")) is True
    for _ in range(3600):  # an hour of failures, one a second
        clock.advance(1)
        assert outage.failed(ConnectionError("refused")) is False
    assert outage.down
    assert outage.ok() == pytest.approx(3600.0)
    assert outage.ok() is None
    lines = _lines(caplog, "test.outage")
    assert [r.levelno for r in lines] == [logging.ERROR, logging.WARNING], [r.getMessage() for r in lines]
    assert "the thing (Redis) failing: ConnectionError: refused" in lines[0].getMessage()
    assert lines[0].exc_info is None  # the traceback only at DEBUG
    assert "works again after 3600.0s" in lines[1].getMessage()
    debug = [r for r in caplog.records if r.name == "test.outage" and r.levelno == logging.DEBUG]
    assert len(debug) == 1 and debug[0].exc_info is not None


def test_each_outage_is_logged_and_counted():
    clock = ManualClock()
    outage = OutageLog(logging.getLogger("test.outage"), "x", clock=clock)
    for _ in range(3):
        outage.failed("down")
        outage.failed("down")
        clock.advance(5)
        outage.ok()
    assert outage.outages == 3 and not outage.down


def test_a_plain_callable_is_a_clock_too():
    now = [10.0]
    outage = OutageLog(logging.getLogger("test.outage"), "x", clock=lambda: now[0])
    outage.failed("down")
    now[0] = 12.5
    assert outage.ok() == pytest.approx(2.5)


def test_threads_sharing_one_log_start_one_outage(caplog):
    outage = OutageLog(logging.getLogger("test.outage.threads"), "x")
    caplog.set_level(logging.INFO, logger="test.outage.threads")
    barrier = threading.Barrier(8)

    def fail() -> None:
        barrier.wait()
        for _ in range(200):
            outage.failed("down")

    threads = [threading.Thread(target=fail) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outage.outages == 1
    assert len(_lines(caplog, "test.outage.threads")) == 1


# --- the election: a master whose Redis is away must not log a traceback per attempt -------------------------------
class _Election:
    """kazoo's Election recipe as the master uses it: ``run`` calls the function at once (this master wins)."""

    def __init__(self, owner: _ZooKeeper) -> None:
        self.owner = owner

    def run(self, func, *args):
        func(*args)

    def cancel(self) -> None:
        pass


class _ZooKeeper:
    def __init__(self) -> None:
        from kazoo.protocol.states import KazooState

        self.state = KazooState.CONNECTED
        self.listeners = []

    def Election(self, path, identifier):  # kazoo's name
        return _Election(self)

    def add_listener(self, listener) -> None:
        self.listeners.append(listener)

    def remove_listener(self, listener) -> None:
        self.listeners.remove(listener)


class _RedisAway:
    """INCR (the epoch) fails ``failures`` times, then works."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def incr(self, key: str) -> int:
        self.calls += 1
        if self.calls <= self.failures:
            raise redis_py.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        return 7


def test_the_election_logs_a_redis_outage_once_not_a_traceback_per_second(caplog, monkeypatch):
    from master import election as election_module

    leadership = election_module.Leadership(_ZooKeeper(), _RedisAway(failures=50), "/election", "m1")
    monkeypatch.setattr(leadership.stopping, "wait", lambda seconds: False)  # simulated time: no real pause
    epochs = []

    def lead(epoch: int, lost: threading.Event) -> None:
        epochs.append(epoch)
        leadership.stopping.set()

    caplog.set_level(logging.INFO, logger="master.election")
    leadership.run(lead)
    assert epochs == [7]
    lines = _lines(caplog, "master.election")
    messages = [r.getMessage() for r in lines]
    assert all(r.exc_info is None for r in lines), messages
    # failing, works again, leading, stepped down: not 50 tracebacks and 50 "stepped down"
    assert len(messages) == 4, messages
    assert "failing: ConnectionError" in messages[0] and "works again" in messages[1]
    assert "leading the dispatch with epoch 7" in messages[2] and "stepped down" in messages[3]


def test_a_library_reconnecting_every_second_logs_once_per_outage():
    from messaging.outage import RepeatFilter

    now = [0.0]
    passed: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            passed.append(record.name)

    handler = Collect()
    handler.addFilter(RepeatFilter(("test.kazoo",), quiet=60, clock=lambda: now[0]))
    library, ours = logging.getLogger("test.kazoo.client"), logging.getLogger("test.ours")
    for logger in (library, ours):
        logger.addHandler(handler)
        logger.propagate = False
    try:
        for second in range(20):  # ZooKeeper away 20 s: one attempt a second
            now[0] = second
            library.warning("Connection dropped: socket connection error: %s", "Connection refused")
            ours.warning("our own line")
        now[0] = 500  # the next outage, long after
        library.warning("Connection dropped: socket connection error: %s", "Connection refused")
    finally:
        for logger in (library, ours):
            logger.removeHandler(handler)
            logger.propagate = True
    assert passed.count("test.kazoo.client") == 2 and passed.count("test.ours") == 20
