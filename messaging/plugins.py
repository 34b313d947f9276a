"""Plugins by dotted path: the Kafka monitor's and the Redis monitor's chains (CRAWLFLEET_*_MONITOR_PLUGINS).

A neutral module of the messaging floor, so that neither monitor imports the other to load its plugins. Paths are
resolved with :func:`pkgutil.resolve_name` (``package.module.Class`` or ``package.module:Class``), the way Python's
own entry points are."""

from __future__ import annotations

import pkgutil
from collections.abc import Iterable
from typing import Any


def load_plugins(paths: Iterable[str] | str) -> list[Any]:
    """Instantiate plugin classes from dotted paths, in order; a comma-separated string is split."""
    if isinstance(paths, str):
        paths = [path.strip() for path in paths.split(",") if path.strip()]
    plugins = []
    for path in paths:
        try:
            cls = pkgutil.resolve_name(path)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ValueError(f"cannot load plugin {path!r}: {exc}") from exc
        plugins.append(cls())
    if not plugins:
        raise ValueError("the plugin chain is empty")
    return plugins
