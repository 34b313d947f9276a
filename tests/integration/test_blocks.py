"""Every worker hears of a block the moment it is set: frontier.blocks against the real Redis (and the cluster)."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from deploy.procs import wait_for
from frontier.blocks import BlockListener, parse_block
from frontier.client import block_domain
from messaging import keys

pytestmark = pytest.mark.integration
WAIT = 10.0  # seconds a published block may take to arrive (it takes milliseconds)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextmanager
def listening(redis, clock: Clock) -> Iterator[tuple[BlockListener, queue.Queue[tuple[str, float]]]]:
    heard: queue.Queue[tuple[str, float]] = queue.Queue()
    listener = BlockListener(redis, lambda domain, until: heard.put((domain, until)), clock=clock).start()
    try:
        assert listener.subscribed.wait(WAIT), "the listener never subscribed"
        yield listener, heard
    finally:
        listener.stop()
        assert not listener._thread.is_alive()


def test_parse_block_reads_the_message_and_refuses_a_malformed_one() -> None:
    assert parse_block(b"news.example 2500000") == ("news.example", 2.5)
    assert parse_block("xn--bcher-kva.example 0") == ("xn--bcher-kva.example", 0.0)
    assert parse_block(b"news.example soon") is None
    assert parse_block(b"2500000") is None
    assert parse_block(b"news.example -5") is None


@pytest.mark.parametrize("services", ["cf", "cf_cluster"])
def test_a_block_reaches_every_listener_once_per_extension(services, request) -> None:
    redis = request.getfixturevalue(services).redis()
    clock = Clock()
    with listening(redis, clock) as (_, first), listening(redis, clock) as (_, second):
        block_domain(redis, "busy.example", 30)
        block_domain(redis, "busy.example", 1)  # shorter: the block stays where it was, nothing is published
        block_domain(redis, "busy.example", 60)
        for heard in (first, second):
            domain, until = heard.get(timeout=WAIT)
            assert (domain, until) == ("busy.example", pytest.approx(clock.now + 30, abs=1))
            domain, until = heard.get(timeout=WAIT)  # in order: the next message is the extension, not the short one
            assert (domain, until) == ("busy.example", pytest.approx(clock.now + 60, abs=1))
            assert heard.empty()


def test_a_listener_whose_connection_drops_subscribes_again(cf) -> None:
    redis = cf.redis()
    with listening(redis, Clock()) as (listener, heard):
        assert redis.client_kill_filter(_type="pubsub") >= 1
        wait_for(lambda: listener._outage.outages == 1, WAIT, "the listener noticed the dropped connection")
        wait_for(lambda: listener.subscribed.is_set(), WAIT, "the listener subscribed again")
        block_domain(redis, "again.example", 5)
        assert heard.get(timeout=WAIT)[0] == "again.example"
        assert redis.exists(keys.block("again.example"))


def test_a_user_refused_the_channel_still_blocks_the_domain(cf) -> None:
    redis = cf.redis()
    user = f"nochannel-{cf.name}"[:60]
    redis.acl_setuser(user, enabled=True, passwords=["+secret"], commands=["+@all"], keys=["*"], channels=[],
                      reset_channels=True)
    try:
        where = redis.connection_pool.connection_kwargs
        limited = redis.__class__(host=where["host"], port=where["port"], db=where.get("db", 0), username=user,
                                  password="secret")  # the same server and database, as that user
        with pytest.raises(Exception, match=r"(?i)no permissions"):
            limited.publish(keys.BLOCKS_CHANNEL, "refused.example 1")
        until = block_domain(limited, "refused.example", 30)
        assert int(redis.get(keys.block("refused.example"))) / 1e6 == until
        limited.close()  # the block is set all the same: the workers learn of it at their next reservation
    finally:
        redis.acl_deluser(user)
