"""``crawlfleet``: the command line of every component.

Each floor's commands live in their own module (``deploy/cli_*.py``) and are attached here, so that ``crawlfleet
--help`` lists everything one host can run. The commands that ask a request kind (``submit``, ``info``, ``stats``,
``site``, ``stop``, and those of the kinds CRAWLFLEET_REQUEST_KINDS adds) come from the registry of request kinds
(:mod:`messaging.request_kinds`).
"""

from __future__ import annotations

import pkgutil
import sys

import click

from deploy import cli_fleet
from deploy.cli_demo import demo
from deploy.cli_demoweb import demoweb
from deploy.cli_errors import FriendlyGroup
from deploy.cli_export import export
from deploy.cli_failures import COMMANDS as FAILURE_COMMANDS
from deploy.cli_manager import manager
from deploy.cli_master import master
from deploy.cli_messaging import COMMANDS as MESSAGING_COMMANDS
from deploy.cli_proxies import proxies
from deploy.cli_schedule import schedule
from deploy.cli_services import env_command, services, settings_command
from deploy.cli_worker import worker
from messaging import request_kinds
from messaging.settings import load


@click.group(cls=FriendlyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(package_name="crawlfleet")
def main() -> None:
    """crawlfleet: a distributed web crawler built on Scrapy."""


main.add_command(services)
main.add_command(env_command)
main.add_command(settings_command)
main.add_command(demoweb)
for command in MESSAGING_COMMANDS:
    main.add_command(command)
main.add_command(schedule)
main.add_command(demo)
main.add_command(master)
main.add_command(worker)
main.add_command(manager)
main.add_command(proxies)
main.add_command(export)
for command in FAILURE_COMMANDS:
    main.add_command(command)
main.add_command(cli_fleet.up)
main.add_command(cli_fleet.down)
main.add_command(cli_fleet.fleet)
main.add_command(cli_fleet.supervise)


def _request_kind_commands() -> None:
    """One command per request kind that has one; a kind of one's own that cannot be loaded is named on stderr and
    left out, so that the rest of the command line (``crawlfleet down`` included) still works."""
    try:
        request_kinds.use_settings(load())
    except ValueError as exc:
        print(f"crawlfleet: {exc}", file=sys.stderr)
    for path in request_kinds.commands():
        main.add_command(pkgutil.resolve_name(path))


_request_kind_commands()

if __name__ == "__main__":
    main()
