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
    from frontier.client import lua
    from master import staging
    from messaging import stats
    from messaging.kafka_monitor import batch

    assert lua.ROBOTS_CLAIM.source.count("redis.call('TIME')") == 1
    for script in (registry.REGISTER, registry.HEARTBEAT, registry.COMPLETIONS, registry.RETIRE):
        source = script.source
        assert "local now = tonumber(ARGV[1])" in source and "local minute = math.floor(now / 60)" in source
    assert "local now = tonumber(ARGV[1])" in stats.BUCKET_INCR.source and "HINCRBY" in stats.BUCKET_INCR.source
    assert batch.INTAKE_PUSH.source.startswith("local function push(KEYS, ARGV)\n")
    assert "local function seeds_score" in batch.INTAKE_PUSH.source
    assert "FENCED stale dispatcher epoch" in staging.STAGE.source
    # the clock first, then the pacing snippet, then the step itself
    take = lua.TAKE.source
    assert take.index("redis.call('TIME')") < take.index("function pace_slot") < take.index("Politeness steps (seed")


def test_every_script_is_loaded_through_the_one_loader():
    """No module registers a script by itself: messaging.scripts.LuaScript.on is the one loader."""
    loaders = [str(path.relative_to(ROOT)) for floor in ("messaging", "frontier", "master", "spiders", "manager")
               for path in (ROOT / floor).rglob("*.py")
               if "register_script(" in path.read_text() and path != ROOT / "messaging" / "scripts.py"]
    assert loaders == [], f"declare these scripts with messaging.scripts.lua_script: {loaders}"


def test_a_script_is_bound_once_per_client():
    from frontier.client import lua

    class Client:
        registered = 0

        def register_script(self, source):
            Client.registered += 1
            return object()

    one, other = Client(), Client()
    assert lua.TAKE.on(one) is lua.TAKE.on(one) and lua.TAKE.on(other) is not lua.TAKE.on(one)
    assert Client.registered == 2
