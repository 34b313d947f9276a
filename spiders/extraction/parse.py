"""Parse HTML as a browser does (lexbor, through ``selectolax``), bounded against pathological markup, and prune
what a reader never sees before the text is linearised."""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser, LexborNode

from spiders.extraction.markup import VOID_TAGS, element_names

__all__ = ["clip", "clip_bytes", "hide_screen_reader_text", "parse_html", "prune"]

_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)

# An HTML5 tree builder checks the open elements on every start tag, so a page nesting 10^5 elements costs it
# 10^10 steps. Browsers and libxml2 cap the depth (Blink at 512, libxml2 at 256); so does this (256), by dropping
# the tags beyond that depth before parsing, which leaves their text where the deepest kept element is. Lexbor
# also takes quadratic time over the options of one <select>: option tags are dropped too (their text is never
# main text). Only pages with many tags are scanned (a count in C first), so ordinary pages go untouched.
# The walk after parsing costs 10-18 us per element in Python, so a page is read up to its _MAX_TAGS-th start tag
# (nearly four times the most of any page of the dev set, 8,009): 10^5 list items would take over a second. The
# scan itself costs about a microsecond per tag, so it stops after _MAX_SCANNED tags, dropped ones included (10^6
# nested <div>s or <option>s), and a page is read up to its _MAX_CHARS-th character (the largest dev page has 5.3
# million): what lies beyond is left out, as trafilatura refuses pages over 20 MB.
_MAX_DEPTH = 256
_SCAN_TAGS = 5000
_MAX_TAGS = 30_000
_MAX_SCANNED = 4 * _MAX_TAGS
_MAX_CHARS = 8_000_000
# Raw bytes are clipped before decoding too (three bytes per character: UTF-8's most for Chinese), or decoding and
# detecting a 100 MB page's encoding would cost half a second before any of it is read.
_MAX_BYTES = 3 * _MAX_CHARS
_CLIP_WINDOW = 4096
# Greedy attributes, "/" checked after the match: a lazy "[^>]*?(/?)>" retries at every character of an attribute
# (a second per 8 MB of long attributes).
_TAG = re.compile(r"<(/?)([A-Za-z][^\s/>]*)([^>]*)>")
# Void elements, and those whose end tag may be left out (closed by their next sibling): their depth is unknown.
_NON_NESTING = frozenset(
    (*VOID_TAGS, "br", "hr", "input", "meta", "link", "base", "embed", "html", "head", "body", "p", "li", "dt", "dd")
).union(("caption", "thead", "tbody", "tfoot", "tr", "td", "th", "rt", "rp"))
_OPTION_TAGS = frozenset(("option", "optgroup"))


def _bounded(html: str) -> str:
    """``html`` without the tags that would make parsing it superlinear, and cut before the ``_MAX_TAGS + 1``-th
    start tag it keeps or the ``_MAX_SCANNED + 1``-th tag it finds (see above)."""
    if html.count("<") < _SCAN_TAGS:
        return html
    depth, kept, last, opened = 0, [], 0, 0
    for scanned, match in enumerate(_TAG.finditer(html)):
        if scanned == _MAX_SCANNED:  # the rest of the page is left out
            kept.append(html[last : match.start()])
            return "".join(kept)
        closing = match.group(1)
        name = match.group(2).lower()
        if name in _OPTION_TAGS:
            kept.append(html[last : match.start()])
            last = match.end()
            continue
        if not match.group(3).endswith("/") and name not in _NON_NESTING:  # "<path/>": SVG closes it at once
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


def clip(html: str) -> str:
    """The part of a page that is read: up to its ``_MAX_CHARS``-th character. Everything that reads the source
    (the parser, the metadata scans) reads this part only."""
    return html[:_MAX_CHARS] if len(html) > _MAX_CHARS else html


def clip_bytes(body: bytes) -> bytes:
    """The start of an oversized body, cut just before a space, a newline, "<" or ">" near the limit: bytes below
    0x40 are never inside a character of the ASCII-compatible encodings (UTF-8, GB18030, Big5, Shift_JIS, EUC),
    so strict decoding still works."""
    if len(body) <= _MAX_BYTES:
        return body
    start = _MAX_BYTES - _CLIP_WINDOW
    window = body[start:_MAX_BYTES]
    cut = max(window.rfind(byte) for byte in (b" ", b"\n", b"<", b">"))
    return body[: start + cut] if cut >= 0 else body[:_MAX_BYTES]


def parse_html(html: str) -> LexborHTMLParser | None:
    """Parse (as a browser does, recovering from anything) into a lexbor document; None when there is nothing
    to parse."""
    if not html or html.isspace():
        return None
    html = clip(html)
    if "\x00" in html:
        html = html.replace("\x00", "")
    parser = LexborHTMLParser(_bounded(html))
    return parser if parser.root is not None else None


