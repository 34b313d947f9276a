"""``render: auto``: does a statically fetched page lack what the rule needs, so that a browser must render it?

Pure functions of the page's HTML and the rule's result on it (:class:`spiders.rules.PageResult`), no Scrapy engine.
A page is rendered when

- ``shell``: it is a known client-rendered shell: little visible text, scripts, and an empty mount point
  (``<div id="root"></div>``, ``#app``, ``#__next``, ``#__nuxt``...) or a ``<noscript>`` asking for JavaScript;
- ``required``: an item the rule made misses one of the rule's ``required`` fields;
- ``text``: a content page's items stand on less than ``min_text`` characters of visible text (no main text);
- ``empty``: the rule found nothing at all (no item, no link) on a page that runs scripts.

:func:`outcome` measures a page (items complete, links, text) so that a render can be compared with the static
fetch it replaced: a render that found nothing more was in vain (:mod:`spiders.render.learn` learns from that).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lxml import html as lxml_html

SHELL_IDS = frozenset({"root", "app", "__next", "__nuxt", "___gatsby", "svelte", "q-app", "main-app", "spa-root"})
_INVISIBLE = ("script", "style", "noscript", "template")
_SPACES = re.compile(r"\s+")
_JAVASCRIPT = re.compile(r"javascript", re.IGNORECASE)


@dataclass(frozen=True)
class PageFacts:
    text: int  # characters of visible text (whitespace collapsed)
    scripts: int
    empty_mount: bool  # an element with a known mount-point id and nothing in it
    noscript_js: bool  # a <noscript> that mentions JavaScript


@dataclass(frozen=True)
class Outcome:
    complete: int  # items with every required field
    incomplete: int
    links: int
    text: int

    def improves_on(self, other: Outcome, min_text: int) -> bool:
        """Whether this page gave more than ``other`` did: complete items, links, or a main text it lacked."""
        return (self.complete > other.complete or self.links > other.links
                or (other.text < min_text <= self.text) or self.text >= other.text + min_text)


def page_facts(text: str) -> PageFacts:
    """What the HTML says about itself: visible text, scripts, an empty mount point."""
    if not text.strip():
        return PageFacts(0, 0, False, False)
    try:
        root = lxml_html.document_fromstring(text)
    except (ValueError, lxml_html.etree.ParserError):
        return PageFacts(0, 0, False, False)
    scripts = len(root.xpath("//script"))
    noscript_js = any(_JAVASCRIPT.search(node.text_content() or "") for node in root.xpath("//noscript"))
    empty_mount = any(_is_empty(node) for node in root.xpath("//*[@id]") if node.get("id") in SHELL_IDS)
    for node in root.xpath("|".join(f"//{tag}" for tag in _INVISIBLE)):
        node.drop_tree()
    body = root.find("body")
    visible = _SPACES.sub(" ", (body if body is not None else root).text_content()).strip()
    return PageFacts(len(visible), scripts, empty_mount, noscript_js)


def _is_empty(node: Any) -> bool:
    return len(node) == 0 and not (node.text or "").strip()


def is_shell(facts: PageFacts, min_text: int) -> bool:
    return facts.scripts > 0 and facts.text < min_text and (facts.empty_mount or facts.noscript_js)


def missing_required(items: Iterable[Mapping[str, Any]], required: Iterable[str]) -> int:
    """Items that lack (or have empty) one of the required fields."""
    names = tuple(required)
    return sum(1 for item in items if any(_empty(item.get(name)) for name in names)) if names else 0


def _empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (list, tuple)):
        return not any(not _empty(v) for v in value)
    return False


def needs_render(facts: PageFacts, result: Any, required: Iterable[str], content: bool, min_text: int) -> str:
    """Why the static page must be rendered (``shell``, ``required``, ``text``, ``empty``), or ``""``."""
    if is_shell(facts, min_text):
        return "shell"
    if missing_required(result.items, required):
        return "required"
    if content and result.items and facts.text < min_text:
        return "text"
    if not result.items and not result.links and facts.scripts:
        return "empty"
    return ""


def outcome(facts: PageFacts, result: Any, required: Iterable[str]) -> Outcome:
    required = tuple(required)
    incomplete = missing_required(result.items, required)
    return Outcome(len(result.items) - incomplete, incomplete, len(result.links), facts.text)
