"""A new worker that finishes everything it is given within its first minute is not held back by the window cap.

Found by killing one of two workers mid-crawl: the survivor had joined less than a minute before, finished its
share within that (partial, unmeasured) minute, and looked "new" (initial rate) from then on, while the window
counted what it had been given: dispatch stopped for ten minutes with 400 tasks in ``seeds``.
"""

from __future__ import annotations

import pytest

from bench.sim_worker import SimWorker
from master.dispatcher import DispatchConfig, Dispatcher
from messaging import keys
from messaging.tasks import Task, push_seeds

pytestmark = pytest.mark.integration

T0 = 1_700_000_040.0  # a minute boundary


def test_a_fast_new_worker_keeps_getting_work_in_its_first_minute(cf) -> None:
    redis = cf.redis()
    push_seeds(redis, [Task(url=f"http://d{i % 20}.test/{i}", crawlid="c", spider_type="list") for i in range(3000)])
    worker = SimWorker(redis, "fast", speed=60_000)
    worker.register(T0 + 5)
    dispatcher = Dispatcher(redis, int(redis.incr(keys.MASTER_EPOCH)), DispatchConfig(initial_rate=60))
    given = 0
    for second in range(6, 56):
        now = T0 + second
        given += dispatcher.round(now).total
        worker.step(now, 1.0)  # finishes all it holds: 1,000 a second
    # the initial rate alone (60/min, headroom 1.2, 10-minute window) would have stopped it at 720 tasks
    assert given == 3000 and redis.zcard(keys.SEEDS) == 0