# Hidden elements (closed dialogs and modals too), <noscript> notices and placeholder anchors, found by the
# parser's CSS engine in one pass (in C); a style is then checked word by word in Python.
_PRUNE_SELECTOR = (
    '[hidden], [style*="none" i], [style*="hidden" i], a[name]:not([href]), dialog:not([open]), [aria-modal="true" i], '
    "noscript, .hide, .d-none, .is-hidden, .w-form-done, .w-form-fail, .w-condition-invisible"
)
# A browser running scripts (the reader's, and the one behind every reference text) never shows <noscript>. Its
# notices ("You need to enable JavaScript to run this app.", "Please enable JavaScript to view the comments") and
# small fallbacks (a "Sort"/"Apply" button, a trending-stories box) go; a <noscript> holding the page's whole
# text for crawlers (Discourse and Flarum forums: 2,600 characters and more on the dev set) stays.
_NOSCRIPT_NOTICE_CHARS = 500
# Classes that the common CSS frameworks define as display:none, whatever the page's own stylesheet: Bootstrap's
# "hide" and "d-none", Bulma's "is-hidden", Webflow's form messages ("Thank you! Your submission has been
# received!", "Oops! Something went wrong") and its conditionally invisible items. Not "hidden": Tailwind's
# "hidden" is mostly undone by a breakpoint ("hidden md:block") or by the page's script.
_HIDDEN_CLASSES = frozenset(("hide", "d-none", "is-hidden", "w-form-done", "w-form-fail", "w-condition-invisible"))
# ... unless another class shows the element again at some width: "d-none d-md-block", "hide lg:flex".
_SHOWN_AGAIN = re.compile(r"(?:(?<![a-z])d-[a-z]+-|:)(?:block|flex|inline|grid|table)")
_ANCHOR_ATTRIBUTES = frozenset(("name", "id"))
# A closed accordion's answer (FAQ) or an inactive tab: hidden until a click, but text the page means to be read.
_PANEL = re.compile(r"tab-?pane|tab-?panel|accordion|faq|answer|collaps")


def _panel(attributes: dict[str, str | None]) -> bool:
    """Whether a hidden element is a disclosure panel (role="tabpanel", or so named by its class/id)."""
    if (attributes.get("role") or "").lower() == "tabpanel":
        return True
    return _PANEL.search(element_names(attributes).lower()) is not None


def _hidden_by_class(names: str | None) -> bool:
    """Whether a framework's utility class hides the element at every width (see ``_HIDDEN_CLASSES``)."""
    if not names:
        return False
    lowered = names.lower()
    return not _HIDDEN_CLASSES.isdisjoint(lowered.split()) and _SHOWN_AGAIN.search(lowered) is None


# React's streaming server rendering sends late parts of a page as <div hidden id="S:n"> at the end of the body
# and moves each into place (its <template id="B:n"> placeholder) as soon as the page loads: shown, not hidden.
_STREAMED_SEGMENT = re.compile(r"S:([0-9a-f]+)")


def _reveal(document: LexborHTMLParser, segment: LexborNode, number: str) -> None:
    """Put a streamed segment where its placeholder is, as the page's own script does on load."""
    placeholder = document.css_first(f'template[id="B:{number}"]')
    if placeholder is not None:
        placeholder.insert_before(segment, move=True)


def prune(document: LexborHTMLParser, panels: list[LexborNode] | None = None) -> bool:
    """Remove hidden subtrees (the text after a hidden element is a sibling node: it stays visible) and unwrap
    named anchors (``<a name=top>`` and nothing else): a placeholder, not a link, which left open wraps whole
    pages (an HTML5 parser carries it on, as a browser does). Anchors without ``href`` but with a class or an
    onclick are script links and stay links. With ``panels``, hidden disclosure panels (closed accordions, inactive
    tabs) stay in the page and are listed there instead. False when the whole page is hidden."""
    hidden: list[LexborNode] = []
    anchors: list[LexborNode] = []
    for element in document.css(_PRUNE_SELECTOR):
        attributes = element.attributes
        if "hidden" in attributes:
            segment = _STREAMED_SEGMENT.fullmatch(attributes.get("id") or "")
            if segment is None:
                (panels if panels is not None and _panel(attributes) else hidden).append(element)
            else:
                _reveal(document, element, segment.group(1))
        elif _HIDDEN_STYLE.search(attributes.get("style") or ""):
            (panels if panels is not None and _panel(attributes) else hidden).append(element)
        elif (element.tag == "dialog" and "open" not in attributes) or (
            (attributes.get("aria-modal") or "").lower() == "true"
        ):
            # A closed <dialog> is not rendered; a modal (aria-modal) opens over the page on demand: policies,
            # size guides, newsletter sign-ups, never the page's own text.
            hidden.append(element)
        elif _hidden_by_class(attributes.get("class")):
            (panels if panels is not None and _panel(attributes) else hidden).append(element)
        elif element.tag == "noscript":
            if len(element.text(deep=True, strip=True)) < _NOSCRIPT_NOTICE_CHARS:
                hidden.append(element)
        elif _ANCHOR_ATTRIBUTES.issuperset(attributes) and element.tag == "a":
            anchors.append(element)
    if hidden:
        assert document.root is not None  # css() found elements: the document has its <html> root
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


# Text the common frameworks show to screen readers only (Bootstrap's "sr-only" and "visually-hidden", the
# HTML5 Boilerplate's "visuallyhidden", WordPress's "screen-reader-text"): clipped to one pixel, never seen. A shop
# labels every price, badge and control so ("Regular price", "Sale price", "Unit price", "Vendor:", "More
# information"); unless a breakpoint shows it again (Tailwind's "md:not-sr-only").
_SCREEN_READER_ONLY = ".sr-only, .visually-hidden, .visuallyhidden, .screen-reader-text"


def hide_screen_reader_text(document: LexborHTMLParser) -> None:
    """Detach the screen-reader-only elements of a product's page (one CSS query, in C)."""
    for element in document.css(_SCREEN_READER_ONLY):
        # Never the page itself (a misused class on <body>), nor what a breakpoint shows again.
        if element.tag not in ("html", "body") and "not-sr-only" not in (element.attributes.get("class") or ""):
            element.remove(recursive=False)
