"""The worker's lease upkeep on real Redis and on the 3-node cluster: an expired lease of this job goes back into its
queue (and its domain into the ready index), asking only the domains takes were sent to, not every domain of the job."""

from __future__ import annotations

from typing import Any

import pytest

from frontier.client import FrontierClient
from frontier.config_watch import StaticSiteConfig
from frontier.politeness import Politeness
from messaging import keys
from messaging.clients import as_text
from messaging.clock import RedisClock
from spiders.worker.leases import LeaseKeeper
from tests.integration.test_ready_index import FAST, dispatch

pytestmark = pytest.mark.integration

LEASE = 0.3


@pytest.fixture(params=["single", pytest.param("cluster", marks=pytest.mark.cluster)])
def svc(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("cf" if request.param == "single" else "cf_cluster")


class AskedDomains(FrontierClient):
    """The real client, recording which domains each expiry check asked."""

    asked: list[list[str]]

    def requeue_expired_many(self, domains: Any, now: float | None = None) -> Any:
        self.asked.append(list(domains))
        return super().requeue_expired_many(domains, now)


def test_an_expired_lease_goes_back_and_only_domains_taken_from_are_asked(svc: Any) -> None:
    redis = svc.redis()
    dispatch(redis, "w", domains=40, per_domain=1)
    engine = AskedDomains(redis, "w", "list", "10.0.0.1", Politeness(StaticSiteConfig(FAST)), lease_seconds=LEASE)
    engine.asked = []
    keeper = LeaseKeeper(engine, LEASE)
    keeper.attempted(["d3.test"], 100.0)
    # taken a second ago on the Redis clock, which the expiry check reads: its lease has run out (not waited for)
    lease = engine.take("d3.test", now=RedisClock(redis).now() - 1).lease  # its reply "lost": the keeper lacks it
    assert lease is not None and not redis.exists(keys.queue("w", "d3.test"))
    redis.zrem(keys.ready("w"), "d3.test")  # as the walk does for a drained domain

    assert keeper.requeue_expired(100.0 + LEASE) == 0 and engine.asked == []  # too soon for any lease to expire
    assert keeper.requeue_expired(101.0) == 1
    assert engine.asked == [["d3.test"]]  # not the 39 other domains of the job
    assert redis.zrange(keys.queue("w", "d3.test"), 0, -1) == [lease.member.encode()]
    assert redis.zscore(keys.ready("w"), "d3.test") is not None  # back in the ready index
    assert keeper.requeue_expired(200.0) == 0 and len(engine.asked) == 1  # covered: forgotten


def test_after_an_outage_the_leases_nobody_holds_go_back_and_the_held_ones_stay(svc: Any) -> None:
    redis = svc.redis()
    dispatch(redis, "w", domains=3, per_domain=2)
    engine = FrontierClient(redis, "w", "list", "10.0.0.1", Politeness(StaticSiteConfig(FAST)), lease_seconds=600)
    keeper = LeaseKeeper(engine, 600)
    keeper.attempted(["d0.test", "d1.test"], 100.0)
    held = engine.take("d0.test").lease
    lost_reply = engine.take("d0.test").lease  # Redis ran the take, its reply never came: the worker lacks it
    undone = engine.take("d1.test").lease  # completed, then undone by a Redis that lost its last writes
    assert held is not None and lost_reply is not None and undone is not None
    keeper.held[held.member] = (held, 100.0)
    assert keeper.requeue_orphans() == 2  # both at once, their deadlines ten minutes away
    assert redis.zrange(keys.inflight("w", "d0.test"), 0, -1) == [held.member.encode()]
    assert redis.zrange(keys.queue("w", "d0.test"), 0, -1) == [lost_reply.member.encode()]
    assert undone.member.encode() in redis.zrange(keys.queue("w", "d1.test"), 0, -1)  # beside the one never taken
    assert not redis.exists(keys.inflight("w", "d1.test"))
    assert {as_text(d) for d in redis.zrange(keys.ready("w"), 0, -1)} >= {"d0.test", "d1.test"}
    assert engine.complete([held]) == [held]  # the held lease is still the worker's to complete
    assert keeper.requeue_orphans() == 0
