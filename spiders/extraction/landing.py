"""Landing and service pages: the hero banner that holds the headline is the page's opening, not furniture."""

from __future__ import annotations

from copy import copy

from spiders.extraction.dom import Block, Tree
from spiders.extraction.markup import BOILERPLATE_TAGS, FURNITURE, FURNITURE_PART, names_kind

__all__ = ["freed_hero"]

_BANNER = frozenset(("banner",))


def _named_furniture(tree: Tree, element: int, forgiven: frozenset[str] = frozenset()) -> bool:
    """Whether the element's class/id names mark furniture, by some furniture word other than ``forgiven``."""
    names = tree.names(element)
    if not names or names_kind(names) != FURNITURE:
        return False
    return not forgiven or not set(FURNITURE_PART.findall(names.lower())) <= forgiven


def freed_hero(blocks: list[Block], tree: Tree, headline: int | None, max_share: float) -> list[Block]:
    """A service page opens with a hero banner ("o-pageHeroBanner", "hero-banner") holding its ``<h1>`` and its
    intro paragraphs; "banner" is a furniture word (cookie and promotion banners), so the page's opening was
    read as furniture. When the headline heading is furniture only by the class/id of elements around it (no
    ``<nav>``/``<aside>``/``<footer>``), the outermost such element is not furniture: the blocks inside it that
    no furniture tag, nor an element named by another furniture word ("social-share" in "hero-banner"), holds
    lose the flag (copies; the caller's blocks are untouched).
    Not on a page that is mostly furniture: there the selection ignores the flags, since the headline is one.
    O(blocks inside the banner × their depth below it); nothing on a page whose headline is not furniture."""
    if headline is None or not blocks[headline].furniture or not blocks[headline].heading:
        return blocks
    furniture_chars = sum(block.chars for block in blocks if block.furniture)
    if furniture_chars > max_share * sum(block.chars for block in blocks):
        return blocks  # the flags say nothing on this page (a misnamed page-wide wrapper): the selection ignores them
    top = -1
    for element in tree.ancestors(blocks[headline].element):
        if tree.tag(element) in BOILERPLATE_TAGS:
            return blocks
        if _named_furniture(tree, element):
            top = element
    if top < 0:
        return blocks
    end = tree.end[top]
    # The banner's own parts repeat its word ("o-pageHeroBanner__wrapper"): only other furniture words count.
    forgiven = frozenset(FURNITURE_PART.findall(tree.names(top).lower()))
    if forgiven != _BANNER:
        return blocks  # a headline in a "sidebar" or a "masthead" is a layout's oddity, not a page's opening
    judged: dict[int, bool] = {top: False}  # element -> whether furniture stands between it and ``top``
    freed = list(blocks)
    for position, block in enumerate(blocks):
        if not block.furniture or not top <= block.element < end:
            continue
        chain = []
        element = block.element
        while element not in judged:
            chain.append(element)
            element = tree.parent[element]
        furniture = judged[element]
        for element in reversed(chain):
            furniture = furniture or tree.tag(element) in BOILERPLATE_TAGS or _named_furniture(tree, element, forgiven)
            judged[element] = furniture
        if not furniture:
            block = copy(block)
            block.furniture = False
            freed[position] = block
    return freed
