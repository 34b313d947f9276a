"""Linearise a parsed page into text blocks: the "lines" of the line-block distribution method.

The seed's method strips tags and splits the source on newline characters, so a minified page (one physical line)
or a page that breaks lines inside a paragraph defeats it. Here the lines are *rendered* lines instead: a new
block starts at every block-level element and ``<br>``, whatever the source's layout (what each element means is
in ``markup.py``; parsing, in ``parse.py``). One iterative pass over the tree (no recursion, so 10^5 nested
elements are fine) records for each block its text, its length, how much of it is link text, and what its
ancestors say about it (``<nav>``, ``class="comments"``, ...); it also numbers the elements in document order
(:class:`Tree`), so that the block selection reasons about containers and siblings with integers instead of calls
into the parser.
"""

from __future__ import annotations

from selectolax.lexbor import LexborHTMLParser, LexborNode

from spiders.extraction.markup import (
    BLOCK_TAGS,
    BOILERPLATE_TAGS,
    BYLINE,
    FURNITURE,
    HEADING_TAGS,
    INLINE_TAGS,
    PAGE_TAGS,
    SKIP_TAGS,
    VOID_TAGS,
    element_names,
    names_kind,
)
from spiders.extraction.parse import prune

__all__ = ["Block", "Tree", "linearise"]


class Tree:
    """The page's elements numbered in document order (preorder), with their parents and subtree ends: element
    ``i``'s descendants are exactly ``i + 1 .. end[i] - 1``. Built by :func:`linearise` as it walks."""

    __slots__ = ("end", "nodes", "parent", "tag_ids")

    def __init__(self) -> None:
        self.nodes: list[LexborNode] = []  # the parser's node for each element (for names and attributes)
        self.tag_ids: list[int] = []  # lexbor's tag id: equal ids mean equal tag names within a page
        self.parent: list[int] = []  # index of the parent element, -1 for the root
        self.end: list[int] = []  # one past the last descendant

    def __len__(self) -> int:
        return len(self.nodes)

    def tag(self, index: int) -> str:
        return _tag_names.get(self.tag_ids[index]) or self.nodes[index].tag or ""  # (None only for non-elements)

    def classes(self, index: int) -> str | None:
        return self.nodes[index].attributes.get("class")

    def names(self, index: int) -> str:
        """The element's class and id, space-separated ("" for neither): what its author called it."""
        return element_names(self.nodes[index].attributes)

    def children(self, index: int) -> list[int]:
        children, child, end = [], index + 1, self.end[index]
        while child < end:
            children.append(child)
            child = self.end[child]
        return children

    def ancestors(self, index: int) -> list[int]:
        """``index`` and every element above it, innermost first."""
        chain = []
        while index >= 0:
            chain.append(index)
            index = self.parent[index]
        return chain


class Block:
    """One rendered line of text and the facts the scorer needs about it (a plain slotted class built in the
    walk's hot loop; the link density is computed once here, not on every read)."""

    __slots__ = (
        "byline",
        "chars",
        "element",
        "furniture",
        "heading",
        "index",
        "link_chars",
        "link_density",
        "panel",
        "tag",
        "text",
        "wrapped",
    )

    def __init__(
        self,
        text: str,
        chars: int,
        link_chars: int,
        element: int,
        tag: str,
        furniture: bool,
        index: int = 0,
        wrapped: bool = False,
    ) -> None:
        self.text = text
        self.chars = chars  # non-space characters
        self.link_chars = link_chars  # non-space characters inside <a>
        self.link_density = link_chars / chars if chars else 0.0
        self.element = element  # the nearest block-level element around the text (an index into the Tree)
        self.tag = tag
        self.furniture = furniture  # inside <nav>/<aside>/<footer> or an element whose class/id says furniture
        self.heading = tag in HEADING_TAGS
        self.index = index
        self.wrapped = wrapped  # its block element sits inside an <a>: a line of a whole-card link
        self.byline = False  # inside an element whose class/id says byline (author, date, author's bio)
        self.panel = False  # inside a hidden disclosure panel (a closed accordion's answer, an inactive tab)

    def __repr__(self) -> str:
        return f"Block({self.index}, {self.tag}, {self.chars}, {self.text[:30]!r})"


