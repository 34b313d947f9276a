"""Every CLI command answers its help, and every read-only command its default form, without a traceback.

Rich reads ``[...]`` in a printed string as markup: a setting's description (``host:port[,host:port][/chroot]``)
once crashed ``crawlfleet settings``. Run against an empty run directory (no services, no fleet): the read-only
commands then report what is not running instead of failing."""

from __future__ import annotations

import os
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from deploy.cli import main

pytestmark = pytest.mark.unit

# The default read-only form of every command that only reads (the commands that ask the fleet through Kafka,
# ``info`` and ``stats``, are run against real services in tests/e2e/test_cli_messaging.py).
READ_ONLY = [["settings"], ["settings", "--markdown"], ["env"],
             ["services", "status"], ["services", "status", "--json"],
             ["fleet", "status"], ["fleet", "status", "--json"],
             ["demoweb", "status"], ["demoweb", "status", "--json"]]


def command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[list[str]]:
    for name, command in sorted(group.commands.items()):
        yield [*prefix, name]
        if isinstance(command, click.Group):
            yield from command_paths(command, (*prefix, name))


@pytest.fixture
def runner(tmp_path, monkeypatch) -> CliRunner:
    for name in [n for n in os.environ if n.startswith("CRAWLFLEET_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("CRAWLFLEET_RUN_DIR", str(tmp_path))
    return CliRunner()


@pytest.mark.parametrize("path", [[], *command_paths(main)], ids=lambda path: " ".join(path) or "crawlfleet")
def test_every_command_has_help(runner, path):
    result = runner.invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


@pytest.mark.parametrize("argv", READ_ONLY, ids=" ".join)
def test_read_only_commands_run_without_a_traceback(runner, argv):
    result = runner.invoke(main, argv)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{' '.join(argv)} raised {result.exception!r}\n{result.output}")
    assert result.exit_code in (0, 1), result.output  # 1: a status command found something not running
    assert result.output.strip()


def test_text_with_brackets_is_printed_as_written(runner, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # rich's width off a terminal: no line folds inside the description
    result = runner.invoke(main, ["settings"])
    assert "host:port[,host:port][/chroot]" in result.output
