"""The dispatcher's recount of a job's outstanding tasks reads every queue of the job: at most once a minute, and for a
job with many domains no faster than RECONCILE_DOMAINS_PER_SECOND of them a second (flat cost per page in the number
of sites). Real Redis."""

from __future__ import annotations

from typing import Any

import pytest

from master.dispatcher import RECONCILE_DOMAINS_PER_SECOND, RECONCILE_SECONDS, Dispatcher
from messaging import keys

pytestmark = pytest.mark.integration

T0 = 1_700_000_000.0


def outstanding(redis: Any, job: str) -> int:
    return int(redis.hget(keys.worker_activity(job), "out") or 0)


def test_a_job_with_many_domains_is_recounted_less_often_a_small_one_every_minute(cf: Any) -> None:
    redis = cf.redis()
    many = int(3 * RECONCILE_SECONDS * RECONCILE_DOMAINS_PER_SECOND)  # recounted every 3 minutes
    redis.sadd(keys.job_domains("broad"), *[f"h{n}.test" for n in range(many)])
    redis.sadd(keys.job_domains("narrow"), *[f"h{n}.test" for n in range(5)])
    for job in ("broad", "narrow"):
        redis.zadd(keys.queue(job, "h1.test"), {"a": 1, "b": 2})
        redis.zadd(keys.inflight(job, "h2.test"), {"c": 1})
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)))

    def drift_and_recount(now: float) -> dict[str, int]:
        for job in ("broad", "narrow"):
            dispatcher.registry.set_outstanding(job, 999)  # a lost completion: the hint drifted
        dispatcher.reconcile(now, ["broad", "narrow"])
        return {job: outstanding(redis, job) for job in ("broad", "narrow")}

    assert drift_and_recount(T0) == {"broad": 3, "narrow": 3}  # the first round recounts every job
    assert drift_and_recount(T0 + RECONCILE_SECONDS - 1) == {"broad": 999, "narrow": 999}
    assert drift_and_recount(T0 + RECONCILE_SECONDS) == {"broad": 999, "narrow": 3}
    assert drift_and_recount(T0 + 3 * RECONCILE_SECONDS - 1) == {"broad": 999, "narrow": 3}  # a minute later
    assert drift_and_recount(T0 + 3 * RECONCILE_SECONDS) == {"broad": 3, "narrow": 999}  # narrow: a second ago
