"""Regular expressions from requests run in a linear-time engine (RE2, ``google-re2``), never in a backtracking one.

A crawl's rule carries regexes (the universal spider's ``allow``/``deny``; ``re:test``, ``re:match`` and
``re:replace`` inside its XPaths). Python's ``re`` backtracks: ``(a+)+$`` on 24 characters takes seconds, four times
longer for every two more, and one such rule would stall every worker that runs it. So:

- **at intake** (``messaging.validation``, format ``regex``), :func:`regex_problem` refuses, with a reason, a
  pattern that Python's ``re`` cannot compile (including ``a{4294967296}``, whose ``OverflowError`` used to escape as
  "unreadable message") or that RE2 cannot run (backreferences, lookarounds, ``\\Z``, repetitions above 1000);
- **in the worker**, :func:`compile_user_regex` gives the RE2 object to match with (``.search``, ``.match``,
  ``.fullmatch``, ``.sub``…), whose time is linear in the text; and :func:`install_exslt_functions` (called once
  per process) makes lxml/parsel evaluate XPath's EXSLT ``re:`` functions with RE2 too, instead of Python's ``re``.

The syntax is Python's (``(?P<name>…)``, ``(?i)``…) as far as RE2 shares it; one difference stays: in RE2 ``\\d``,
``\\w`` and ``\\s`` are ASCII classes, in Python Unicode ones — for URLs, what these rules match, the same.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import re2

__all__ = ["UnsafeRegex", "compile_user_regex", "exslt_regex_problem", "install_exslt_functions", "regex_problem"]

EXSLT_REGEX_NAMESPACE = "http://exslt.org/regular-expressions"
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print every refused pattern to stderr
_IGNORE_CASE = re2.Options()
_IGNORE_CASE.log_errors = False
_IGNORE_CASE.case_sensitive = False


class UnsafeRegex(ValueError):
    """A pattern from a request that is not a valid regex, or that the linear-time engine cannot run."""


@lru_cache(maxsize=4096)
def regex_problem(pattern: str) -> str | None:
    """Why ``pattern`` may not come from a request (see the module docstring), or None when it may."""
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError, ValueError) as exc:  # OverflowError: a{4294967296}
        return str(exc)
    try:
        re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        return f"uses what the linear-time regex engine (RE2) cannot run: {_message(exc)}"
    return None


@lru_cache(maxsize=1024)
def compile_user_regex(pattern: str, ignore_case: bool = False) -> Any:
    """The pattern compiled by RE2 (``.search``, ``.match``, ``.fullmatch``, ``.finditer``, ``.sub``…);
    :class:`UnsafeRegex` with the reason when it may not come from a request."""
    problem = regex_problem(pattern)
    if problem is not None:
        raise UnsafeRegex(problem)
    return re2.compile(pattern, _IGNORE_CASE if ignore_case else _OPTIONS)


_EXSLT_REGEX_CALL = re.compile(r"re:(?:test|match|replace)\s*\(")


def exslt_regex_problem(expression: str) -> str | None:
    """The first regex literal of an EXSLT ``re:`` call (its second argument) that may not come from a request."""
    for call in _EXSLT_REGEX_CALL.finditer(expression):
        arguments = _arguments(expression, call.end())
        if len(arguments) >= 2 and arguments[1][:1] in ("'", '"') and arguments[1][-1:] == arguments[1][:1]:
            problem = regex_problem(arguments[1][1:-1])
            if problem is not None:
                return f"the regex {arguments[1]} of {call.group(0).rstrip('( ')}(): {problem}"
    return None


def _arguments(expression: str, start: int) -> list[str]:
    """The top-level arguments of the call whose ``(`` ends at ``start`` (string literals kept whole)."""
    arguments, depth, current, quote = [], 0, "", ""
    for ch in expression[start:]:
        if quote:
            current += ch
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            current, quote = current + ch, ch
        elif ch in "([":
            current, depth = current + ch, depth + 1
        elif ch in ")]" and depth:
            current, depth = current + ch, depth - 1
        elif ch == ")" or (ch == "," and not depth):
            arguments.append(current.strip())
            current = ""
            if ch == ")":
                break
        else:
            current += ch
    return arguments


def _message(exc: BaseException) -> str:
    detail = exc.args[0] if exc.args else exc
    return detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)


# --- EXSLT regular expressions (re:test, re:match, re:replace) on RE2 ---------------------------------------------
def _string(value: Any) -> str:
    """XPath's string value of an argument (a node-set gives its first node's)."""
    if isinstance(value, list):
        if not value:
            return ""
        value = value[0]
        if hasattr(value, "itertext"):
            return "".join(value.itertext())
    return str(value)


def _compiled(pattern: Any, flags: Any) -> Any:
    return compile_user_regex(_string(pattern), ignore_case="i" in _string(flags))


def exslt_test(_context: Any, value: Any, pattern: Any, flags: Any = "") -> bool:
    return _compiled(pattern, flags).search(_string(value)) is not None


def exslt_match(_context: Any, value: Any, pattern: Any, flags: Any = "") -> list[Any]:
    from lxml import etree

    text, regex = _string(value), _compiled(pattern, flags)
    if "g" in _string(flags):
        found = [match.group(0) for match in regex.finditer(text)]
    else:
        match = regex.search(text)
        found = [] if match is None else [match.group(0), *(group or "" for group in match.groups())]
    root = etree.Element("matches")
    for part in found:
        etree.SubElement(root, "match").text = part
    return list(root)


def exslt_replace(_context: Any, value: Any, pattern: Any, flags: Any, replacement: Any) -> str:
    count = 0 if "g" in _string(flags) else 1
    replaced: str = _compiled(pattern, flags).sub(_string(replacement), _string(value), count=count)
    return replaced


def install_exslt_functions() -> None:
    """Make lxml (and parsel, which uses it) evaluate ``re:test``, ``re:match`` and ``re:replace`` with RE2 in this
    process: functions registered in lxml's global EXSLT namespace take precedence over its built-in ones."""
    from lxml import etree

    namespace = etree.FunctionNamespace(EXSLT_REGEX_NAMESPACE)
    namespace["test"] = exslt_test
    namespace["match"] = exslt_match
    namespace["replace"] = exslt_replace
