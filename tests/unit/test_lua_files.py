"""Lua lives in .lua files beside the module that runs it (messaging/scripts.py), not in Python strings."""

from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("floor", ["messaging", "frontier", "master", "spiders"])
def test_no_lua_inside_python(floor):
    inline = [str(path.relative_to(ROOT)) for path in (ROOT / floor).rglob("*.py") if "redis.call(" in path.read_text()]
    assert inline == [], f"move these scripts into .lua files: {inline}"


def test_the_moved_scripts_load_with_their_snippets():
    from frontier import registry
    from master import staging
    from messaging import clock, stats
    from messaging.kafka_monitor import batch

    assert clock.LUA_NOW_SECONDS.count("redis.call('TIME')") == 1
    for script in (registry._REGISTER, registry._HEARTBEAT, registry._COMPLETE, registry._RETIRE):
        assert "local now = tonumber(ARGV[1])" in script and "local minute = math.floor(now / 60)" in script
    assert "local now = tonumber(ARGV[1])" in stats._BUCKET_INCR and "HINCRBY" in stats._BUCKET_INCR
    assert batch.INTAKE_PUSH_LUA.startswith("local function push(KEYS, ARGV)\n")
    assert "local function seeds_score" in batch.INTAKE_PUSH_LUA
    assert "FENCED stale dispatcher epoch" in staging._STAGE
