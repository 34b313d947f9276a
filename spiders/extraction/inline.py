"""The inline Markdown of a block element's own lines: links with absolute URLs, emphasis, code spans, images.

The extractor's blocks are the rendered lines of a page (``dom.py``): text cut at every block-level element and
``<br>``, whitespace collapsed. :func:`inline_lines` walks one block element's content again with the same cuts
and returns, per visible line, its plain text (built exactly as the walk builds a block's text, so the caller can
check that the two agree) and its Markdown. Nested block elements are not entered: their lines belong to them.
Inline formatting cut by a nested block is closed before the cut and opened again after it, as a browser shows
it. The walk is iterative (a page may nest inline elements thousands deep).
"""

from __future__ import annotations

import re
from urllib.parse import urljoin

from selectolax.lexbor import LexborNode

from spiders.extraction.markup import BLOCK_TAGS, BOILERPLATE_TAGS, PAGE_TAGS, SKIP_TAGS, VOID_TAGS

__all__ = ["Line", "escape_text", "inline_lines", "link_target"]

_TEXT_NODE, _COMMENT_NODE = 2, 4
_BREAK = frozenset(BLOCK_TAGS | BOILERPLATE_TAGS | PAGE_TAGS)
_SKIP = frozenset((*SKIP_TAGS, *VOID_TAGS))
# Markdown of inline elements: what opens and closes them. Strike-through is left as text (not CommonMark).
_MARKS = {"strong": "**", "b": "**", "em": "*", "i": "*", "cite": "*", "dfn": "*"}
_CODE_TAGS = frozenset(("code", "kbd", "samp", "tt"))

# Characters that would start Markdown syntax inside a line: backslash escapes (CommonMark 2.4) for ASCII
# punctuation. "<" only before what could open an HTML tag or an autolink, "&" only before an entity, "!" at the
# end of a text node (a link right after it would be read as an image).
_SPECIAL = re.compile(r"[\\`*_\[\]]|<(?=[A-Za-z/!?])|&(?=#?\w+;)|!$")
_LINE_START = re.compile(r"[#>+=~-]|(\d{1,9})([.)])(?=\s|$)")
_URL_UNSAFE = {" ": "%20", "(": "%28", ")": "%29", "<": "%3C", ">": "%3E", "\n": "", "\r": "", "\t": ""}
_URL_UNSAFE_RE = re.compile("[ ()<>\n\r\t]")
_NO_TARGET = ("javascript:", "vbscript:", "data:", "mailto:")
# ``<span><b>S</b></span><b>pecific</b>``: bold closed and opened again at once, through an element in between.
_ADJACENT_STRONG = re.compile(r"(?<![\\*])\*\*\*\*(?!\*)")


_SPECIAL_CHARS = frozenset("\\`*_[]<&!")


def escape_text(text: str) -> str:
    """``text`` with the characters that would start inline Markdown syntax escaped."""
    if _SPECIAL_CHARS.isdisjoint(text):  # most text: one pass in C, no regex
        return text
    return _SPECIAL.sub(r"\\\g<0>", text)


def escape_line_start(line: str) -> str:
    """Escape what would make a line a heading, quote, list item, thematic break, setext underline or fence."""
    match = _LINE_START.match(line)
    if match is None:
        return line
    if match.group(1):  # "1. " would start an ordered list
        return f"{match.group(1)}\\{line[match.end(1):]}"
    return "\\" + line


def link_target(href: str | None, base: str | None) -> str | None:
    """An absolute, Markdown-safe URL for ``href`` (``None`` for script links and empty ones)."""
    if not href:
        return None
    href = href.strip()
    if not href or href.lower().startswith(_NO_TARGET):
        return None
    if base:
        try:
            href = urljoin(base, href)
        except ValueError:  # an invalid IPv6 host and the like: no link, the text stays
            return None
    return _URL_UNSAFE_RE.sub(lambda m: _URL_UNSAFE[m.group(0)], href)


class Line:
    """One rendered line of a block element: its plain text as the extractor's walk builds it, its Markdown."""

    __slots__ = ("markdown", "text")

    def __init__(self, text: str, markdown: str) -> None:
        self.text = text
        self.markdown = markdown


class _Frame:
    """An open inline element: what wraps its content when it closes."""

    __slots__ = ("code", "kind", "last", "node", "parts", "target")

    def __init__(self, kind: str, node: LexborNode, target: str | None = None) -> None:
        self.kind = kind  # "a", "code", "**", "*" or "" (seen through)
        self.node = node
        self.parts: list[str] = []
        self.target = target
        self.last = ""  # the emphasis mark that the last part closes ("code": a code span), when nothing followed
        self.code = ""  # the last code span's content

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.last = ""

    def add_closed(self, child: _Frame) -> None:
        """Append a closed child; ``<b>r</b><b>ecycle</b>`` gives ``**recycle**``, not ``**r****ecycle**``."""
        wrapped = _wrap(child)
        mark = child.kind
        if mark == "code" and wrapped.startswith("`") and wrapped.endswith("`"):
            content = " ".join("".join(child.parts).split())
            if self.last == "code":  # `F``TAB` would not close: adjacent code spans are one
                content = self.code + content
                self.parts[-1] = _code_span(content)
            else:
                self.parts.append(wrapped)
            self.last, self.code = "code", content
        elif mark in ("*", "**") and wrapped.startswith(mark) and wrapped.endswith(mark):
            if self.last == mark:
                self.parts[-1] = self.parts[-1][: -len(mark)]
                wrapped = wrapped[len(mark) :]
            self.parts.append(wrapped)
            self.last = mark
        else:
            self.add(wrapped)

    def fresh(self) -> _Frame:
        return _Frame(self.kind, self.node, self.target)


