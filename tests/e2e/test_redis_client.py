"""The Redis client of every component (``messaging.clients.redis_client``) on a real Redis (issue 37, item 3): a call
whose connection failed after Redis ran it is not sent again behind the caller's back, and the connections a Redis
restart left closed — the pool's, and the Bloom filter's quiet line that never returns to it — are replaced before
anything is written to them, so the first calls after a restart just work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from redis.exceptions import TimeoutError as RedisTimeout

from deploy.procs import free_port, kill_hard, port_free, port_open, wait_for
from deploy.services.redis import redis_server_bin
from frontier.bloom import BloomSpec, open_filter
from messaging import clients
from messaging.settings import load
from messaging.tasks import Task, push_seeds

pytestmark = pytest.mark.e2e

# Counts its call, then keeps Redis busy past the client's socket timeout: the answer never reaches the caller.
COUNT_THEN_SPIN = """redis.call('INCR', KEYS[1])
local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start > tonumber(ARGV[1])
return 1"""


def test_a_call_redis_ran_but_never_answered_is_not_sent_again(cf: Any) -> None:
    """``redis.Redis()``'s default policy sends it up to ten times more (the script then ran 9 times here); a second
    run of a commit's call answers what the first one did ("there already", "seen")."""
    impatient = cf.redis(socket_timeout=0.1)
    with pytest.raises(RedisTimeout):
        impatient.eval(COUNT_THEN_SPIN, 1, "calls", 300_000)
    observer = cf.redis()
    assert wait_for(lambda: observer.get("calls"), 5, "the script to end") == b"1"


def test_the_first_calls_after_a_redis_restart_use_fresh_connections(procs: Any, tmp_path: Path) -> None:
    port = free_port()
    argv = [redis_server_bin(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path), "--save", "",
            "--appendonly", "yes", "--daemonize", "no", "--logfile", ""]
    server = procs.start(argv, {}, name="redis", service=True)
    redis = clients.redis_client(load({"CRAWLFLEET_REDIS_URL": f"redis://127.0.0.1:{port}/0"}))
    wait_for(redis.ping, 20, "the test's Redis")
    bloom = open_filter(redis, "restart", BloomSpec(capacity=1000))
    task = Task(url="http://site.test/", crawlid="c", spider_type="list")
    assert bloom.add(["http://site.test/a"]) == [True]  # the quiet line (the filter's counts) is open now
    assert push_seeds(redis, [task]) == 1

    kill_hard(server.pid)
    wait_for(lambda: port_free(port), 20, "Redis's port to be released")
    procs.start(argv, {}, name="redis-restarted", service=True)
    wait_for(lambda: port_open(port) and _answers(port), 30, "the restarted Redis")  # not through `redis`'s pool

    # each first call: no error, and what the AOF kept is there
    assert bloom.add(["http://site.test/a", "http://site.test/b"]) == [False, True]
    assert push_seeds(redis, [task]) == 0
    pipe = redis.pipeline(transaction=False)
    pipe.incr("n")
    pipe.get("n")
    assert pipe.execute() == [1, b"1"]
    redis.close()


def _answers(port: int) -> bool:
    probe = clients.redis_client(load({"CRAWLFLEET_REDIS_URL": f"redis://127.0.0.1:{port}/0"}))
    try:
        return bool(probe.ping())
    finally:
        probe.close()
