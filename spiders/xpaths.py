"""A compiled lxml XPath that a long-lived process evaluates page after page, its memory bounded.

lxml keeps every message libxml2 sends an :class:`~lxml.etree.XPath` evaluator in that evaluator's own error log,
for the evaluator's whole life: nothing clears it, and Python cannot (``XPath.error_log`` is a copy). libxml2 2.14,
as lxml 6.1 bundles it, sends a spurious ``FATAL:XPATH:ERR_NO_MEMORY: unknown error`` on most *successful*
evaluations, and a user's XPath that fails on a page (an undefined variable, a bad ``re:test`` pattern) adds one
more each time. A worker compiles its rule XPaths once and keeps them for days: it kept ~26 log entries a page,
about 1.8 of the 3.2 KB a page it grew by in ``bench.soak`` (issue 40). :class:`ReusedXPath` compiles its expression
again every :data:`REUSES` evaluations, which drops the old evaluator and its log: the log stays under REUSES x
(messages per evaluation), and a compilation costs microseconds against a thousand evaluations.

**Why most evaluations log a message: the worker's RE2 functions.** A rule spider registers ``re:test``,
``re:match`` and ``re:replace`` in lxml's *global* EXSLT namespace (:func:`messaging.regexes.install_exslt_functions`,
so that a user's regex runs in RE2 whatever evaluates it). lxml registers every global function again on each
evaluation of every evaluator, and every evaluator made with ``regexp=True`` (lxml's default: parsel's, Scrapy's,
lxml.html's) has lxml's own functions of the same names registered already: libxml2 refuses the name it holds and
logs ``ERR_NO_MEMORY``, three messages per evaluation, in the log of whatever evaluator a library keeps. Scrapy's
link extractor keeps one for the text of every link (``_collect_string_content``), lxml.html one for
``text_content()``, and parsel up to 2,048 compiled for ``Selector.xpath`` (an ``lru_cache``): each grew by three
messages per evaluation for the process's life, invisible to ``gc`` (lxml's log entries and their strings are not
tracked objects) — 1.4 KB a page in ``bench.soak`` (issue 40). :func:`bound_library_xpaths`, called wherever the
functions are installed, gives those evaluators the same bound: the module-level ones become :class:`ReusedXPath`,
and parsel's cache is emptied every :data:`REUSES` compilations asked of it.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from typing import Any

from lxml import etree

REUSES = 1_000  # evaluations of one compiled evaluator before it is compiled again (and its error log dropped)
# Module-level evaluators of the libraries a worker uses, kept for the process's life: (module, attribute, expression).
LIBRARY_EVALUATORS = (
    ("scrapy.linkextractors.lxmlhtml", "_collect_string_content", "string()"),  # every link's text
    ("lxml.html", "_collect_string_content", "string()"),  # HtmlElement.text_content()
)


class ReusedXPath:
    """``etree.XPath(source, namespaces=...)`` whose evaluator (and so its error log) is replaced every ``reuses``
    evaluations. Compiled at once: a syntax error raises :class:`~lxml.etree.XPathSyntaxError` here, as lxml's."""

    __slots__ = ("_left", "_xpath", "namespaces", "reuses", "source")

    def __init__(self, source: str, namespaces: Mapping[str, str] | None = None, reuses: int = REUSES) -> None:
        self.source = source
        self.namespaces = dict(namespaces) if namespaces else None
        self.reuses = max(1, reuses)
        self._xpath = etree.XPath(source, namespaces=self.namespaces)
        self._left = self.reuses

    def __call__(self, node: Any) -> Any:
        """The expression's result with ``node`` as context (lxml's: a list, a string, a number or a boolean)."""
        if self._left <= 0:
            self._xpath, self._left = etree.XPath(self.source, namespaces=self.namespaces), self.reuses
        self._left -= 1
        return self._xpath(node)

    @property
    def logged(self) -> int:
        """How many messages the current evaluator's error log holds (at most ``reuses`` evaluations' worth)."""
        return len(self._xpath.error_log)


def bound_library_xpaths(reuses: int = REUSES) -> list[str]:
    """Bound the error logs of the evaluators the libraries keep (see the module docstring): each module-level one
    of :data:`LIBRARY_EVALUATORS` becomes a :class:`ReusedXPath`, and parsel's cache of compiled evaluators is
    emptied every ``reuses`` compilations asked of it. Idempotent; what it replaced (a library without the attribute,
    e.g. another version, is left alone)."""
    replaced = []
    for module_name, attribute, expression in LIBRARY_EVALUATORS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if isinstance(getattr(module, attribute, None), etree.XPath):
            setattr(module, attribute, ReusedXPath(expression, reuses=reuses))
            replaced.append(f"{module_name}.{attribute}")
    import parsel.selector

    compile_xpath: Any = getattr(parsel.selector, "_compile_xpath", None)
    if callable(getattr(compile_xpath, "cache_clear", None)) and not isinstance(compile_xpath, _EmptiedCache):
        setattr(parsel.selector, "_compile_xpath", _EmptiedCache(compile_xpath, reuses))  # noqa: B010 - private
        replaced.append("parsel.selector._compile_xpath")
    return replaced


class _EmptiedCache:
    """An ``lru_cache``d function whose cache is emptied every ``every`` calls: no entry lives through more."""

    def __init__(self, cached: Callable[..., Any], every: int) -> None:
        functools.update_wrapper(self, cached)
        self.cached, self.every, self._left = cached, max(1, every), max(1, every)
        self.emptied = 0

    def __call__(self, *args: Any) -> Any:
        self._left -= 1
        if self._left < 0:
            self.cached.cache_clear()  # type: ignore[attr-defined]
            self._left, self.emptied = self.every - 1, self.emptied + 1
        return self.cached(*args)

    def cache_info(self) -> Any:
        return self.cached.cache_info()  # type: ignore[attr-defined]

    def cache_clear(self) -> None:
        self.cached.cache_clear()  # type: ignore[attr-defined]
