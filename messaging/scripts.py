"""Lua scripts: each lives in a ``.lua`` file beside the module that runs it, shared snippets are prepended; every
script of the repo is declared and loaded here, one way.

A snippet holds what several scripts must compute the same way (the ``seeds`` score, a crawl's pending count, the
Redis clock), so it is written once, the way ``frontier/bloom/lua/common.lua`` serves the Bloom filter's scripts.
Numbers that Python also uses are written once, in Python, and prepended as Lua locals (:func:`lua_constants`).

**The one loader.** A module declares each of its scripts once, at import, as a :class:`LuaScript` (its file, its
snippets, a prefix) and binds it to a client with :meth:`LuaScript.on`: redis-py's ``Script``, whose SHA is computed
here (no round trip), run with ``EVALSHA`` and loaded on ``NOSCRIPT``; one ``Script`` per script and client, kept as
long as the client lives. Calls run one of three ways: the bound script itself (one round trip; on a Redis Cluster
routed by its keys, which share a hash tag), :func:`run_scripts` (many calls in one pipeline of ``EVALSHA`` without
``SCRIPT EXISTS``, the ``NOSCRIPT`` ones run again) or :meth:`LuaScript.queue_eval` (``EVAL`` queued on a pipeline,
where a Redis Cluster pipeline refuses ``EVALSHA``)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from redis.exceptions import NoScriptError

from messaging.clients import RedisClient

LUA = Path(__file__).with_name("lua")  # snippets shared by every floor (seeds score, the Redis clock)


def lua_constants(**values: int) -> str:
    """``local NAME = value`` lines (integers: Lua's default number format would round large ones)."""
    return "".join(f"local {name} = {int(value)}\n" for name, value in values.items())


@cache
def lua_source(path: Path, *snippets: Path, prefix: str = "") -> str:
    """The script at ``path`` with ``prefix`` (e.g. :func:`lua_constants`) and the ``snippets`` put before it."""
    return prefix + "".join(snippet.read_text() for snippet in snippets) + path.read_text()


# client -> its bound scripts; weak: a client that is dropped takes its scripts with it
_BOUND: weakref.WeakKeyDictionary[Any, dict[LuaScript, Any]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class LuaScript:
    """One Lua script of the repo: ``prefix``, then the ``snippets``, then the file at ``path``."""

    path: Path
    snippets: tuple[Path, ...] = ()
    prefix: str = ""

    @property
    def source(self) -> str:
        return lua_source(self.path, *self.snippets, prefix=self.prefix)

    def on(self, redis: RedisClient) -> Any:
        """The script bound to ``redis`` (redis-py's ``Script``: call it with ``keys=``, ``args=``, ``client=``);
        the same object for every call with this client."""
        bound = _BOUND.get(redis)
        if bound is None:
            bound = _BOUND.setdefault(redis, {})
        script = bound.get(self)
        if script is None:
            script = bound.setdefault(self, redis.register_script(self.source))
        return script

    def queue_eval(self, pipe: Any, script_keys: list[str], args: list[Any]) -> None:
        """Queue a call on a pipeline as ``EVAL``: redis-py refuses ``EVALSHA`` (and ``eval()``) in a Redis Cluster
        pipeline; the server caches the compiled script by its hash either way."""
        pipe.execute_command("EVAL", self.source, len(script_keys), *script_keys, *args)


_DECLARED: list[LuaScript] = []  # every script declared so far, in order (declared_scripts)


def lua_script(path: Path, *snippets: Path, prefix: str = "") -> LuaScript:
    """Declare a script: the file at ``path`` with ``snippets`` (and ``prefix``) put before it."""
    script = LuaScript(path, snippets, prefix)
    _DECLARED.append(script)
    return script


def declared_scripts() -> tuple[LuaScript, ...]:
    """The scripts declared by the modules imported so far (a benchmark names a script by its SHA1 with these)."""
    return tuple(_DECLARED)


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
