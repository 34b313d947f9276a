"""What elements and class/id names mean to the extractor: block-level (a line ends), never visible, inline,
furniture by definition (``<nav>``) or by name (``class="comments"``)."""

from __future__ import annotations

import re

__all__ = [
    "BLOCK_TAGS",
    "BOILERPLATE_TAGS",
    "BYLINE",
    "FURNITURE",
    "FURNITURE_PART",
    "HEADING_TAGS",
    "INLINE_TAGS",
    "PAGE_TAGS",
    "SKIP_TAGS",
    "VOID_TAGS",
    "WORDS",
    "element_names",
    "names_kind",
    "says_furniture",
]

# Words, language-independently: runs of letters or digits, and every CJK character alone (as the scorer counts).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
WORDS = re.compile(f"[{_CJK}]|[^\\W{_CJK}]+")

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
# Text-free elements, skipped by the walk like SKIP_TAGS, and inline formatting, seen through (its text stays in
# the line around it). <a> is neither: link text counts.
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
PAGE_TAGS = frozenset(("html", "body"))
HEADING_TAGS = frozenset(("h1", "h2", "h3", "h4", "h5", "h6"))
# Containers that are page furniture by definition (HTML5 sectioning semantics).
# <button> too: its label is interface, but it is not skipped outright, because an unclosed <button> is not closed
# by the next block and can swallow the rest of the page.
BOILERPLATE_TAGS = frozenset(("nav", "aside", "footer", "button"))

# class/id words that mark furniture. ``_FURNITURE_PARTS`` match anywhere ("commentlist", "site-footer");
# ``_FURNITURE_WORDS`` only as whole words, being short ("nav" but not "canvas"). ``_KEEP_PARTS`` cancel them:
# a forum's "comment-body" or "post-content" is content. Verdicts are cached per string, token and word; a word
# seen for the first time is searched with one regex alternation per list (3 µs here, against 8 µs for a substring
# test per part): class names are full of one-off words ("css-1x2y3z"), so misses are most of the cost.
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
    "signature",
    "userinfo",
    "user-info",
    "userdetails",
    "user-details",
    "userextras",
    "user-extras",
    "usertitle",
    "user-title",
    "userstats",
    "user-stats",
    "postprofile",
)
_FURNITURE_WORDS = frozenset(("nav", "ad", "ads", "tag", "tags", "foot", "xgxw", "xgwz", "rmtj"))
_KEEP_PARTS = ("article", "content", "main", "postbody", "post-body", "entry", "story", "text", "body")
_ANY_KEEP_PART = re.compile("|".join(map(re.escape, _KEEP_PARTS)))
FURNITURE_PART = re.compile("|".join(map(re.escape, _FURNITURE_PARTS)))
_STATE_PREFIXES = ("has", "with", "no-", "is-", "show", "hide", "enable", "disable")
_WORD_SPLIT = re.compile(r"[^a-z0-9-]+")


_FURNITURE, _KEEP = 1, 2
_word_kinds: dict[str, int] = {}  # class/id word -> 0, _FURNITURE or _KEEP; words repeat across pages


def _word_kind(word: str) -> int:
    kind = _word_kinds.get(word)
    if kind is None:
        if word.startswith(_STATE_PREFIXES):  # "has-sidebar", "uix_hasCrumbs": a page state, not a region
            kind = 0
        elif _ANY_KEEP_PART.search(word):
            kind = _KEEP
        elif word in _FURNITURE_WORDS or FURNITURE_PART.search(word):
            kind = _FURNITURE
        else:
            kind = 0
        if len(_word_kinds) < 100_000:
            _word_kinds[word] = kind
    return kind


_token_kinds: dict[str, int] = {}  # class/id token ("site-footer", "nav_main") -> its words' kinds, or-ed
_names_verdicts: dict[str, int] = {}  # whole class/id strings repeat within and across pages

# A byline names the story's author and date ("By Jane Doe | May 14, 2024", "Senior Autos Reporter") or holds the
# author's bio: not the article's text in either convention, whatever content word the name also carries
# ("article-byline", "content__meta-byline"). Not furniture: it sits inside the article, and weighs as much.
FURNITURE, BYLINE = 1, 2  # what names_kind says of class/id names (0: neither)
# Sign-up and call-to-action boxes inside a story ("newsletter-box", "cta-box"; "newsletter-signup" is furniture
# already) go the same way: the references leave them out, and a builder's wrapper holding the whole story under
# such a name is caught by the half-the-page test in the selection.
_BYLINE_PARTS = re.compile(
    r"byline|dateline|(?<![a-z])bio(?![a-z])|newsletter|subscribe|(?<![a-z])cta(?![a-z])"
    r"|author[-_]?(?:bio|box|info|details?|about|block|summary|description|card|profile|wrap|meta|name|container)"
    r"|about[-_]?(?:the[-_]?)?authors?"
)


def element_names(attributes: dict[str, str | None]) -> str:
    """An element's class and id (its attributes), space-separated ("" for neither): what its author called it."""
    names = attributes.get("class")
    identifier = attributes.get("id")
    if identifier:
        return f"{names} {identifier}" if names else identifier
    return names or ""


def names_kind(names: str) -> int:
    """What class/id names mark: ``FURNITURE`` (some word does and no word says content, "comment-body"),
    ``BYLINE`` a byline, else 0. Cached per whole string and per space-separated token: tokens repeat across
    sites far more than strings."""
    verdict = _names_verdicts.get(names)
    if verdict is None:
        kinds = 0
        lowered = names.lower()
        for token in lowered.split():
            kind = _token_kinds.get(token)
            if kind is None:
                kind = 0
                for word in _WORD_SPLIT.split(token):
                    kind |= _word_kind(word)
                if len(_token_kinds) < 100_000:
                    _token_kinds[token] = kind
            kinds |= kind
        verdict = FURNITURE if kinds == _FURNITURE else BYLINE if _BYLINE_PARTS.search(lowered) else 0
        if len(_names_verdicts) < 100_000:
            _names_verdicts[names] = verdict
    return verdict


def says_furniture(names: str) -> bool:
    """Whether class/id names mark furniture (see :func:`names_kind`)."""
    return names_kind(names) == FURNITURE
