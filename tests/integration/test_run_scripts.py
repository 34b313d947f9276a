"""messaging.scripts.run_scripts against a real Redis: one round trip for a pipeline of scripts, and a Redis that lost
its scripts (restarted, SCRIPT FLUSH) runs each call exactly once all the same."""

from __future__ import annotations

import pytest
from redis.exceptions import ResponseError

from messaging.scripts import run_scripts

pytestmark = pytest.mark.integration

INCR = "return redis.call('INCRBY', KEYS[1], ARGV[1])"
APPEND = "return redis.call('APPEND', KEYS[1], ARGV[1])"


def _calls(redis, name):
    stats = redis.info("commandstats")
    return stats.get(f"cmdstat_{name}", {}).get("calls", 0)


def test_scripts_run_in_one_pipeline_without_asking_whether_they_exist(cf):
    redis = cf.redis()
    incr, append = redis.register_script(INCR), redis.register_script(APPEND)
    assert run_scripts(redis, [(incr, ["n"], [2]), (append, ["s"], ["a"])]) == [2, 1]  # loaded on the way
    exists_before = _calls(redis, "script|exists")
    for _ in range(5):
        assert run_scripts(redis, [(incr, ["n"], [1]), (append, ["s"], ["b"]), (incr, ["n"], [10])])[0] > 2
    assert _calls(redis, "script|exists") == exists_before  # redis-py's pipeline would have asked 5 times
    assert int(redis.get("n")) == 2 + 5 * 11 and redis.get("s") == b"abbbbb"


def test_a_redis_that_lost_its_scripts_runs_each_call_once(cf):
    redis = cf.redis()
    incr, append = redis.register_script(INCR), redis.register_script(APPEND)
    run_scripts(redis, [(incr, ["n"], [1]), (append, ["s"], ["a"])])
    redis.script_flush()
    assert run_scripts(redis, [(incr, ["n"], [1]), (append, ["s"], ["b"]), (incr, ["n"], [5])]) == [2, 2, 7]
    assert int(redis.get("n")) == 7 and redis.get("s") == b"ab"  # nothing ran twice, nothing was skipped


def test_an_error_in_a_script_is_raised_after_the_others_ran(cf):
    redis = cf.redis()
    incr, broken = redis.register_script(INCR), redis.register_script("return redis.call('NOSUCHCOMMAND')")
    with pytest.raises(ResponseError):
        run_scripts(redis, [(incr, ["n"], [1]), (broken, [], []), (incr, ["n"], [1])])
    assert int(redis.get("n")) == 2
    assert run_scripts(redis, []) == []
