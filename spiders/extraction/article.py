"""Rules for an article under its headline, applied to the final selection (after the spread-content decision)."""

from __future__ import annotations

from spiders.extraction.dom import Block, Tree
from spiders.extraction.shop import form_lines

__all__ = ["without_forms"]


def without_forms(
    selected: list[Block], blocks: list[Block], tree: Tree, headline: int | None, share: float
) -> list[Block]:
    """An article's lines inside a ``<form>`` are interface: sign-up boxes ("Subscribe to …", "Email Address",
    "By submitting your email …"), search and filter fields, polls. Not a form that holds the headline or more
    than ``share`` of the page's text (ASP.NET wraps whole pages in one). Applied once the page is known to be an
    article: a listing's filter form must not make its selection look like running text."""
    inside = form_lines(blocks, tree, headline, share)
    return [block for block in selected if block.index not in inside] if inside else selected
