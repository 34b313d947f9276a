"""The kinds of request the fleet takes on Kafka, in one registry (as :mod:`messaging.spider_types` is for spiders).

One entry says everything about a kind: its JSON Schema, how a message is recognised as one (an ``action`` value, or
a field of its own), the Kafka monitor plugin that stores it, the Redis monitor plugin that answers it (none for a
crawl request, which the workers carry out) and the ``crawlfleet`` command that asks it. Everything else reads the
registry: request validation (:func:`messaging.validation.detect_kind` and the schemas it compiles), both monitors'
default plugin chains, the command line and ``docs/extending.md``'s recipe.

Kinds outside this package (a team's own) are registered by dotted path with CRAWLFLEET_REQUEST_KINDS
(``package.module:KIND``, a :class:`RequestKind`): :func:`use_settings` adds them in each process that reads
requests (the monitors, the command line), so the monitors' plugin chains and the validator know them too.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from messaging.plugins import resolve, split_paths

CRAWL, INFO, STATS, SITE, STOP, PAUSE, RESUME = "crawl", "info", "stats", "site", "stop", "pause", "resume"
SITE_ACTIONS = ("rate", "rate-remove", "blacklist", "blacklist-remove")
_KAFKA = "messaging.kafka_monitor.plugins."
_REDIS = "messaging.redis_monitor.plugins."


@dataclass(frozen=True)
class RequestKind:
    """One kind of request: how it is recognised, checked, stored, answered and asked."""

    name: str  # the kind: its answers' ``kind`` and its stream (``requests:{requests}:<name>``)
    schema: str  # a file of messaging/schemas/, or an absolute path (a kind outside this package)
    summary: str  # one line for help texts
    kafka_plugin: str  # dotted path of its Kafka monitor plugin (``messaging.kafka_monitor.plugins.Plugin``)
    actions: tuple[str, ...] = ()  # recognised by ``action`` being one of these …
    fields: tuple[str, ...] = ()  # … or, without an ``action``, by any of these fields
    redis_plugin: str | None = None  # dotted path of its Redis monitor plugin; None: nobody answers it there
    cli: str | None = None  # ``module:attribute`` of its click command (the deploy floor; loaded by name)

    def __post_init__(self) -> None:
        if bool(self.actions) == bool(self.fields):
            raise ValueError(f"request kind {self.name!r}: recognised by actions or by fields (exactly one of them)")


_BUILT_IN = (
    RequestKind(CRAWL, "crawl.json",
                "start a crawl: its start URL, spider type and rule, or one's own project and spider",
                _KAFKA + "crawl.CrawlPlugin", fields=("url", "rule", "spider_type", "project", "spider"),
                cli="deploy.cli_messaging:submit"),
    RequestKind(INFO, "info.json", "how far a crawl has got", _KAFKA + "info.InfoPlugin", actions=(INFO,),
                redis_plugin=_REDIS + "info.InfoPlugin", cli="deploy.cli_messaging:info"),
    RequestKind(STATS, "stats.json", "the counters of a module", _KAFKA + "stats.StatsPlugin", fields=(STATS,),
                redis_plugin=_REDIS + "stats.StatsPlugin", cli="deploy.cli_messaging:stats"),
    RequestKind(SITE, "site.json", "a site's rate or blacklist entry, set or removed (ZooKeeper)",
                _KAFKA + "zookeeper.ZookeeperPlugin", actions=SITE_ACTIONS,
                redis_plugin=_REDIS + "zookeeper.ZookeeperPlugin", cli="deploy.cli_site:site"),
    RequestKind(STOP, "stop.json", "stop a crawl: purge its tasks and refuse new ones", _KAFKA + "stop.StopPlugin",
                actions=(STOP,), redis_plugin=_REDIS + "stop.StopPlugin", cli="deploy.cli_messaging:stop"),
    RequestKind(PAUSE, "pause.json", "pause a crawl: nothing of it is fetched, its tasks wait parked",
                _KAFKA + "pause.PausePlugin", actions=(PAUSE,), redis_plugin=_REDIS + "pause.PausePlugin",
                cli="deploy.cli_pause:pause"),
    RequestKind(RESUME, "resume.json", "resume a paused crawl where it was", _KAFKA + "pause.ResumePlugin",
                actions=(RESUME,), redis_plugin=_REDIS + "pause.ResumePlugin", cli="deploy.cli_pause:resume"),
)
_registry: dict[str, RequestKind] = {kind.name: kind for kind in _BUILT_IN}


class _Invalidates(Protocol):
    def __call__(self) -> None: ...


_listeners: list[_Invalidates] = []  # caches built from the registry (the validators), cleared when it changes


def on_change(listener: _Invalidates) -> None:
    """Call ``listener`` whenever a kind is registered (e.g. to drop compiled validators)."""
    _listeners.append(listener)


def kinds() -> tuple[RequestKind, ...]:
    """Every registered kind, built-in ones first, in the order they were registered."""
    return tuple(_registry.values())


def kind(name: str) -> RequestKind:
    """The registered kind ``name``; a ValueError that lists the known kinds otherwise."""
    try:
        return _registry[name]
    except KeyError:
        raise ValueError(f"unknown request kind {name!r}: one of {', '.join(_registry)}") from None


def register(new: RequestKind) -> None:
    """Add a kind. Its name, its actions and its fields must not be another kind's (a message has one kind)."""
    if new.name in _registry:
        if _registry[new.name] == new:
            return  # the same entry registered again (a module imported twice): nothing changes
        raise ValueError(f"request kind {new.name!r} is registered already")
    for other in _registry.values():
        shared = set(new.actions) & set(other.actions) or set(new.fields) & set(other.fields)
        if shared:
            raise ValueError(f"request kind {new.name!r} would be recognised as {other.name!r} too "
                             f"(both by {', '.join(sorted(shared))})")
    _registry[new.name] = new
    for listener in _listeners:
        listener()


