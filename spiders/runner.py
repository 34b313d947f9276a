"""``python -m spiders.runner``: a Scrapy command with a deployed project's egg (scrapyd's ``scrapyd.runner``).

::

    python -m spiders.runner --egg PATH list
    python -m spiders.runner --project P --version V --sha256 D crawl SPIDER -s NAME=VALUE -a NAME=VALUE
    python -m spiders.runner --project P --version V --sha256 D --fleet crawl SPIDER -s CRAWLFLEET_CRAWL=C …

The egg is a file (the manager checking an upload) or comes from this host's cache
(:class:`messaging.egg_cache.EggCache`: fetched once per version, checked by its digest; a version deleted or
deployed again since the job pinned it is refused). It is activated (first on ``sys.path``) and its settings module
imported here, so that an egg whose settings cannot be imported says so instead of Scrapy's "Unknown command";
that module becomes ``SCRAPY_SETTINGS_MODULE`` (whatever the environment said: the egg decides), then Scrapy's
command line runs the remaining arguments in this process. A problem with the egg ends the process with status 2
and a last line ``error: <reason>`` on stderr, which the manager reports.

``--fleet`` (a worker of a fleet crawl, issue 35) adds the fleet's add-on (``spiders.addon.FleetAddon``) to the
project's ``ADDONS`` — what a project run without eggs lists itself — unless the project names it already (``None``
there switches it off).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from messaging.egg_cache import activate, open_cache
from messaging.eggs import EggError, ProjectNotFound, StorageUnavailable, VersionNotFound

EXIT_BAD_EGG = 2


class RunnerFailed(Exception):
    pass


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m spiders.runner", allow_abbrev=False,
                                     description="Run a Scrapy command with a deployed project's egg.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--egg", help="the egg's file")
    source.add_argument("--project", help="a deployed project: its egg comes from the host's cache")
    parser.add_argument("--version", dest="egg_version", help="the project's version (default: the latest)")
    parser.add_argument("--sha256", help="the digest the job pinned: another one is refused")
    parser.add_argument("--fleet", action="store_true", help="run as a fleet worker: add the fleet's add-on")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the Scrapy command and its arguments")
    args = parser.parse_args(argv)
    if not args.command:
        parser.error("a Scrapy command is required (list, crawl SPIDER …)")
    return args


def egg_file(args: argparse.Namespace) -> Path:
    if args.egg:
        return Path(args.egg)
    from messaging.settings import load

    cache, client = open_cache(load())
    try:
        return cache.path(args.project, args.egg_version, args.sha256)
    except (ProjectNotFound, VersionNotFound) as exc:
        raise RunnerFailed(f"project '{args.project}': {exc} in the egg storage (deleted since the job was "
                           "scheduled?)") from exc
    except (EggError, StorageUnavailable) as exc:
        raise RunnerFailed(f"project '{args.project}': {exc}") from exc
    finally:
        client.close()


def prepare(args: argparse.Namespace) -> None:
    """Activate the egg and import its settings module (any failure: :class:`RunnerFailed` with the reason)."""
    try:
        module = activate(egg_file(args))
    except EggError as exc:
        raise RunnerFailed(str(exc)) from exc
    try:
        importlib.import_module(module)
    except Exception as exc:
        traceback.print_exc()
        raise RunnerFailed(f"the egg's settings module '{module}' cannot be imported: "
                           f"{type(exc).__name__}: {exc}") from exc
    os.environ["SCRAPY_SETTINGS_MODULE"] = module
    if args.project:
        os.environ["SCRAPY_PROJECT"] = args.project
        os.environ["CRAWLFLEET_PROJECT"] = args.project  # a fleet worker's spider type is <project>.<spider>


def main(argv: list[str] | None = None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        prepare(args)
    except RunnerFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(EXIT_BAD_EGG)
    from scrapy.cmdline import execute

    execute(["scrapy", *args.command], settings=fleet_settings() if args.fleet else None)


FLEET_ADDON = "spiders.addon.FleetAddon"


def fleet_settings() -> Any:
    """The project's settings with the fleet's add-on among its ADDONS (as the project could list it itself)."""
    from scrapy.settings import BaseSettings
    from scrapy.utils.project import get_project_settings

    settings = get_project_settings()
    addons = settings["ADDONS"]
    if not isinstance(addons, BaseSettings):
        addons = BaseSettings(addons or {}, priority="project")
        settings.set("ADDONS", addons, "project")
    if FLEET_ADDON not in addons:
        addons.set(FLEET_ADDON, 0, "project")
    return settings


if __name__ == "__main__":
    main()
