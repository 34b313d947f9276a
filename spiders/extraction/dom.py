"""Parse HTML and linearise it into text blocks: the "lines" of the line-block distribution method.

The seed's method strips tags and splits the source on newline characters, so a minified page (one physical line)
or a page that breaks lines inside a paragraph defeats it. Here the lines are *rendered* lines instead: a new
block starts at every block-level element and ``<br>``, whatever the source's layout. One iterative pass over the
lxml tree (no recursion, so 10^5 nested elements are fine) records for each block its text, its length, how much
of it is link text, and what its ancestors say about it (``<nav>``, ``class="comments"``, ...).
"""

from __future__ import annotations

import re

from lxml import etree

__all__ = ["Block", "linearise", "parse_html"]

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
        "button",
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
        "noscript",
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
# Text-free elements and inline formatting: removed (the former, tails kept) or unwrapped (the latter, text and
# children kept) in C before the walk, which then visits about a fifth fewer elements. <a> stays: link text counts.
VOID_TAGS = ("img", "picture", "source", "track", "wbr", "area", "param", "col", "colgroup")
INLINE_TAGS = (
    "span",
    "b",
    "i",
    "u",
    "s",
    "q",
    "em",
    "strong",
    "font",
    "small",
    "big",
    "sup",
    "sub",
    "abbr",
    "cite",
    "code",
    "mark",
    "time",
    "label",
    "strike",
    "tt",
    "var",
    "kbd",
    "ins",
    "del",
    "bdi",
    "bdo",
    "nobr",
    "dfn",
    "samp",
    "data",
)
_PAGE_TAGS = frozenset(("html", "body"))
HEADING_TAGS = frozenset(("h1", "h2", "h3", "h4", "h5", "h6"))
# Containers that are page furniture by definition (HTML5 sectioning semantics).
# <button> too: its label is interface, but it is not skipped outright, because libxml2 does not close an
# unclosed <button> at the next block and it can swallow the rest of the page.
BOILERPLATE_TAGS = frozenset(("nav", "aside", "footer", "button"))

