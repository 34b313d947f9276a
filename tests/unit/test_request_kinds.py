"""The registry of request kinds: recognition, the monitors' chains and the refusals that keep one kind per message."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest

from messaging import request_kinds
from messaging.request_kinds import RequestKind
from messaging.settings import load
from messaging.validation import Rejected, detect_kind, parse_request

pytestmark = pytest.mark.unit

PING = RequestKind("ping", "info.json", "a toy kind", "toy.Kafka", actions=("ping",), redis_plugin="toy.Redis",
                   cli="toy:ping")
PING_SCHEMA = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
               "required": ["action", "userid", "crawlid"], "additionalProperties": False,
               "properties": {"action": {"const": "ping"}, "userid": {"$ref": "common.json#/$defs/id"},
                              "crawlid": {"$ref": "common.json#/$defs/id"},
                              "uuid": {"$ref": "common.json#/$defs/uuid"}}}


@pytest.fixture
def ping(tmp_path):
    """The toy kind, its schema in a file of its own (an absolute path, as a kind outside the package has)."""
    schema = tmp_path / "ping.json"
    schema.write_text(json.dumps(PING_SCHEMA))
    kind = dataclasses.replace(PING, schema=str(schema))
    request_kinds.register(kind)
    yield kind
    request_kinds.unregister("ping")


def test_the_built_in_kinds_are_recognised_by_the_registry():
    assert detect_kind({"url": "x"}) == detect_kind({"spider_type": "list"}) == "crawl"
    assert detect_kind({"stats": "all"}) == "stats"
    assert [detect_kind({"action": action}) for action in ("info", "stop", "rate", "blacklist-remove")] == [
        "info", "stop", "site", "site"]
    assert {kind.name for kind in request_kinds.kinds()} >= {"crawl", "info", "stats", "site", "stop", "pause",
                                                             "resume"}


def test_the_monitors_default_chains_come_from_the_registry(tmp_path):
    settings = load({"CRAWLFLEET_RUN_DIR": str(tmp_path)})
    assert request_kinds.kafka_chain(settings) == [kind.kafka_plugin for kind in request_kinds.kinds()]
    assert request_kinds.redis_chain(settings) == [kind.redis_plugin for kind in request_kinds.kinds()
                                                   if kind.redis_plugin]
    assert "deploy.cli_messaging:submit" in request_kinds.commands()


def test_a_registered_kind_is_recognised_validated_and_chained_after_the_configured_plugins(ping):
    assert detect_kind({"action": "ping"}) == "ping"
    assert parse_request({"action": "ping", "userid": "u", "crawlid": "c", "uuid": "1"}).kind == "ping"
    with pytest.raises(Rejected, match=r"\$: .*'crawlid' is a required property"):
        parse_request({"action": "ping", "userid": "u", "uuid": "1"})  # its schema is applied (info.json here)
    settings = SimpleNamespace(kafka_monitor_plugins="a.A, b.B", redis_monitor_plugins="r.R", request_kinds="")
    assert request_kinds.kafka_chain(settings) == ["a.A", "b.B", "toy.Kafka"]
    assert request_kinds.redis_chain(settings) == ["r.R", "toy.Redis"]
    settings.kafka_monitor_plugins = "toy.Kafka,a.A"  # named by the operator already: not twice
    assert request_kinds.kafka_chain(settings) == ["toy.Kafka", "a.A"]


def test_an_unknown_action_names_every_known_one(ping):
    known = r"'explode' is not a known action \(one of info, rate, .*, stop, pause, resume, ping\)"
    with pytest.raises(Rejected, match=known):
        detect_kind({"action": "explode"})


def test_a_kind_that_would_share_a_message_with_another_is_refused():
    with pytest.raises(ValueError, match="recognised as 'stop' too"):
        request_kinds.register(RequestKind("halt", "stop.json", "", "x.X", actions=("stop",)))
    with pytest.raises(ValueError, match="recognised as 'crawl' too"):
        request_kinds.register(RequestKind("fetch", "crawl.json", "", "x.X", fields=("url",)))
    with pytest.raises(ValueError, match="registered already"):
        request_kinds.register(RequestKind("crawl", "crawl.json", "", "x.X", fields=("seed",)))
    with pytest.raises(ValueError, match="exactly one"):
        RequestKind("both", "x.json", "", "x.X", actions=("a",), fields=("b",))
    with pytest.raises(ValueError, match="built in"):
        request_kinds.unregister("crawl")


def test_kinds_named_by_setting_are_loaded_by_dotted_path(monkeypatch):
    import sys
    import types

    module = types.ModuleType("toy_kinds_module")
    module.PING = PING
    module.NOT_A_KIND = object()
    monkeypatch.setitem(sys.modules, "toy_kinds_module", module)
    try:
        assert request_kinds.register_paths("toy_kinds_module:PING") == [PING]
        request_kinds.register_paths("toy_kinds_module:PING")  # the same entry again changes nothing
        with pytest.raises(ValueError, match=r"not a messaging\.request_kinds\.RequestKind"):
            request_kinds.register_paths("toy_kinds_module:NOT_A_KIND")
        with pytest.raises(ValueError, match=r"cannot load request kind \(CRAWLFLEET_REQUEST_KINDS\) 'nowhere:X'"):
            request_kinds.register_paths("nowhere:X")
    finally:
        request_kinds.unregister("ping")