def unregister(name: str) -> None:
    """Remove a kind that :func:`register` added (tests, and an extension's own teardown); built-ins stay."""
    if any(kind.name == name for kind in _BUILT_IN):
        raise ValueError(f"request kind {name!r} is built in")
    if _registry.pop(name, None) is not None:
        for listener in _listeners:
            listener()


def register_paths(paths: str | Iterable[str]) -> list[RequestKind]:
    """Register the kinds named by dotted paths (``package.module:KIND``), comma-separated or as a list."""
    added = []
    for path in split_paths(paths):
        entry = resolve(path, "request kind (CRAWLFLEET_REQUEST_KINDS)")
        if not isinstance(entry, RequestKind):
            raise ValueError(f"{path!r} is a {type(entry).__name__}, not a messaging.request_kinds.RequestKind")
        register(entry)
        added.append(entry)
    return added


def use_settings(settings: Any) -> None:
    """Register the kinds CRAWLFLEET_REQUEST_KINDS names, in a process that reads requests."""
    register_paths(settings.request_kinds)


def detect(message: dict[str, Any]) -> RequestKind | None:
    """The kind of a JSON object by its fields (seed 4.1.2.1): its ``action``, else the first kind one of whose
    fields it has; None when ``action`` is unknown or no kind's field is there."""
    if "action" in message:
        return next((entry for entry in _registry.values() if message["action"] in entry.actions), None)
    return next((entry for entry in _registry.values() if any(name in message for name in entry.fields)), None)


def actions() -> Iterator[str]:
    """Every known ``action`` value, in registry order."""
    for entry in _registry.values():
        yield from entry.actions


def schema_files() -> dict[str, str]:
    """Each kind's schema file."""
    return {entry.name: entry.schema for entry in _registry.values()}


def kafka_plugins() -> str:
    """The Kafka monitor's default chain: every kind's plugin, comma-separated, in registry order."""
    return ",".join(dict.fromkeys(entry.kafka_plugin for entry in _registry.values()))


def redis_plugins() -> str:
    """The Redis monitor's default plugins: every kind that is answered there."""
    return ",".join(dict.fromkeys(entry.redis_plugin for entry in _registry.values() if entry.redis_plugin))


def commands() -> Iterator[str]:
    """The ``module:attribute`` of every kind's command."""
    for entry in _registry.values():
        if entry.cli:
            yield entry.cli


def _added() -> list[RequestKind]:
    built_in = {entry.name for entry in _BUILT_IN}
    return [entry for entry in _registry.values() if entry.name not in built_in]


def kafka_chain(settings: Any) -> list[str]:
    """The Kafka monitor's plugins: CRAWLFLEET_KAFKA_MONITOR_PLUGINS, then those of the kinds added by setting."""
    use_settings(settings)
    chain = split_paths(settings.kafka_monitor_plugins)
    return chain + [path for path in dict.fromkeys(entry.kafka_plugin for entry in _added()) if path not in chain]


def redis_chain(settings: Any) -> list[str]:
    """The Redis monitor's plugins: CRAWLFLEET_REDIS_MONITOR_PLUGINS, then those of the kinds added by setting."""
    use_settings(settings)
    chain = split_paths(settings.redis_monitor_plugins)
    extra = dict.fromkeys(entry.redis_plugin for entry in _added() if entry.redis_plugin)
    return chain + [path for path in extra if path not in chain]