# class/id words that mark furniture. ``_FURNITURE_PARTS`` match anywhere ("commentlist", "site-footer");
# ``_FURNITURE_WORDS`` only as whole words, being short ("nav" but not "canvas"). ``_KEEP_PARTS`` cancel them:
# a forum's "comment-body" or "post-content" is content. Plain substring tests: a big regex alternation costs
# ~25 µs per class string, this ~2 µs.
_FURNITURE_PARTS = (
    "comment",
    "komentar",  # Polish, Czech, Slovak, Croatian ... (komentarze, komentare)
    "kommentar",  # German, Scandinavian
    "disqus",
    "respond",
    "footer",
    "sidebar",
    "side-bar",
    "related",
    "recommend",
    "popular",
    "trending",
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
    "copyright",
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
_STATE_PREFIXES = ("has", "with", "no-", "is-", "show", "hide", "enable", "disable")
_WORD_SPLIT = re.compile(r"[^a-z0-9-]+")
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*>", re.IGNORECASE)


class Block:
    """One rendered line of text and the facts the scorer needs about it (a plain slotted class built in the
    walk's hot loop; the link density is computed once here, not on every read)."""

    __slots__ = ("chars", "element", "furniture", "heading", "index", "link_chars", "link_density", "tag", "text")

    def __init__(
        self,
        text: str,
        chars: int,
        link_chars: int,
        element: etree._Element,
        furniture: bool,
        index: int = 0,
    ) -> None:
        self.text = text
        self.chars = chars  # non-space characters
        self.link_chars = link_chars  # non-space characters inside <a>
        self.link_density = link_chars / chars if chars else 0.0
        self.element = element  # the nearest block-level element around the text
        self.tag = element.tag
        self.furniture = furniture  # inside <nav>/<aside>/<footer> or an element whose class/id says furniture
        self.heading = self.tag in HEADING_TAGS
        self.index = index

    def __repr__(self) -> str:
        return f"Block({self.index}, {self.tag}, {self.chars}, {self.text[:30]!r})"


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
        if word.startswith(_STATE_PREFIXES):  # "has-sidebar", "uix_hasCrumbs": a page state, not a region
            kind = 0
        elif any(map(word.__contains__, _KEEP_PARTS)):  # map over a bound method: no generator frame per part
            kind = _KEEP
        elif word in _FURNITURE_WORDS or any(map(word.__contains__, _FURNITURE_PARTS)):
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


# Hidden elements: their style and hidden attributes, found in C (an attribute-axis XPath is several times
# cheaper than a predicate over every element, or than reading two attributes per element in the walk).
_HIDING_ATTRIBUTES = etree.XPath("//@style|//@hidden")


def _drop_hidden(root: etree._Element) -> bool:
    """Remove hidden subtrees, keeping their tails (the text after a hidden element is visible). False when the
    whole page is hidden."""
    hidden = []
    for value in _HIDING_ATTRIBUTES(root):
        if value.attrname == "hidden" or (("none" in value or "hidden" in value) and _HIDDEN_STYLE.search(value)):
            hidden.append(value.getparent())
    for element in hidden:
        parent = element.getparent()
        if parent is None:
            if element is root:
                return False
            continue  # already inside a removed subtree
        tail = element.tail
        if tail:
            previous = element.getprevious()
            if previous is not None:
                previous.tail = (previous.tail or "") + tail
            else:
                parent.text = (parent.text or "") + tail
        parent.remove(element)
    return True


def linearise(root: etree._Element) -> list[Block]:
    """Walk the tree once and cut its visible text into blocks (see the module docstring).

    Prunes ``SKIP_TAGS`` and hidden subtrees from the tree first (found in C), so call it after reading
    ``<head>``. Per element the walk then reads only the tag, text and tail; block-level elements also have their
    class/id read (only they can hold a whole sidebar or comment thread)."""
    etree.strip_elements(root, *SKIP_TAGS, with_tail=False)
    if not _drop_hidden(root):
        return []
    etree.strip_elements(root, *VOID_TAGS, with_tail=False)
    etree.strip_tags(root, *INLINE_TAGS)
    blocks: list[Block] = []
    pieces: list[str] = []
    visible = False  # whether ``pieces`` hold more than white space
    link_chars = 0
    block_stack: list[etree._Element] = [root]  # the innermost open block-level element is the text's home
    furniture: set[etree._Element] = set()  # open elements that mark their subtree as furniture
    block_tags, boilerplate_tags, says_furniture = BLOCK_TAGS, BOILERPLATE_TAGS, _says_furniture

    def flush() -> None:  # called only when ``pieces`` hold visible text
        nonlocal link_chars, visible
        text = " ".join("".join(pieces).split())
        chars = len(text) - text.count(" ")
        blocks.append(Block(text, chars, min(link_chars, chars), block_stack[-1], bool(furniture), len(blocks)))
        pieces.clear()
        link_chars, visible = 0, False

    links: list[etree._Element] = []  # open <a> elements
    for event, element in etree.iterwalk(root, events=("start", "end")):
        if event == "start":
            tag = element.tag
            if tag in block_tags:
                if visible:
                    flush()
                elif pieces:  # white space between blocks: no call
                    pieces.clear()
                    link_chars = 0
                block_stack.append(element)
                if tag in boilerplate_tags:
                    furniture.add(element)
                elif tag not in _PAGE_TAGS:  # the page as a whole is never furniture, whatever its class says
                    names = element.get("class")
                    identifier = element.get("id")
                    if identifier:
                        names = f"{names} {identifier}" if names else identifier
                    if names and says_furniture(names):
                        furniture.add(element)
            elif tag == "a":
                links.append(element)
            text = element.text
            if text:
                pieces.append(text)
                if not visible and not text.isspace():
                    visible = True
                if links:
                    link_chars += len(text) - text.count(" ") - text.count("\n") - text.count("\t")
            continue
        # End of an element: identity tests against the open stacks, cheaper than reading the tag again.
        if element is block_stack[-1]:
            if visible:
                flush()
            elif pieces:
                pieces.clear()
                link_chars = 0
            block_stack.pop()
            if furniture:
                furniture.discard(element)
        elif links and element is links[-1]:
            links.pop()
        text = element.tail
        if text:
            pieces.append(text)
            if not visible and not text.isspace():
                visible = True
            if links:
                link_chars += len(text) - text.count(" ") - text.count("\n") - text.count("\t")
    if visible:
        flush()
    return blocks
