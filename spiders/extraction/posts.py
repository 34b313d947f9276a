"""Forum threads, answers, reviews: the sibling items that together are a page's main content (``blocks.py`` asks
when the article's container sits in one of them)."""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING

from spiders.extraction.dom import Block, Tree

if TYPE_CHECKING:
    from spiders.extraction.params import Params

__all__ = ["mostly_furniture", "owner", "repeated_items"]

_TABLE_TAGS = frozenset(("table", "tbody", "thead", "tfoot", "tr", "td", "th"))


def repeated_items(
    blocks: list[Block], values: list[float], container: int, tree: Tree, params: Params
) -> list[tuple[int, int]] | None:
    """Forum threads, answers, reviews: when the article's container is (inside) one of several siblings with the
    same tag and class (or class words holding one another's: ``_same_kind``) that each hold running text, those
    siblings together are the main content. The class must be set (bare <div>s and table cells are layout) and
    most siblings must hold text (a row of cards does not). Returns those items as element ranges (first, end) in
    document order, or None."""
    element = container
    for _ in range(params.repeat_levels):
        parent = tree.parent[element]
        tag = tree.tag(element)
        if parent < 0 or tag in ("body", "html"):
            return None
        names = tree.classes(element)
        if names and tag not in _TABLE_TAGS:
            tag_id = tree.tag_ids[element]
            own = frozenset(names.split()) if params.repeat_related else None
            items = [
                (sibling, tree.end[sibling])
                for sibling in tree.children(parent)
                if tree.tag_ids[sibling] == tag_id and _same_kind(names, own, tree.classes(sibling))
            ]
            if len(items) >= params.repeat_min_items:
                text = [0] * len(items)
                starts = [first for first, _ in items]
                for i, block in enumerate(blocks):
                    item = owner(items, starts, block.element)
                    if item >= 0 and values[i] > 0 and block.link_density <= params.link_density_max:
                        text[item] += block.chars
                posts = sum(1 for chars in text if chars >= params.repeat_min_chars)
                if posts >= params.repeat_min_items and posts >= params.repeat_share * len(items):
                    return items
        element = parent
    return None


def _same_kind(names: str, own: frozenset[str] | None, other: str | None) -> bool:
    """Whether a sibling's class names make it an item of the same kind: the same names, or (with ``own``, the
    element's class words) class words that hold the element's or are held by them. A thread's first post
    carries extra classes ("message message-threadStarterPost message--post ..." among "message message--post
    ..."), and so do a featured answer or a highlighted review; siblings that each carry words of their own
    ("card featured" beside "card promo") do not count."""
    if other == names:
        return True
    if own is None or not other:
        return False
    theirs = frozenset(other.split())
    return bool(theirs) and (theirs <= own or own <= theirs)


def mostly_furniture(blocks: list[Block], items: list[tuple[int, int]], starts: list[int], own: int) -> bool:
    """Whether most of the text in ``items`` other than the item ``own`` is in furniture."""
    furniture = other = 0
    for block in blocks:
        item = owner(items, starts, block.element)
        if item >= 0 and item != own:
            other += block.chars
            if block.furniture:
                furniture += block.chars
    return 2 * furniture > other


def owner(items: list[tuple[int, int]], starts: list[int], element: int) -> int:
    """The position of the item whose subtree holds ``element``, or -1."""
    position = bisect_right(starts, element) - 1
    return position if position >= 0 and element < items[position][1] else -1
