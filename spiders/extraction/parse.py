"""Parse HTML as a browser does (lexbor, through ``selectolax``), bounded against pathological markup, and prune
what a reader never sees before the text is linearised."""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

from spiders.extraction.markup import VOID_TAGS

__all__ = ["parse_html", "prune"]

_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)

# An HTML5 tree builder checks the open elements on every start tag, so a page nesting 10^5 elements costs it
# 10^10 steps. Browsers and libxml2 cap the depth (Blink at 512, libxml2 at 256); so does this (256), by dropping
# the tags beyond that depth before parsing, which leaves their text where the deepest kept element is. Lexbor
# also takes quadratic time over the options of one <select>: option tags are dropped too (their text is never
# main text). Only pages with many tags are scanned (a count in C first), so ordinary pages go untouched.
# The walk after parsing costs about 10 us per element in Python, so a page is read up to its _MAX_TAGS-th start
# tag (five times the most tags of any page of the dev set): 10^5 list items would take over a second.
_MAX_DEPTH = 256
_SCAN_TAGS = 5000
_MAX_TAGS = 40_000
_TAG = re.compile(r"<(/?)([A-Za-z][^\s/>]*)[^>]*?(/?)>")
# Void elements, and those whose end tag may be left out (closed by their next sibling): their depth is unknown.
_NON_NESTING = frozenset(
    (*VOID_TAGS, "br", "hr", "input", "meta", "link", "base", "embed", "html", "head", "body", "p", "li", "dt", "dd")
).union(("caption", "thead", "tbody", "tfoot", "tr", "td", "th", "rt", "rp"))
_OPTION_TAGS = frozenset(("option", "optgroup"))


def _bounded(html: str) -> str:
    """``html`` without the tags that would make parsing it superlinear, and cut before the ``_MAX_TAGS + 1``-th
    start tag it keeps (see above)."""
    if html.count("<") < _SCAN_TAGS:
        return html
    depth, kept, last, opened = 0, [], 0, 0
    for match in _TAG.finditer(html):
        closing = match.group(1)
        name = match.group(2).lower()
        if name in _OPTION_TAGS:
            kept.append(html[last : match.start()])
            last = match.end()
            continue
        if not match.group(3) and name not in _NON_NESTING:  # "<path/>": SVG closes it at once
            dropped = depth > _MAX_DEPTH or (not closing and depth == _MAX_DEPTH)
            depth = max(0, depth - 1) if closing else depth + 1
            if dropped:
                kept.append(html[last : match.start()])
                last = match.end()
                continue
        if not closing:
            opened += 1
            if opened > _MAX_TAGS:  # the rest of the page is left out
                kept.append(html[last : match.start()])
                return "".join(kept)
    if not kept:
        return html
    kept.append(html[last:])
    return "".join(kept)


def parse_html(html: str) -> LexborHTMLParser | None:
    """Parse (as a browser does, recovering from anything) into a lexbor document; None when there is nothing
    to parse."""
    if not html or html.isspace():
        return None
    if "\x00" in html:
        html = html.replace("\x00", "")
    parser = LexborHTMLParser(_bounded(html))
    return parser if parser.root is not None else None


# Hidden elements (closed dialogs and modals too) and placeholder anchors, found by the parser's CSS engine in one
# pass (in C); a style is then checked word by word in Python.
_PRUNE_SELECTOR = (
    '[hidden], [style*="none" i], [style*="hidden" i], a[name]:not([href]), dialog:not([open]), [aria-modal="true" i]'
)
_ANCHOR_ATTRIBUTES = frozenset(("name", "id"))


# React's streaming server rendering sends late parts of a page as <div hidden id="S:n"> at the end of the body
# and moves each into place (its <template id="B:n"> placeholder) as soon as the page loads: shown, not hidden.
_STREAMED_SEGMENT = re.compile(r"S:([0-9a-f]+)")


def _reveal(document: LexborHTMLParser, segment: LexborNode, number: str) -> None:
    """Put a streamed segment where its placeholder is, as the page's own script does on load."""
    placeholder = document.css_first(f'template[id="B:{number}"]')
    if placeholder is not None:
        placeholder.insert_before(segment, move=True)


def prune(document: LexborHTMLParser) -> bool:
    """Remove hidden subtrees (the text after a hidden element is a sibling node: it stays visible) and unwrap
    named anchors (``<a name=top>`` and nothing else): a placeholder, not a link, which left open wraps whole
    pages (an HTML5 parser carries it on, as a browser does). Anchors without ``href`` but with a class or an
    onclick are script links and stay links. False when the whole page is hidden."""
    hidden, anchors = [], []
    for element in document.css(_PRUNE_SELECTOR):
        attributes = element.attributes
        if "hidden" in attributes:
            segment = _STREAMED_SEGMENT.fullmatch(attributes.get("id") or "")
            if segment is None:
                hidden.append(element)
            else:
                _reveal(document, element, segment.group(1))
        elif _HIDDEN_STYLE.search(attributes.get("style") or ""):
            hidden.append(element)
        elif (element.tag == "dialog" and "open" not in attributes) or (
            (attributes.get("aria-modal") or "").lower() == "true"
        ):
            # A closed <dialog> is not rendered; a modal (aria-modal) opens over the page on demand: policies,
            # size guides, newsletter sign-ups, never the page's own text.
            hidden.append(element)
        elif _ANCHOR_ATTRIBUTES.issuperset(attributes) and element.tag == "a":
            anchors.append(element)
    if hidden:
        root = document.root.mem_id
        for element in hidden:
            if element.mem_id == root:
                return False
            # Detached, not freed (the document owns its nodes): a hidden element inside another is simply
            # detached from a subtree that is already out of the page.
            element.remove(recursive=False)
    for element in anchors:
        element.unwrap()
    return True
