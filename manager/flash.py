"""One-time status messages of the pages (*flashes*): a POST stores its outcome here and redirects with its id.

The page URL then carries ``?flash=<id>``, never the text: a link from elsewhere cannot make a page show words of its
choosing. The store is bounded (the oldest go first) and in memory (a message is for the next page view only).
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from dataclasses import dataclass

LEVELS = ("ok", "info", "error")


@dataclass(frozen=True)
class Flash:
    text: str
    level: str  # ok, info or error: the banner's style


class Flashes:
    def __init__(self, keep: int = 500) -> None:
        self.keep = keep
        self._messages: OrderedDict[str, Flash] = OrderedDict()

    def add(self, text: str, level: str = "ok") -> str:
        """Store ``text``; returns the id to put in the URL."""
        if level not in LEVELS:
            raise ValueError(f"level {level!r} is not one of {LEVELS}")
        key = secrets.token_urlsafe(9)
        self._messages[key] = Flash(text, level)
        while len(self._messages) > self.keep:
            self._messages.popitem(last=False)
        return key

    def get(self, key: str | None) -> Flash | None:
        return self._messages.get(key) if key else None
