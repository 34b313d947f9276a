"""Lua scripts: each lives in a ``.lua`` file beside the module that runs it, shared snippets are prepended.

A snippet holds what several scripts must compute the same way (the ``seeds`` score, a crawl's pending count), so it
is written once, the way ``master/bloom/lua/common.lua`` serves the Bloom filter's scripts. Numbers that Python
also uses are written once, in Python, and prepended as Lua locals (:func:`lua_constants`)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

LUA = Path(__file__).with_name("lua")  # snippets shared by every floor (seeds score)


def lua_constants(**values: int) -> str:
    """``local NAME = value`` lines (integers: Lua's default number format would round large ones)."""
    return "".join(f"local {name} = {int(value)}\n" for name, value in values.items())


@cache
def lua_source(path: Path, *snippets: Path, prefix: str = "") -> str:
    """The script at ``path`` with ``prefix`` (e.g. :func:`lua_constants`) and the ``snippets`` put before it."""
    return prefix + "".join(snippet.read_text() for snippet in snippets) + path.read_text()
