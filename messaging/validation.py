"""Requests as they arrive on Kafka: recognise the kind, validate it against its JSON Schema, or say why not.

The schemas live in ``messaging/schemas/`` (Draft 2020-12): one per request kind (``crawl``, ``info``, ``stats``,
``site``, ``stop``) and one per rule format (``rule-list``, ``rule-universal``, referenced by the crawl schema
according to its ``spider_type``). Validators are compiled once per process: jsonschema is the reference (it
explains every rejection); jsonschema-rs (a dependency) answers "valid?" first with the same schemas and format
checks, which is what lets one monitor validate thousands of requests a second. Beyond the schemas:

- the raw message is bounded (CRAWLFLEET_MAX_MESSAGE_BYTES) before it is parsed, and must be UTF-8 JSON (parsed
  strictly by orjson: no ``NaN``/``Infinity``, no lone surrogates, bounded nesting), so that every accepted request
  re-encodes cleanly into Redis;
- formats are checked, not just annotated: ``http-url`` (absolute http(s) with a host, no white space, control or
  invisible characters), ``xpath`` (compiles with lxml, EXSLT ``re:``/``set:`` allowed as parsel does, known
  functions only; the regex literals of its ``re:`` calls as below), ``xpath-nodes`` (an ``xpath`` whose result
  on a sample page is a node-set of elements: the list spider's ``list_from`` and ``restrict_xpaths``),
  ``xpath-links`` (an ``xpath`` giving nodes or a string, not a number or boolean: ``next_page``,
  ``second_page_url``), ``regex``
  (compiles with Python's ``re``, and with RE2, the linear-time engine the crawl runs request regexes in:
  ``messaging.regexes``).

Every ``pattern`` in the schemas ends in ``$(?!\\n)``, not a bare ``$``: Python's ``$`` (the reference validator's)
also matches before a final newline, which let ``"crawl:r5n-03012\\n"`` pass as an id; the lookahead is valid in
ECMA-262 and jsonschema-rs alike, where ``\\Z`` is not.

A rejection names the most relevant error (jsonschema's ``best_match``: the shallowest one first) as a JSON path and
a message, e.g. ``$.rule.first_page_xpath.list_from: '//[' is not a valid XPath: Invalid expression``.

The kind is recognised from the fields, as the seed does (4.1.2.1), by the registry of request kinds
(:mod:`messaging.request_kinds`): ``action`` says info, stop or a site-config change; ``stats`` says a stats request;
``url``, ``rule`` or ``spider_type`` say a crawl request. Each kind's schema is the registry's too.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema_rs
import orjson
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError, best_match
from lxml import etree

from messaging import request_kinds, spider_types
from messaging.domains import host_problem
from messaging.regexes import UnsafeRegex, exslt_regex_problem, regex_problem

CRAWL, INFO, STATS, SITE, STOP = (request_kinds.CRAWL, request_kinds.INFO, request_kinds.STATS, request_kinds.SITE,
                                   request_kinds.STOP)
SITE_ACTIONS = request_kinds.SITE_ACTIONS
RULE_FILES = spider_types.rule_files()  # spider type -> its rule schema
DEFAULT_MAX_BYTES = 512 * 1024
MESSAGE_LIMIT = 300  # characters of an error message: a reason quotes the offending value, but not all of it

EXSLT_NAMESPACES = {"re": "http://exslt.org/regular-expressions", "set": "http://exslt.org/sets"}
# Controls, white space, and the invisible characters that make a URL look like another (zero-width, bidi).
_CONTROL = re.compile("[\x00-\x20\x7f-\xa0\u1680\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\ufeff]")


class Rejected(ValueError):
    """The message is not a valid request; ``path`` is a JSON path into it (``$`` for the whole message)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message

    @property
    def reason(self) -> str:
        return str(self)


@dataclass(frozen=True)
class Request:
    """A validated request: its kind, its data, and its canonical JSON (sorted keys) with that JSON's digest."""

    kind: str
    data: dict[str, Any]
    canonical: str
    digest: str

    @property
    def uuid(self) -> str | None:
        return self.data.get("uuid")


# --- format checks -----------------------------------------------------------------------------------------------
FORMATS = FormatChecker(formats=())