def _code_span(content: str) -> str:
    content = " ".join(content.split())
    if not content:
        return ""
    fence = "`"
    while fence in content:
        fence += "`"
    pad = " " if content[0] == "`" or content[-1] == "`" else ""
    return f"{fence}{pad}{content}{pad}{fence}"


def _wrap(frame: _Frame) -> str:
    """The frame's content in its Markdown; leading and trailing space moved outside (``** a**`` is no emphasis)."""
    inner = "".join(frame.parts)
    if frame.kind == "code":
        stripped = inner.strip()
        lead, trail = inner[: len(inner) - len(inner.lstrip())], inner[len(inner.rstrip()) :]
        return f"{lead}{_code_span(stripped)}{trail}" if stripped else inner
    if not frame.kind:
        return inner
    stripped = inner.strip()
    if not stripped:
        return inner
    lead, trail = inner[: len(inner) - len(inner.lstrip())], inner[len(inner.rstrip()) :]
    if frame.kind == "a":
        return f"{lead}[{stripped}]({frame.target}){trail}"
    return f"{lead}{frame.kind}{stripped}{frame.kind}{trail}"


def _frame_for(node: LexborNode, tag: str, base: str | None, code_depth: int) -> _Frame:
    if code_depth:
        return _Frame("", node)  # inside a code span everything is literal
    if tag in _CODE_TAGS:
        return _Frame("code", node)
    if tag == "a":
        target = link_target(node.attributes.get("href"), base)
        return _Frame("a" if target else "", node, target)
    return _Frame(_MARKS.get(tag, ""), node)


def _image(node: LexborNode, base: str | None) -> str:
    attributes = node.attributes
    target = link_target(attributes.get("src"), base)
    if not target:
        return ""
    alt = " ".join((attributes.get("alt") or "").split())
    return f"![{escape_text(alt)}]({target})"


def inline_lines(element: LexborNode, base: str | None, images: bool = False) -> list[Line]:
    """The visible lines of ``element``'s own content (not of the block elements inside it), in order."""
    lines: list[Line] = []
    plain: list[str] = []  # pieces as the extractor's walk joins them
    visible = False
    root = _Frame("", element)
    frames = [root]
    code_depth = 0

    def cut() -> None:
        nonlocal visible, frames
        if visible:
            # Close the open inline elements into the line, and open them again (empty) for what follows.
            for depth in range(len(frames) - 1, 0, -1):
                frames[depth - 1].add_closed(frames[depth])
            text = " ".join("".join(plain).split())
            markdown = " ".join("".join(frames[0].parts).split())
            if "****" in markdown:
                markdown = _ADJACENT_STRONG.sub("", markdown)
            lines.append(Line(text, escape_line_start(markdown)))
            frames = [frame.fresh() for frame in frames]
        else:
            for frame in frames:
                frame.parts.clear()
                frame.last = ""
        plain.clear()
        visible = False

    node = element.first_child
    stack: list[LexborNode] = []  # the open inline elements' nodes, to climb back out of them
    while node is not None or stack:
        if node is None:  # done with an element's children: close it
            node = stack.pop()
            frame = frames.pop()
            if frame.kind == "code":
                code_depth -= 1
            frames[-1].add_closed(frame)
            node = node.next
            continue
        tag_id = node.tag_id
        if tag_id == _TEXT_NODE:
            if node.is_empty_text_node:
                if plain:
                    plain.append(" ")
                    frames[-1].add(" ")
            else:
                text = node.text_content or ""  # a text node's is never None
                plain.append(text)
                frames[-1].add(text if code_depth else escape_text(text))
                if not visible and not text.isspace():
                    visible = True
            node = node.next
            continue
        if tag_id == _COMMENT_NODE:
            node = node.next
            continue
        tag = node.tag
        if tag in _BREAK:
            cut()
            node = node.next
            continue
        if tag in _SKIP:
            if images and tag == "img":
                frames[-1].add(_image(node, base))
            node = node.next
            continue
        child = node.first_child
        if child is None:
            node = node.next
            continue
        frame = _frame_for(node, tag or "", base, code_depth)  # (a node with children is an element: it has a tag)
        if frame.kind == "code":
            code_depth += 1
        frames.append(frame)
        stack.append(node)
        node = child
    cut()
    return lines