# What the walk does at an element, by lexbor tag id (ids of standard tags are fixed; a page's custom elements
# get ids of their own, looked up by name). Skipped and inline elements are left out of the Tree: the former
# with their content (their following text is a sibling node, visible), the latter keep their content in the
# line around them, as if their tags had been stripped.
_OTHER, _BLOCK, _BOILERPLATE, _PAGE, _LINK, _INLINE, _SKIP = range(7)
_TEXT_NODE, _COMMENT_NODE = 2, 4  # lexbor's ids of text and comment nodes
_STANDARD_IDS = 4096  # lexbor's own tag ids are below this; custom elements get per-document ids above it
_KIND_BY_NAME = {
    **{name: _BLOCK for name in BLOCK_TAGS},
    **{name: _BOILERPLATE for name in BOILERPLATE_TAGS},
    **{name: _PAGE for name in PAGE_TAGS},
    **{name: _INLINE for name in INLINE_TAGS},
    **{name: _SKIP for name in (*SKIP_TAGS, *VOID_TAGS)},
    "a": _LINK,
}
_tag_kinds: dict[int, int] = {}
_tag_names: dict[int, str] = {}


def _learn_tag(node: LexborNode, tag_id: int) -> int:
    name = node.tag or ""  # selectolax's None is for nodes that are not elements
    kind = _KIND_BY_NAME.get(name, _OTHER)
    if tag_id < _STANDARD_IDS:
        _tag_kinds[tag_id], _tag_names[tag_id] = kind, name
    return kind


def _disclosure(node: LexborNode) -> bool:
    """A ``<button>`` that opens a disclosure panel (an accordion's question, a tab's label: ``aria-expanded``
    or ``aria-controls``) is the panel's heading, not interface."""
    if node.tag != "button":
        return False
    attributes = node.attributes
    return "aria-expanded" in attributes or "aria-controls" in attributes


def _judge_open_blocks(tree: Tree, block_stack: list[int], furniture_stack: list[int | None]) -> int:
    """Fill in the furniture verdicts of the open blocks not judged yet (innermost last); return the innermost's:
    ``FURNITURE``, ``BYLINE`` inside a byline (furniture nested in it still counts as furniture), 0 neither.
    The root is always judged (a page element), so the search for the last judged block ends."""
    first = len(furniture_stack) - 1
    while (around := furniture_stack[first]) is None:
        first -= 1
    for position in range(first + 1, len(furniture_stack)):
        if around != FURNITURE:
            names = tree.names(block_stack[position])
            if names:
                kind = names_kind(names)
                around = kind if kind == FURNITURE or around != BYLINE else BYLINE
        furniture_stack[position] = around
    return around


def linearise(document: LexborHTMLParser) -> tuple[list[Block], Tree]:
    """Walk the tree once and cut its visible text into blocks (see the module docstring).

    Removes hidden subtrees and placeholder anchors from the document first (found in C), so call it after
    reading ``<head>``. The walk leaves out ``SKIP_TAGS`` and ``VOID_TAGS`` with their content and sees through
    ``INLINE_TAGS``; per node it reads only the tag id or the text; block-level elements holding text also have
    their class/id read (only they can hold a whole sidebar or comment thread)."""
    tree = Tree()
    root = document.root
    panels: list[LexborNode] = []
    if root is None or not prune(document, panels):
        return [], tree
    lines = _Lines(tree)
    _walk(root, tree, lines)
    if lines.visible and lines.block_stack:
        lines.flush()
    if panels:
        _mark_panels(lines.blocks, tree, panels)
    return lines.blocks, tree


