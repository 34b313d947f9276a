"""The spider types of the fleet, in one registry: a type's name, its Scrapy spider, its rule's JSON Schema and its
defaults. Every part that knows spider types reads them here: the crawl schema's ``spider_type`` enum (a test
checks ``messaging/schemas/crawl.json`` against this registry), request validation (the rule schema of the type),
the manager (its *Submit* form, the per-type throttle windows of its *Sites* page), ``crawlfleet worker --spider``,
and the local fleet (``crawlfleet up --workers-<type> N``, how many workers of each type it starts by default).

Adding a spider type: a spider class in ``spiders/spiders/`` (a :class:`spiders.spiders.base.FleetSpider` whose
``name`` is the type), its rule schema in ``messaging/schemas/rule-<type>.json``, an entry here, and the type in the
crawl schema's enum and ``allOf`` (see ``docs/extending.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class SpiderType:
    """One spider type: what crawls it and how its crawl requests are checked."""

    name: str
    spider: str  # dotted path of the Scrapy spider class (its ``name`` is ``name``)
    rule_schema: str  # the file in messaging/schemas/ a crawl request's ``rule`` is validated with
    summary: str  # one line for forms and help texts
    workers: int = 2  # workers of this type a local fleet starts by default
    # Scrapy settings of this type's worker processes (``crawlfleet worker`` sets them at the project's priority:
    # a spider's custom_settings and ``-s`` still win)
    settings: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


REGISTRY: Mapping[str, SpiderType] = MappingProxyType({spider_type.name: spider_type for spider_type in (
    SpiderType("list", "spiders.spiders.list.ListSpider", "rule-list.json",
               "list pages and their second pages, read with XPaths (the rule's first_page_xpath)"),
    SpiderType("universal", "spiders.spiders.universal.UniversalSpider", "rule-universal.json",
               "any site, followed with link rules (allow, deny, restrict_xpaths), main text extracted"),
)})

NAMES: tuple[str, ...] = tuple(REGISTRY)


def spider_type(name: str) -> SpiderType:
    """The registered type ``name``; a ValueError that lists the known types otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown spider type {name!r}: one of {', '.join(NAMES)}") from None


def rule_files() -> dict[str, str]:
    """Each type's rule schema file (``messaging/schemas/``)."""
    return {name: entry.rule_schema for name, entry in REGISTRY.items()}


def default_workers() -> dict[str, int]:
    """How many workers of each type a local fleet starts by default."""
    return {name: entry.workers for name, entry in REGISTRY.items()}
