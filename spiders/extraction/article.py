"""Rules for an article (any page not spread content), applied to the final selection (after the spread decision)."""

from __future__ import annotations

from spiders.extraction.dom import Block, Tree
from spiders.extraction.shop import form_lines

__all__ = ["without_forms"]


def without_forms(
    selected: list[Block], blocks: list[Block], tree: Tree, headline: int | None, share: float
) -> list[Block]:
    """An article's lines inside a ``<form>`` are interface: sign-up boxes ("Subscribe to …", "Email Address",
    "By submitting your email …"), search and filter fields, polls. Not a form that holds the headline or more
    than ``share`` of the page's text (ASP.NET wraps whole pages in one). Applied to the final selection of any
    page not taken as spread content (an article, a forum thread, a service page: a contact or reply box), and of
    a discussion whatever it was taken for; not inside the selection: a listing's filter form must not make its
    selection look like running text."""
    inside = form_lines(blocks, tree, headline, share)
    return [block for block in selected if block.index not in inside] if inside else selected
