"""The rule's ``render`` field: ``"never"`` (the default), ``"always"`` or ``"auto"`` (``messaging/schemas``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NEVER = "never"
ALWAYS = "always"
AUTO = "auto"
MODES = (NEVER, ALWAYS, AUTO)


def render_mode(rule: Mapping[str, Any] | None) -> str:
    """The rule's render mode; a rule without one (or a crawl without a rule) is ``never``.

    The crawl request was validated against the rule's JSON Schema at intake, so any other value is a bug upstream:
    it is refused here too rather than guessed at.
    """
    mode = (rule or {}).get("render", NEVER)
    if mode not in MODES:
        raise ValueError(f"render must be one of {', '.join(MODES)}, not {mode!r}")
    return mode
