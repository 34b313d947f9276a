"""bench.redis_split's pure parts: MONITOR lines filed by script or key shape, keys made into shapes."""

from __future__ import annotations

import hashlib

import pytest

from bench.redis_split import STOP, CommandSplit, key_shape

pytestmark = pytest.mark.unit


def test_key_shapes_keep_the_template_and_drop_ids_and_domains() -> None:
    assert key_shape("j-17:{site.test}:queue") == "*:{d}:queue"
    assert key_shape("workers:{workers}:activity:fleet_1-99") == "workers:{workers}:activity:*"
    assert key_shape("seeds") == "seeds"


def test_a_script_call_and_the_commands_it_runs_are_filed_under_the_script() -> None:
    source = "return redis.call('GET', KEYS[1])"
    sha = hashlib.sha1(source.encode()).hexdigest()
    split = CommandSplit("redis://unused", names={sha: "frontier/lua/take.lua"})
    lines = [f'1.0 [0 127.0.0.1:5000] "evalsha" "{sha}" "1" "k"'.encode(),
             b'1.0 [0 lua] "get" "k"', b'1.0 [0 lua] "zadd" "z" "1" "m"',
             b'1.0 [0 127.0.0.1:5000] "eval" "return redis.call(\'GET\', KEYS[1])" "1" "k"',
             b'1.0 [0 lua] "get" "k"',
             b'1.0 [0 127.0.0.1:5000] "zrange" "j-1:{a.test}:queue" "0" "0"']
    assert all(split.file(line) for line in lines)
    assert not split.file(f'1.0 [0 127.0.0.1:5001] "echo" "{STOP}"'.encode())
    rows = {row["source"]: row for row in split.table(pages=2)}
    take = rows["script frontier/lua/take.lua"]
    assert take["calls_per_page"] == 1.0 and take["commands_per_page"] == 2.5  # 2 calls, 3 inner commands
    assert take["commands"] == {"evalsha": 0.5, "get": 1.0, "zadd": 0.5, "eval": 0.5}
    assert rows["ZRANGE *:{d}:queue"]["commands_per_page"] == 0.5
