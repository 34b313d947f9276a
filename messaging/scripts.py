"""Lua scripts: each lives in a ``.lua`` file beside the module that runs it, shared snippets are prepended.

A snippet holds what several scripts must compute the same way (the ``seeds`` score, a crawl's pending count), so it
is written once, the way ``frontier/bloom/lua/common.lua`` serves the Bloom filter's scripts. Numbers that Python
also uses are written once, in Python, and prepended as Lua locals (:func:`lua_constants`)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from redis.exceptions import NoScriptError

from messaging.clients import RedisClient

LUA = Path(__file__).with_name("lua")  # snippets shared by every floor (seeds score)


def lua_constants(**values: int) -> str:
    """``local NAME = value`` lines (integers: Lua's default number format would round large ones)."""
    return "".join(f"local {name} = {int(value)}\n" for name, value in values.items())


@cache
def lua_source(path: Path, *snippets: Path, prefix: str = "") -> str:
    """The script at ``path`` with ``prefix`` (e.g. :func:`lua_constants`) and the ``snippets`` put before it."""
    return prefix + "".join(snippet.read_text() for snippet in snippets) + path.read_text()


def is_cluster(redis: RedisClient) -> bool:
    from redis.cluster import RedisCluster

    return isinstance(redis, RedisCluster)


def run_scripts(redis: RedisClient, calls: list[tuple[Any, list[str], list[Any]]]) -> list[Any]:
    """Run script calls in one pipeline (a plain Redis) or one by one (a Redis Cluster routes each by its keys).

    On a plain Redis the pipeline holds only ``EVALSHA`` calls: redis-py's own pipeline would first ask ``SCRIPT
    EXISTS`` in a round trip of its own, every time (the worker's feed runs several such pipelines a page). A call
    whose script Redis does not know (restarted, ``SCRIPT FLUSH``) answers ``NOSCRIPT`` and did not run, so those
    calls alone run again, once their scripts are loaded. The first error among the replies is raised, as a
    pipeline does."""
    if not calls:
        return []
    if is_cluster(redis):
        return [script(keys=k, args=a, client=redis) for script, k, a in calls]
    replies = _evalsha(redis, calls)
    missing = [index for index, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if missing:
        for script in {id(calls[index][0]): calls[index][0] for index in missing}.values():
            script.sha = redis.script_load(script.script)
        for index, reply in zip(missing, _evalsha(redis, [calls[index] for index in missing]), strict=True):
            replies[index] = reply
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return replies


def _evalsha(redis: RedisClient, calls: list[tuple[Any, list[str], list[Any]]]) -> list[Any]:
    pipe = redis.pipeline(transaction=False)
    for script, k, a in calls:
        k = list(k or ())
        pipe.evalsha(script.sha, len(k), *k, *(a or ()))
    return pipe.execute(raise_on_error=False)
