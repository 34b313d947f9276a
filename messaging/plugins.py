"""Plugins by dotted path: the Kafka monitor's and the Redis monitor's chains (CRAWLFLEET_*_MONITOR_PLUGINS).

A neutral module of the messaging floor, so that neither monitor imports the other to load its plugins. Paths are
resolved with :func:`pkgutil.resolve_name` (``package.module.Class`` or ``package.module:Class``), the way Python's
own entry points are."""

from __future__ import annotations

import pkgutil
from collections.abc import Iterable
from typing import Any


def split_paths(paths: Iterable[str] | str) -> list[str]:
    """A comma-separated string of dotted paths (or a list of them) as a list, blanks dropped."""
    if isinstance(paths, str):
        paths = paths.split(",")
    return [path.strip() for path in paths if path.strip()]


def resolve(path: str, what: str = "plugin") -> Any:
    """The object a dotted path names; a ValueError that says which ``what`` could not be loaded and why."""
    try:
        return pkgutil.resolve_name(path)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(f"cannot load {what} {path!r}: {exc}") from exc


def load_plugins(paths: Iterable[str] | str) -> list[Any]:
    """Instantiate plugin classes from dotted paths, in order; a comma-separated string is split."""
    plugins = [resolve(path)() for path in split_paths(paths)]
    if not plugins:
        raise ValueError("the plugin chain is empty")
    return plugins
