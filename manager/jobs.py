"""What a manager job is: a spider to run with its settings and arguments, and what became of it (seed table 4-12).

A :class:`Job` is what ``schedule.json`` (or the *Spiders* and *Projects* pages) asks for; a deployed project's job
also carries the version it pinned and that egg's digest. A :class:`JobRecord` is one run of it:
project, spider, job id, pid, start and end time, exit status and log path — the row the *Jobs* page and
``listjobs.json`` show. Job ids become the worker's registry id (``CRAWLFLEET_JOB``) and the prefix of its Redis
queue keys (``<job>:{<domain>}:queue``), so they are restricted to a safe alphabet and never reused.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
SETTING_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,127}\Z")
ARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
RESERVED_ARGS = {"project", "spider", "jobid", "priority", "setting", "_version", "csrf_token", "host", "_workers",
                 "_hosts", "_crawl"}


class InvalidJob(ValueError):
    """A job that cannot be scheduled; the message says why (scrapyd's error envelope carries it)."""


def new_job_id(spider: str) -> str:
    return f"{spider}-{uuid.uuid1().hex}"


def check_job_id(job_id: str) -> str:
    if not JOB_ID.match(job_id):
        raise InvalidJob(f"jobid {job_id!r} is invalid: letters, digits, '.', '_' and '-' only, at most 128")
    return job_id


@dataclass
class Job:
    spider: str
    job: str
    priority: float = 0.0
    settings: dict[str, str] = field(default_factory=dict)
    args: dict[str, str] = field(default_factory=dict)
    project: str = "crawlfleet"
    created: float = field(default_factory=time.time)
    version: str | None = None  # a deployed project's version, pinned when the job is scheduled
    egg_sha256: str | None = None  # and its egg's digest: a version deployed again since is refused at the start
    crawl: str | None = None  # the fleet crawl this job is a worker of (a deployed project's: manager.fleet_crawls)

    def __post_init__(self) -> None:
        check_job_id(self.job)
        for name in self.settings:
            if not SETTING_NAME.match(name):
                raise InvalidJob(f"setting {name!r} is invalid: Scrapy settings are UPPER_SNAKE names")
        for name in self.args:
            if not ARG_NAME.match(name):
                raise InvalidJob(f"spider argument {name!r} is invalid: a Python identifier")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Job:
        return cls(**data)

    @property
    def deployed(self) -> bool:
        """A job of a deployed project (an egg), not of the installed one."""
        return self.version is not None

    def crawl_args(self, python: str) -> list[str]:
        """The spider's command line, an argument list (never a shell): ``python -m scrapy crawl …``, or for a
        deployed project ``python -m spiders.runner --project P --version V --sha256 D crawl …`` (its pinned egg).

        The job id is the worker's registry id; scrapyd's ``_job`` argument is passed as well, as scrapyd does. A
        worker of a fleet crawl runs with the fleet's add-on (``--fleet``) and its crawl (CRAWLFLEET_CRAWL)."""
        if self.deployed:
            runner = ["-m", "spiders.runner", "--project", self.project, "--version", str(self.version),
                      *(["--sha256", self.egg_sha256] if self.egg_sha256 else []), *(["--fleet"] if self.crawl else [])]
        else:
            runner = ["-m", "scrapy"]
        argv = [python, *runner, "crawl", self.spider, "-s", f"CRAWLFLEET_JOB={self.job}"]
        if self.crawl:
            argv += ["-s", f"CRAWLFLEET_CRAWL={self.crawl}"]
        for name, value in self.settings.items():
            argv += ["-s", f"{name}={value}"]
        for name, value in {**self.args, "_job": self.job}.items():
            argv += ["-a", f"{name}={value}"]
        return argv


@dataclass
class JobRecord:
    project: str
    spider: str
    job: str
    pid: int | None
    start_time: float
    end_time: float | None = None
    exit_status: int | None = None  # exit code; a killing signal as -<signal>
    log_path: str = ""
    cancelled: bool = False
    crawl: str | None = None  # the fleet crawl it was a worker of

    @property
    def runtime(self) -> float:
        return (self.end_time or time.time()) - self.start_time

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobRecord:
        return cls(**data)


def timestamp(seconds: float | None) -> str | None:
    """scrapyd's time format in its JSON (``str(datetime)``), local time."""
    if seconds is None:
        return None
    return str(datetime.fromtimestamp(seconds))


def iso(seconds: float | None) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if seconds else ""
