"""Parse HTML and linearise it into text blocks: the "lines" of the line-block distribution method.

The seed's method strips tags and splits the source on newline characters, so a minified page (one physical line)
or a page that breaks lines inside a paragraph defeats it. Here the lines are *rendered* lines instead: a new
block starts at every block-level element and ``<br>``, whatever the source's layout. One iterative pass over the
lxml tree (no recursion, so 10^5 nested elements are fine) records for each block its text, its length, how much
of it is link text, and what its ancestors say about it (``<nav>``, ``class="comments"``, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lxml import etree

__all__ = ["Block", "Document", "linearise", "parse_html"]

# Elements that end the current rendered line. <br> too: many Chinese CMSs write whole articles as one <div>
# with <br><br> between paragraphs.
BLOCK_TAGS = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "br",
        "caption",
        "center",
        "dd",
        "details",
        "dialog",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "html",
        "legend",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
    ]
)
# Never visible, or never main text.
SKIP_TAGS = frozenset(
    [
        "applet",
        "audio",
        "button",
        "canvas",
        "datalist",
        "embed",
        "head",
        "iframe",
        "input",
        "link",
        "map",
        "math",
        "meta",
        "object",
        "option",
        "script",
        "select",
        "style",
        "svg",
        "template",
        "textarea",
        "title",
        "video",
    ]
)
HEADING_TAGS = frozenset(("h1", "h2", "h3", "h4", "h5", "h6"))
# Containers that are page furniture by definition (HTML5 sectioning semantics).
BOILERPLATE_TAGS = frozenset(("nav", "aside", "footer", "noscript"))

# class/id words that mark furniture. ``_FURNITURE_PARTS`` match anywhere ("commentlist", "site-footer");
# ``_FURNITURE_WORDS`` only as whole words, being short ("nav" but not "canvas"). ``_KEEP_PARTS`` cancel them:
# a forum's "comment-body" or "post-content" is content. Plain substring tests: a big regex alternation costs
# ~25 µs per class string, this ~2 µs.
_FURNITURE_PARTS = (
    "comment",
    "disqus",
    "reply",
    "replies",
    "respond",
    "discuss",
    "footer",
    "sidebar",
    "side-bar",
    "widget",
    "related",
    "recommend",
    "popular",
    "trending",
    "share",
    "sharing",
    "social",
    "breadcrumb",
    "crumbs",
    "navbar",
    "navigation",
    "menu",
    "masthead",
    "banner",
    "sponsor",
    "promo",
    "advert",
    "pagination",
    "pager",
    "copyright",
    "newsletter",
    "subscribe",
    "signup",
    "cookie",
    "consent",
    "gdpr",
    "modal",
    "popup",
    "outbrain",
    "taboola",
    "toolbar",
    "taglist",
    "tag-list",
    "authorbio",
    "author-bio",
    "morestories",
    "more-stories",
    "readmore",
    "read-more",
    "alsoread",
    "also-read",
    "hotnews",
    "hot-news",
)
_FURNITURE_WORDS = frozenset(("nav", "ad", "ads", "tag", "tags", "foot", "xgxw", "xgwz", "rmtj"))
_KEEP_PARTS = ("article", "content", "main", "postbody", "post-body", "entry", "story", "text", "body")
_WORD_SPLIT = re.compile(r"[^a-z0-9-]+")
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*>", re.IGNORECASE)


@dataclass(slots=True)
class Block:
    """One rendered line of text and the facts the scorer needs about it."""

    text: str
    chars: int  # non-space characters
    link_chars: int  # non-space characters inside <a>
    element: etree._Element  # the nearest block-level element around the text
    tag: str
    furniture: bool  # inside <nav>/<aside>/<footer> or an element whose class/id says furniture
    heading: bool
    in_table: bool
    depth: int
    index: int = 0

    @property
    def link_density(self) -> float:
        return self.link_chars / self.chars if self.chars else 0.0


@dataclass(slots=True)
class Document:
    root: etree._Element | None
    blocks: list[Block] = field(default_factory=list)


_PARSER_OPTIONS = {"remove_comments": True, "remove_pis": True, "no_network": True, "huge_tree": False}


def parse_html(html: str) -> etree._Element | None:
    """Parse (recovering from anything) into an lxml tree; None when there is nothing to parse."""
    html = _XML_DECLARATION.sub("", html, count=1).replace("\x00", "")
    if not html.strip():
        return None
    try:
        root = etree.fromstring(html, etree.HTMLParser(**_PARSER_OPTIONS))
    except (etree.ParserError, etree.XMLSyntaxError, ValueError):
        return None
    return root


_FURNITURE, _KEEP = 1, 2
_word_kinds: dict[str, int] = {}  # class/id word -> 0, _FURNITURE or _KEEP; words repeat across pages


def _word_kind(word: str) -> int:
    kind = _word_kinds.get(word)
    if kind is None:
        if any(part in word for part in _KEEP_PARTS):
            kind = _KEEP
        elif word in _FURNITURE_WORDS or any(part in word for part in _FURNITURE_PARTS):
            kind = _FURNITURE
        else:
            kind = 0
        if len(_word_kinds) < 100_000:
            _word_kinds[word] = kind
    return kind


_names_verdicts: dict[str, bool] = {}  # whole class/id strings repeat within and across pages


def _says_furniture(names: str) -> bool:
    """Whether class/id names mark furniture: some word does and no word says content ("comment-body")."""
    verdict = _names_verdicts.get(names)
    if verdict is None:
        kinds = 0
        for word in _WORD_SPLIT.split(names.lower()):
            kinds |= _word_kind(word)
        verdict = kinds == _FURNITURE
        if len(_names_verdicts) < 100_000:
            _names_verdicts[names] = verdict
    return verdict


def _is_hidden(element: etree._Element, keys: list[str]) -> bool:
    if "hidden" in keys:
        return True
    style = element.get("style") if "style" in keys else None
    return bool(style and ("none" in style or "hidden" in style) and _HIDDEN_STYLE.search(style))


def linearise(root: etree._Element) -> list[Block]:
    """Walk the tree once and cut its visible text into blocks (see the module docstring).

    Prunes ``SKIP_TAGS`` from the tree (in C) first, so call it after reading ``<head>``."""
    etree.strip_elements(root, *SKIP_TAGS, with_tail=False)
    blocks: list[Block] = []
    pieces: list[str] = []
    link_chars = 0
    block_stack: list[etree._Element] = [root]  # the innermost open block-level element is the text's home
    furniture: set[etree._Element] = set()  # open elements that mark their subtree as furniture
    hidden: set[etree._Element] = set()  # elements whose subtree is skipped (their tail is still visible)
    table_depth = link_depth = 0
    block_tags, boilerplate_tags = BLOCK_TAGS, BOILERPLATE_TAGS

    def flush() -> None:
        nonlocal link_chars
        text = " ".join("".join(pieces).split())
        pieces.clear()
        if text:
            chars = len(text) - text.count(" ")
            element = block_stack[-1]
            tag = element.tag
            blocks.append(
                Block(
                    text=text,
                    chars=chars,
                    link_chars=min(link_chars, chars),
                    element=element,
                    tag=tag,
                    furniture=bool(furniture),
                    heading=tag in HEADING_TAGS,
                    in_table=table_depth > 0,
                    depth=len(block_stack),
                    index=len(blocks),
                )
            )
        link_chars = 0

    walker = etree.iterwalk(root, events=("start", "end"))
    for event, element in walker:
        tag = element.tag
        if event == "start":
            keys = element.keys()
            if keys and _is_hidden(element, keys):
                walker.skip_subtree()
                hidden.add(element)
                continue
            if tag in block_tags:
                if pieces:
                    flush()
                block_stack.append(element)
                # Only block-level containers can hold a whole sidebar or comment thread; skipping the inline
                # majority (a, span, img...) halves the cost of the class/id test.
                if "class" in keys or "id" in keys:
                    names = (element.get("class") or "") + " " + (element.get("id") or "")
                    if _says_furniture(names):
                        furniture.add(element)
            if tag in boilerplate_tags:
                furniture.add(element)
            if tag == "a":
                link_depth += 1
            elif tag == "table":
                table_depth += 1
            text = element.text
            if text:
                pieces.append(text)
                if link_depth:
                    link_chars += len("".join(text.split()))
            continue
        if hidden and element in hidden:
            hidden.discard(element)
        else:
            if tag in block_tags:
                if pieces:
                    flush()
                block_stack.pop()
            if tag == "a":
                link_depth -= 1
            elif tag == "table":
                table_depth -= 1
            if furniture:
                furniture.discard(element)
        text = element.tail
        if text:
            pieces.append(text)
            if link_depth:
                link_chars += len("".join(text.split()))
    if pieces:
        flush()
    return blocks
