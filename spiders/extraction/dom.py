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
    _walk(root, lines)
    if panels:
        _mark_panels(lines.blocks, tree, panels)
    return lines.blocks, tree


class _Lines:
    """The lines cut so far, the pieces of text of the one being read, and the open blocks that are its home.
    The walk keeps its counters in local variables (it runs once per node: an attribute or a method call per
    node is most of its cost) and hands them here only when a line is cut."""

    __slots__ = ("block_stack", "blocks", "furniture_stack", "pieces", "tree", "wrapped_stack")

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.blocks: list[Block] = []
        self.pieces: list[str] = []  # the text of the line being read; white space between nodes as " "
        self.block_stack: list[int] = []  # the innermost open block-level element is the text's home
        # Per open block: whether it or a block around it is furniture; None until a line inside it needs to know
        # (class/id names are read and judged only for blocks that hold text, and not at all inside furniture).
        self.furniture_stack: list[int | None] = []  # FURNITURE, BYLINE in a byline, 0 neither
        self.wrapped_stack: list[bool] = []  # per open block: whether it was opened inside an <a> (a whole-card link)

    def cut(self, link_chars: int) -> None:
        """The pieces read hold visible text: they become a block (and are cleared)."""
        pieces = self.pieces
        text = " ".join("".join(pieces).split())
        pieces.clear()
        chars = len(text) - text.count(" ")
        home = self.block_stack[-1]
        furniture = self.furniture_stack[-1]
        if furniture is None:
            furniture = _judge_open_blocks(self.tree, self.block_stack, self.furniture_stack)
        blocks = self.blocks
        block = Block(text, chars, min(link_chars, chars), home, self.tree.tag(home), furniture == FURNITURE,
                      len(blocks), self.wrapped_stack[-1])
        block.byline = furniture == BYLINE
        blocks.append(block)


# What closing an element undoes.
_NOTHING, _A_BLOCK, _A_LINK = 0, 1, 3


def _walk(root: LexborNode, lines: _Lines) -> None:
    """Visit every node once in document order (iteratively): number the elements in the Tree, cut the text into
    lines at block boundaries. A line's text is cut when the next block-level element opens or closes."""
    tree = lines.tree
    nodes, tag_ids, parents, ends = tree.nodes, tree.tag_ids, tree.parent, tree.end
    pieces, block_stack, furniture_stack, wrapped_stack = (
        lines.pieces, lines.block_stack, lines.furniture_stack, lines.wrapped_stack)
    tag_kinds = _tag_kinds
    visible = False  # whether ``pieces`` hold more than white space
    link_chars = 0  # non-space characters of ``pieces`` inside <a>
    links = 0  # open <a> elements
    # The stack holds, per open element: its node, its index in the Tree (-1: not in it), and what closing it undoes.
    stack: list[tuple[LexborNode, int, int]] = []
    node, parent = root, -1
    while True:
        tag_id = node.tag_id
        index, closing = -1, _NOTHING  # what finishing ``node`` undoes: nothing for text, skipped and inline ones
        if tag_id == _TEXT_NODE:
            if node.is_empty_text_node:  # white space (most text nodes): only a separator
                if pieces:
                    pieces.append(" ")
            else:
                text = node.text_content or ""  # a text node's is never None
                pieces.append(text)
                if not visible and not text.isspace():
                    visible = True
                if links:
                    link_chars += len(text) - text.count(" ") - text.count("\n") - text.count("\t")
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
                if kind == _LINK:
                    links += 1
                    closing = _A_LINK
                elif kind:  # a block-level element opens: the line before it ends, and it is the following text's home
                    if visible:
                        lines.cut(link_chars)
                        visible = False
                    elif pieces:  # white space between blocks: no block
                        pieces.clear()
                    link_chars = 0
                    around = furniture_stack[-1] if furniture_stack else 0
                    if around == FURNITURE or (kind == _BOILERPLATE and not _disclosure(node)):
                        furniture_stack.append(FURNITURE)
                    elif kind == _PAGE:  # the page as a whole is never furniture, whatever its class says
                        furniture_stack.append(around)
                    else:
                        furniture_stack.append(None)
                    block_stack.append(index)
                    wrapped_stack.append(links > 0)
                    closing = _A_BLOCK
                child = node.first_child
                if child is not None:
                    stack.append((node, index, closing))
                    node, parent = child, index
                    continue
        # ``node`` is finished: close it, then on to its next sibling, closing the elements that end there.
        while True:
            if index >= 0:
                ends[index] = len(nodes)
                parent = parents[index]
                if closing == _A_LINK:
                    links -= 1
                elif closing:  # a block-level element closes: the line inside it ends
                    if visible:
                        lines.cut(link_chars)
                        visible = False
                    elif pieces:
                        pieces.clear()
                    link_chars = 0
                    block_stack.pop()
                    furniture_stack.pop()
                    wrapped_stack.pop()
            if not stack:  # the root is finished
                if visible and block_stack:  # text after the last block closed (never with an <html> root)
                    lines.cut(link_chars)
                return
            following = node.next
            if following is not None:
                node = following
                break
            node, index, closing = stack.pop()


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
