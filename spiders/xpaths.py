"""A compiled lxml XPath that a long-lived process evaluates page after page, its memory bounded.

lxml keeps every message libxml2 sends an :class:`~lxml.etree.XPath` evaluator in that evaluator's own error log,
for the evaluator's whole life: nothing clears it, and Python cannot (``XPath.error_log`` is a copy). libxml2 2.14,
as lxml 6.1 bundles it, sends a spurious ``FATAL:XPATH:ERR_NO_MEMORY: unknown error`` on most *successful*
evaluations, and a user's XPath that fails on a page (an undefined variable, a bad ``re:test`` pattern) adds one
more each time. A worker compiles its rule XPaths once and keeps them for days: it kept ~26 log entries a page,
about 1.8 of the 3.2 KB a page it grew by in ``bench.soak`` (issue 40). :class:`ReusedXPath` compiles its expression
again every :data:`REUSES` evaluations, which drops the old evaluator and its log: the log stays under REUSES x
(messages per evaluation), and a compilation costs microseconds against a thousand evaluations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lxml import etree

REUSES = 1_000  # evaluations of one compiled evaluator before it is compiled again (and its error log dropped)


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