class _Lines:
    """The lines cut so far, the one being read (its pieces of text), and the open blocks that are its home."""

    __slots__ = ("block_stack", "blocks", "furniture_stack", "link_chars", "links", "pieces", "tree", "visible",
                 "wrapped_stack")

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.blocks: list[Block] = []
        self.pieces: list[str] = []
        self.visible = False  # whether ``pieces`` hold more than white space
        self.link_chars = 0
        self.links = 0  # open <a> elements
        self.block_stack: list[int] = []  # the innermost open block-level element is the text's home
        # Per open block: whether it or a block around it is furniture; None until a line inside it needs to know
        # (class/id names are read and judged only for blocks that hold text, and not at all inside furniture).
        self.furniture_stack: list[int | None] = []  # FURNITURE, BYLINE in a byline, 0 neither
        self.wrapped_stack: list[bool] = []  # per open block: whether it was opened inside an <a> (a whole-card link)

    def text(self, node: LexborNode) -> None:
        """A text node: a piece of the line (white space only separates)."""
        if node.is_empty_text_node:  # white space (most text nodes): only a separator
            if self.pieces:
                self.pieces.append(" ")
            return
        text = node.text_content or ""  # a text node's is never None
        self.pieces.append(text)
        if not self.visible and not text.isspace():
            self.visible = True
        if self.links:
            self.link_chars += len(text) - text.count(" ") - text.count("\n") - text.count("\t")

    def end_line(self) -> None:
        """A block boundary: the line read so far becomes a block if it holds visible text."""
        if self.visible:
            self.flush()
        elif self.pieces:  # white space between blocks: no block
            self.pieces.clear()
            self.link_chars = 0

    def flush(self) -> None:  # called only when ``pieces`` hold visible text
        text = " ".join("".join(self.pieces).split())
        chars = len(text) - text.count(" ")
        home = self.block_stack[-1]
        furniture = self.furniture_stack[-1]
        if furniture is None:
            furniture = _judge_open_blocks(self.tree, self.block_stack, self.furniture_stack)
        tag = self.tree.tag(home)
        wrapped = self.wrapped_stack[-1]
        blocks = self.blocks
        block = Block(text, chars, min(self.link_chars, chars), home, tag, furniture == FURNITURE, len(blocks),
                      wrapped)
        block.byline = furniture == BYLINE
        blocks.append(block)
        self.pieces.clear()
        self.link_chars, self.visible = 0, False

    def open_block(self, node: LexborNode, index: int, kind: int) -> None:
        """A block-level element opens: the line before it ends, and it is the home of the text that follows."""
        self.end_line()
        furniture_stack = self.furniture_stack
        around = furniture_stack[-1] if furniture_stack else 0
        if around == FURNITURE or (kind == _BOILERPLATE and not _disclosure(node)):
            furniture_stack.append(FURNITURE)
        elif kind == _PAGE:  # the page as a whole is never furniture, whatever its class says
            furniture_stack.append(around)
        else:
            furniture_stack.append(None)
        self.block_stack.append(index)
        self.wrapped_stack.append(self.links > 0)

    def close_block(self) -> None:
        """A block-level element closes: the line inside it ends."""
        self.end_line()
        self.block_stack.pop()
        self.furniture_stack.pop()
        self.wrapped_stack.pop()


# What closing an element undoes.
_NOTHING, _A_BLOCK, _A_LINK = 0, 1, 3


def _walk(root: LexborNode, tree: Tree, lines: _Lines) -> None:
    """Visit every node once in document order (iteratively): number the elements in ``tree``, feed the text and
    the block boundaries to ``lines``."""
    nodes, tag_ids, parents, ends = tree.nodes, tree.tag_ids, tree.parent, tree.end
    tag_kinds = _tag_kinds
    # The stack holds, per open element: its node, its index in the Tree (-1: not in it), and what closing it undoes.
    stack: list[tuple[LexborNode, int, int]] = []
    node, parent = root, -1
    while True:
        tag_id = node.tag_id
        if tag_id == _TEXT_NODE:
            lines.text(node)
        elif tag_id != _COMMENT_NODE:
            kind = tag_kinds.get(tag_id)
            if kind is None:
                kind = _learn_tag(node, tag_id)
            if kind == _INLINE:
                child = node.first_child
                if child is not None:
                    stack.append((node, -1, _NOTHING))
                    node = child
                    continue
            elif kind != _SKIP:
                index = len(nodes)
                nodes.append(node)
                tag_ids.append(tag_id)
                parents.append(parent)
                ends.append(index + 1)
                closing = _NOTHING
                if kind == _LINK:
                    lines.links += 1
                    closing = _A_LINK
                elif kind:
                    lines.open_block(node, index, kind)
                    closing = _A_BLOCK
                child = node.first_child
                if child is not None:
                    stack.append((node, index, closing))
                    node, parent = child, index
                    continue
                _close(lines, closing)
        # Done with ``node``: on to its next sibling, closing the elements that end here.
        while stack:
            following = node.next
            if following is not None:
                node = following
                break
            node, index, closing = stack.pop()
            if index < 0:
                continue
            ends[index] = len(nodes)
            parent = parents[index]
            _close(lines, closing)
        else:
            break


def _close(lines: _Lines, closing: int) -> None:
    if closing == _A_LINK:
        lines.links -= 1
    elif closing:
        lines.close_block()


def _mark_panels(blocks: list[Block], tree: Tree, panels: list[LexborNode]) -> None:
    """Flag the blocks inside hidden disclosure panels (pages that have some only: one pass over the elements)."""
    numbers = {node.mem_id: index for index, node in enumerate(tree.nodes)}
    inside = [False] * (len(tree) + 1)
    for panel in panels:
        first = numbers.get(panel.mem_id)
        if first is not None:
            inside[first : tree.end[first]] = [True] * (tree.end[first] - first)
    for block in blocks:
        block.panel = inside[block.element]