def is_http_url(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if _CONTROL.search(value):
        raise ValueError("white space, a control or an invisible character in the URL")
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError(f"scheme {parts.scheme!r} is not http or https")
    if not parts.hostname:
        raise ValueError("no host")
    problem = host_problem(parts.hostname)  # the one host rule, the same as the key builder's
    if problem is not None:
        raise ValueError(problem)
    _ = parts.port  # raises ValueError for a port out of range or not a number
    return True


def is_xpath(value: object) -> bool:
    return not isinstance(value, str) or _check_xpath(value)


_PROBE = etree.fromstring("<html><body><a href='x'>x</a></body></html>")
# XPath 1.0's functions and node tests, parsel's has-class, and the EXSLT functions parsel registers (re:, set:).
XPATH_FUNCTIONS = frozenset((
    "last", "position", "count", "id", "local-name", "namespace-uri", "name", "string", "concat", "starts-with",
    "contains", "substring-before", "substring-after", "substring", "string-length", "normalize-space", "translate",
    "boolean", "not", "true", "false", "lang", "number", "sum", "floor", "ceiling", "round",
    "text", "node", "comment", "processing-instruction", "has-class",
    "re:test", "re:match", "re:replace",
    "set:difference", "set:intersection", "set:distinct", "set:has-same-node", "set:leading", "set:trailing",
))
_LITERAL = re.compile(r"'[^']*'|\"[^\"]*\"")
_CALL = re.compile(r"([A-Za-z_][\w.-]*(?::[A-Za-z_][\w.-]*)?)\s*\(")


@lru_cache(maxsize=4096)
def _check_xpath(expression: str) -> bool:
    # Compiling catches syntax errors and one evaluation on a tiny page undefined prefixes; lxml resolves function
    # names only when a call is reached, so they are checked by name.
    problem = exslt_regex_problem(expression)  # before the probe evaluates them (with Python's re)
    if problem is not None:
        raise etree.XPathEvalError(problem)
    try:
        etree.XPath(expression, namespaces=EXSLT_NAMESPACES)(_PROBE)
    except etree.XPathError:
        raise
    except Exception as exc:  # e.g. an OverflowError from a regex argument: a reason, never "unreadable message"
        raise etree.XPathEvalError(f"{type(exc).__name__}: {exc}") from None
    for name in _CALL.findall(_LITERAL.sub("''", expression)):
        if name not in XPATH_FUNCTIONS:
            raise etree.XPathEvalError(f"unknown function {name}()")
    return True


# Rule XPaths whose results must be elements (list entries, link regions): checked on a sample page, so that an
# expression that is valid XPath but can never select an element (count(//a), string(//h1), //a/@href) is refused at
# intake with the reason instead of failing on every page.
_SAMPLE = etree.fromstring(
    "<html><head><title>t</title></head><body><div id='main' class='content'><h1>h</h1>"
    "<ul class='list'><li>1. <a href='/a' title='a' rel='bookmark'>a</a><span>1</span></li></ul>"
    "<p>text <b>b</b></p><table><tr><td>c</td></tr></table></div></body></html>")
_RESULT_KINDS = {float: "a number", str: "a string", bool: "a boolean"}


class NotElements(etree.XPathEvalError):
    """A valid XPath that cannot select elements where the rule needs them."""


def is_node_xpath(value: object) -> bool:
    return not isinstance(value, str) or (_check_xpath(value) and _check_nodes(value))


def is_link_xpath(value: object) -> bool:
    return not isinstance(value, str) or (_check_xpath(value) and _check_links(value))


@lru_cache(maxsize=4096)
def _check_links(expression: str) -> bool:
    """A link XPath gives elements (their href), attribute or text nodes, or a string: never a number or boolean."""
    try:
        result = etree.XPath(expression, namespaces=EXSLT_NAMESPACES)(_SAMPLE)
    except Exception as exc:  # compiled and probed already: a failure here is the sample's, reported all the same
        raise etree.XPathEvalError(f"{type(exc).__name__}: {exc}") from None
    if isinstance(result, bool | float):
        raise NotElements(f"it gives {_RESULT_KINDS[type(result)]}, not links (select the links, e.g. //a/@href "
                          "or //a[@class='next'])")
    return True


@lru_cache(maxsize=4096)
def _check_nodes(expression: str) -> bool:
    try:
        result = etree.XPath(expression, namespaces=EXSLT_NAMESPACES)(_SAMPLE)
    except Exception as exc:  # compiled and probed already: a failure here is the sample's, reported all the same
        raise etree.XPathEvalError(f"{type(exc).__name__}: {exc}") from None
    if not isinstance(result, list):
        kind = next((name for cls, name in _RESULT_KINDS.items() if isinstance(result, cls)), type(result).__name__)
        raise NotElements(f"it gives {kind}, not a node-set, so it can select no element on any page "
                                   "(select the elements themselves, e.g. //a rather than count(//a))")
    if any(not isinstance(node, etree._Element) for node in result):
        raise NotElements("it selects text or attribute values on a sample page, not elements "
                                   "(select the elements themselves, e.g. //a rather than //a/@href)")
    return True


def is_regex(value: object) -> bool:
    if isinstance(value, str):
        problem = regex_problem(value)  # compiles with Python's re and with RE2, the engine the crawl runs it in
        if problem is not None:
            raise UnsafeRegex(problem)
    return True


# registered without a decorator, so that the checks stay typed (jsonschema's decorator is not)
FORMATS.checks("http-url", raises=ValueError)(is_http_url)
FORMATS.checks("xpath", raises=etree.XPathError)(is_xpath)
FORMATS.checks("xpath-nodes", raises=etree.XPathError)(is_node_xpath)
FORMATS.checks("xpath-links", raises=etree.XPathError)(is_link_xpath)
FORMATS.checks("regex", raises=UnsafeRegex)(is_regex)

_FORMAT_NAMES = {"http-url": "an absolute http(s) URL", "xpath": "a valid XPath",
                 "xpath-nodes": "an XPath that selects elements", "xpath-links": "an XPath that selects links",
                 "regex": "a valid regular expression"}


# --- schemas -----------------------------------------------------------------------------------------------------
def load_schema(filename: str) -> dict[str, Any]:
    """A schema of ``messaging/schemas/``, or the file at an absolute path (a request kind of one's own)."""
    if Path(filename).is_absolute():
        text = Path(filename).read_text(encoding="utf-8")
    else:
        text = resources.files("messaging.schemas").joinpath(filename).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def _inline(node: Any, base: str, schemas: dict[str, dict[str, Any]]) -> Any:
    """``node`` with every ``$ref`` replaced by its target: following references is most of jsonschema's time."""
    if isinstance(node, list):
        return [_inline(item, base, schemas) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        filename, _, pointer = node["$ref"].partition("#")
        filename = filename or base
        target: Any = schemas[filename]
        for part in filter(None, pointer.split("/")):
            target = target[part]
        rest = {key: value for key, value in node.items() if key != "$ref"}
        return {**_inline(target, filename, schemas), **_inline(rest, base, schemas)}
    return {key: _inline(value, base, schemas) for key, value in node.items()}


@cache
def validator(filename: str) -> Draft202012Validator:
    """The compiled validator of one schema file, references inlined (compiled once per process)."""
    names = {"common.json", *request_kinds.schema_files().values(), *RULE_FILES.values()}
    schemas = {name: load_schema(name) for name in names}
    for schema in schemas.values():
        Draft202012Validator.check_schema(schema)
    inlined = _inline(schemas[filename], filename, schemas)
    inlined.pop("$id", None)
    return Draft202012Validator(inlined, format_checker=FORMATS)


def _passes(check: Any) -> Any:
    def format_ok(value: Any) -> bool:
        try:
            return bool(check(value))
        except Exception:
            return False

    return format_ok


class CompiledSchema:
    """A schema's validators: jsonschema (the reference, which explains a rejection) and jsonschema-rs with the
    same schema and format checks, which only answers "valid?" — ten times faster, which is what lets one Kafka
    monitor validate thousands of requests a second. A message the fast one refuses is judged
    (and explained) by the reference, so a disagreement can never reject a valid request."""

    def __init__(self, reference: Draft202012Validator) -> None:
        self.reference = reference
        formats = {"http-url": _passes(is_http_url), "xpath": _passes(is_xpath),
                   "xpath-nodes": _passes(is_node_xpath), "xpath-links": _passes(is_link_xpath),
                   "regex": _passes(is_regex)}
        self.fast = jsonschema_rs.Draft202012Validator(reference.schema, formats=formats, validate_formats=True)

    def first_error(self, instance: Any, prefix: tuple[Any, ...] = ()) -> Rejected | None:
        if self.fast.is_valid(instance):
            return None
        if next(self.reference.iter_errors(instance), None) is None:
            return None
        error = best_match(self.reference.iter_errors(instance))
        return Rejected(json_path((*prefix, *error.absolute_path)), describe(error))


@cache
def compiled(filename: str) -> CompiledSchema:
    return CompiledSchema(validator(filename))


def _forget_compiled() -> None:
    """A kind was registered: its schema joins the set every validator resolves references in."""
    validator.cache_clear()
    compiled.cache_clear()


request_kinds.on_change(_forget_compiled)


# --- parsing -----------------------------------------------------------------------------------------------------
def json_path(path: Any) -> str:
    """``$.rule.rules[0].allow`` from jsonschema's deque of keys and indexes."""
    text = "$"
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", part):
            text += f".{part}"
        else:
            text += "[" + json.dumps(part, ensure_ascii=False) + "]"
    return text


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 5] + "…" + text[-4:]


def describe(error: ValidationError) -> str:
    """One line about a schema error, quoting at most a short excerpt of the offending value."""
    if error.validator == "format":
        name = _FORMAT_NAMES.get(str(error.validator_value), str(error.validator_value))
        if error.validator_value in ("xpath-nodes", "xpath-links") and not isinstance(error.cause, NotElements):
            name = _FORMAT_NAMES["xpath"]  # not even XPath
        cause = f": {error.cause}" if error.cause else ""
        message = f"{_short(error.instance)} is not {name}{cause}"
    elif error.validator in ("maxLength", "minLength") and isinstance(error.instance, str):
        bound = "longer" if error.validator == "maxLength" else "shorter"
        relation = "most" if error.validator == "maxLength" else "least"
        message = (f"a string of {len(error.instance)} characters is {bound} than allowed "
                   f"(at {relation} {error.validator_value})")
    elif error.validator in ("maxItems", "maxProperties"):
        message = f"{len(error.instance)} entries, at most {error.validator_value} allowed"
    elif error.validator == "pattern" and isinstance(error.instance, str):
        expected = error.schema.get("description") or f"a string matching {error.validator_value!r}"
        message = f"{_short(error.instance)} is not {expected[0].lower()}{expected[1:].rstrip('.')}"
    elif error.validator == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        message = f"{_short(error.instance)} is not of type {expected}"
    else:
        message = error.message
    return message if len(message) <= MESSAGE_LIMIT else message[: MESSAGE_LIMIT - 1] + "…"


def decode(raw: bytes | str, max_bytes: int = DEFAULT_MAX_BYTES) -> Any:
    """Bytes (or text) → a JSON value; :class:`Rejected` for oversize, non-UTF-8 or invalid JSON.

    orjson parses strictly: no ``NaN``/``Infinity``, no lone surrogates, at most 1024 levels of nesting.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    if len(data) > max_bytes:
        raise Rejected("$", f"message of {len(data)} bytes is larger than the limit of {max_bytes} bytes "
                            "(CRAWLFLEET_MAX_MESSAGE_BYTES)")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Rejected("$", f"not UTF-8: byte {exc.start} ({exc.reason})") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise Rejected("$", f"invalid JSON: {exc.msg[:160]} at line {exc.lineno} column {exc.colno}") from None


def _json_type(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def detect_kind(message: Any) -> str:
    """The request's kind from its fields (seed 4.1.2.1, :func:`messaging.request_kinds.detect`); :class:`Rejected`
    when it is none of them."""
    if not isinstance(message, dict):
        raise Rejected("$", f"a request is a JSON object, not {_json_type(message)}")
    found = request_kinds.detect(message)
    if found is not None:
        return found.name
    if "action" in message:
        known = ", ".join(request_kinds.actions())
        raise Rejected("$.action", f"{_short(message['action'])} is not a known action (one of {known})")
    described = "; ".join(f"{', '.join(entry.fields)} for a {entry.name} request" for entry in request_kinds.kinds()
                          if entry.fields)
    raise Rejected("$", f"unknown request kind: an action ({', '.join(request_kinds.actions())}) or a field of a "
                        f"kind ({described})")


def first_error(kind: str, message: dict[str, Any]) -> Rejected | None:
    """The most relevant schema error of a message of that kind, or None when it is valid.

    A crawl request is checked in two steps with the same result as its schema as a whole: the request without the
    rule's contents, then the rule against its spider type's rule schema. The second step is cached by the rule's
    text, because the many requests of one crawl share one rule (and rules are the costly part to validate).
    """
    whole = compiled(request_kinds.kind(kind).schema)
    if whole.fast.is_valid(message):
        return revisit_error(message["rule"].get("revisit")) if kind == CRAWL and "rule" in message else None
    if kind != CRAWL:
        return whole.first_error(message)
    error = _crawl_envelope().first_error(message)
    if error is not None or "rule" not in message:  # a crawl of one's own spider has no rule (issue 35)
        return error
    rule_file = RULE_FILES[message["spider_type"]]
    return (_rule_error(rule_file, json.dumps(message["rule"], sort_keys=True, ensure_ascii=False))
            or revisit_error(message["rule"].get("revisit")))


def revisit_error(revisit: Any) -> Rejected | None:
    """The one rule of a schema-valid ``revisit`` field that JSON Schema cannot say: ``min <= interval <= max``."""
    if not isinstance(revisit, dict):
        return None
    interval = revisit.get("interval")
    low, high = revisit.get("min"), revisit.get("max")
    if low is not None and interval is not None and low > interval:
        return Rejected("$.rule.revisit.min", f"min {low} is above the interval {interval}")
    if high is not None and interval is not None and high < interval:
        return Rejected("$.rule.revisit.max", f"max {high} is below the interval {interval}")
    return None


@cache
def _crawl_envelope() -> CompiledSchema:
    schema = {key: value for key, value in validator(request_kinds.kind(CRAWL).schema).schema.items() if key != "allOf"}
    return CompiledSchema(Draft202012Validator(schema, format_checker=FORMATS))


@lru_cache(maxsize=1024)
def _rule_error(rule_file: str, rule_text: str) -> Rejected | None:
    return compiled(rule_file).first_error(json.loads(rule_text), ("rule",))


def canonical_json(message: Any) -> str:
    """Sorted keys, no spaces, Unicode kept: the same request is always the same text (and digest)."""
    try:
        return orjson.dumps(message, option=orjson.OPT_SORT_KEYS).decode("utf-8")
    except orjson.JSONEncodeError as exc:  # a lone surrogate in a dict given directly (decoded JSON has none)
        raise Rejected("$", f"cannot encode as JSON: {exc}") from None


def digest(canonical: str) -> str:
    return hashlib.blake2b(canonical.encode("utf-8"), digest_size=16).hexdigest()


def content_digest(data: dict[str, Any]) -> str:
    """The digest of what a request asks for: its canonical JSON without the ``uuid`` (a client adds one to hear the
    answer; two otherwise identical requests are the same request, the second a duplicate)."""
    return digest(canonical_json({key: value for key, value in data.items() if key != "uuid"}))


def parse_request(raw: bytes | str | dict[str, Any], max_bytes: int = DEFAULT_MAX_BYTES) -> Request:
    """Decode, recognise and validate one request; raises :class:`Rejected` with the first error."""
    message = raw if isinstance(raw, dict) else decode(raw, max_bytes)
    kind = detect_kind(message)
    canonical = canonical_json(message)
    if isinstance(raw, dict) and len(canonical.encode("utf-8")) > max_bytes:
        raise Rejected("$", f"message of {len(canonical.encode('utf-8'))} bytes is larger than the limit of "
                            f"{max_bytes} bytes (CRAWLFLEET_MAX_MESSAGE_BYTES)")
    error = first_error(kind, message)
    if error is not None:
        raise error
    return Request(kind, message, canonical, digest(canonical))
