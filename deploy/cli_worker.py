"""``crawlfleet worker``: one Scrapy worker process of the fleet (the same as ``scrapy crawl <spider>`` from the
project root, with the fleet's settings module and a job id)."""

from __future__ import annotations

import os
from typing import Any

import click

from messaging.spider_types import NAMES as SPIDER_TYPES
from messaging.spider_types import spider_type as registered_type


def project_settings(overrides: tuple[str, ...] = ()) -> Any:
    """The Scrapy project's settings (``spiders.settings``), the log level of CRAWLFLEET_LOG_LEVEL and ``-s NAME=VALUE``
    overrides, as ``scrapy crawl`` would have them."""
    os.environ.setdefault("SCRAPY_SETTINGS_MODULE", "spiders.settings")
    from scrapy.utils.project import get_project_settings

    from messaging.settings import load

    settings = get_project_settings()
    settings.set("LOG_LEVEL", load().log_level, priority="cmdline")
    for override in overrides:
        name, sep, value = override.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"expected NAME=VALUE, got {override!r}", param_hint="-s")
        settings.set(name, value, priority="cmdline")
    return settings


@click.command("worker")
@click.option("--spider", "spider_type", type=click.Choice(SPIDER_TYPES), required=True,
              help="Spider type this worker crawls for.")
@click.option("--job", default=None, help="Job id in the registry (default: <host>-<spider>-<pid>-<random>); "
                                          "a job id is never reused once it stopped.")
@click.option("-s", "--set", "overrides", multiple=True, metavar="NAME=VALUE",
              help="A Scrapy setting (as scrapy crawl -s), e.g. -s CONCURRENT_REQUESTS=32.")
def worker(spider_type: str, job: str | None, overrides: tuple[str, ...]) -> None:
    """Crawl tasks of one spider type from this job's queues until SIGTERM (which hands its tasks back)."""
    from scrapy.crawler import CrawlerProcess

    from spiders.worker.build import default_job_id

    settings = project_settings(overrides)
    for name, value in registered_type(spider_type).settings.items():  # the type's defaults, below -s
        settings.set(name, value, priority="project")
    settings.set("CRAWLFLEET_JOB", job or default_job_id(spider_type), priority="cmdline")
    process = CrawlerProcess(settings)
    process.crawl(spider_type)
    process.start()
