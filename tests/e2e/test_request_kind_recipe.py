"""docs/extending.md's recipe for a request kind, followed for real: a toy kind kept in a package of its own (a
temporary directory), named by CRAWLFLEET_REQUEST_KINDS, validated, stored by the Kafka monitor, answered by the
Redis monitor and asked by its own ``crawlfleet`` command, on the real broker and Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from messaging import keys

pytestmark = pytest.mark.e2e

TOY_KIND = textwrap.dedent('''
    """A toy request kind: "echo" asks the Redis monitor to answer with the user id, upper-cased."""
    import json
    from pathlib import Path

    import click

    from messaging.kafka_monitor.plugins import Plugin
    from messaging.redis_monitor.plugins import Plugin as AnswerPlugin
    from messaging.redis_monitor.plugins import Refused
    from messaging.request_kinds import RequestKind

    TOY = RequestKind("echo", str(Path(__file__).with_name("echo.json")), "answer with the user id",
                      "toy_kind:EchoStore", actions=("echo",), redis_plugin="toy_kind:EchoAnswer",
                      cli="toy_kind:echo")


    class EchoStore(Plugin):
        name = "echo"
        kinds = frozenset({"echo"})

        def handle(self, request, batch):
            batch.store(request, "echo:{requests}:" + request.data["userid"] + ":" + request.data["uuid"])


    class EchoAnswer(AnswerPlugin):
        name = "echo"
        kind = "echo"

        def handle(self, key, request, context):
            if request["userid"] == "nobody":
                raise Refused("nobody is not there")
            return {"echo": request["userid"].upper()}


    @click.command("echo")
    @click.argument("userid")
    def echo(userid):
        """Ask the fleet to echo a user id."""
        from deploy.cli_messaging import ask

        answer = ask({"action": "echo", "userid": userid}, 30)
        click.echo(json.dumps(answer, sort_keys=True))
''')
ECHO_SCHEMA = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
               "required": ["action", "userid"], "additionalProperties": False,
               "properties": {"action": {"const": "echo"}, "userid": {"$ref": "common.json#/$defs/id"},
                              "uuid": {"$ref": "common.json#/$defs/uuid"}}}


def test_a_request_kind_of_ones_own_goes_through_both_monitors_and_the_command_line(cf, procs, tmp_path):
    package = tmp_path / "toy"
    package.mkdir()
    (package / "toy_kind.py").write_text(TOY_KIND)
    (package / "echo.json").write_text(json.dumps(ECHO_SCHEMA))
    env = cf.with_env(CRAWLFLEET_REQUEST_KINDS="toy_kind:TOY",
                      PYTHONPATH=f"{package}{os.pathsep}{cf.env['PYTHONPATH']}")
    kafka = procs.crawlfleet("kafka-monitor", env=env)
    procs.wait_log(kafka, f"partitions assigned: {cf.settings.topic_incoming}[", 60)
    redis_monitor = procs.crawlfleet("redis-monitor", env=env)
    procs.wait_log(redis_monitor, keys.request_stream("echo"), 30)  # it reads the toy kind's stream

    def ask(userid: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "deploy.cli", "echo", userid], env=env, capture_output=True,
                              text=True, timeout=90, check=False)

    answered = ask("alice")
    assert answered.returncode == 0, answered.stderr
    answer = json.loads(answered.stdout.strip().splitlines()[-1])
    assert answer["kind"] == "echo" and answer["status"] == "ok" and answer["echo"] == "ALICE"

    refused = ask("nobody")
    assert json.loads(refused.stdout.strip().splitlines()[-1])["reason"] == "nobody is not there"

    invalid = ask("not an id!")  # the toy schema's id format, checked before anything is sent
    assert invalid.returncode != 0 and "invalid request: $.userid" in invalid.stderr

    redis = cf.redis()
    assert redis.xlen(keys.request_stream("echo")) == 0  # both answered requests were acknowledged and dropped
    assert not list(redis.scan_iter("echo:*"))
