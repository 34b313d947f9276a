"""A job's stats in LogParser's JSON (``/logs/<project>/<spider>/<job>.json``) and their index (``/logs/stats.json``).

ScrapydWeb's *Stats* page and its Jobs dashboard ask a scrapyd node for the files LogParser writes beside the logs;
the manager answers them itself, from the job's log and the fleet's own figures, so no LogParser process is needed.
The format is LogParser 0.8.4's (the version ScrapydWeb 1.6 requires and compares: :data:`LOGPARSER_VERSION`):
``first_log_time``, ``latest_log_time``, ``runtime``, ``datas`` (one row per Scrapy LogStats line: time, pages,
pages/min, items, items/min), ``pages``, ``items``, ``log_categories`` (critical, error, warning, redirect, retry and
ignore entries: count and the latest few), ``latest_matches``, ``shutdown_reason``, ``finish_reason``,
``crawler_stats`` (the "Dumping Scrapy stats" block at the end of a finished job's log), ``head``, ``tail``.

The log is read incrementally (:class:`LogDigest`, kept per file: only what was appended since the last request is
read, at most :data:`READ_LIMIT` a request), so a follow-up request costs what the job logged meanwhile. While a
worker runs, its pages and items come from its registration in Redis (``worker:<job>``, refreshed every few
seconds), which is fresher than Scrapy's LogStats line of every minute, and ``crawler_stats`` holds those figures
(``source``: ``crawlfleet``).
"""

from __future__ import annotations

import ast
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

LOGPARSER_VERSION = "0.8.4"
NA = "N/A"
HEAD_LINES = 100
TAIL_LINES = 200
DETAILS_KEPT = 10  # the latest entries of each category
DETAIL_LINES = 20  # lines kept of one multi-line entry (a traceback)
READ_LIMIT = 64 * 1024 * 1024  # bytes read from one log per request; the rest at the next one
STATS_DUMP_LINES = 2000
TIME = re.compile(r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})[ ,]")
LOGSTATS = re.compile(r"Crawled (\d+) pages \(at (\d+) pages/min\), scraped (\d+) items \(at (\d+) items/min\)")
CATEGORIES = {  # LogParser's categories and what marks an entry of each (Scrapy's own messages)
    "critical_logs": re.compile(r"\] CRITICAL:"), "error_logs": re.compile(r"\] ERROR:"),
    "warning_logs": re.compile(r"\] WARNING:"), "redirect_logs": re.compile(r": Redirecting \("),
    "retry_logs": re.compile(r" [Rr]etrying <"), "ignore_logs": re.compile(r": Ignoring response <"),
}
MATCHES = {  # latest_matches: the first (version, telnet) or the latest line of each
    "scrapy_version": re.compile(r"Scrapy \d+\.\d+\.\d+ started"), "telnet_console": re.compile(
        r"Telnet console listening on"), "telnet_username": None, "telnet_password": None,
    "resuming_crawl": re.compile(r"Resuming crawl"), "latest_offsite": re.compile(r"Filtered offsite"),
    "latest_duplicate": re.compile(r"Filtered duplicate"), "latest_crawl": re.compile(r"Crawled \(\d+\)"),
    "latest_scrape": re.compile(r": Scraped from <"), "latest_stat": LOGSTATS,
}
FIRST_MATCHES = ("scrapy_version", "telnet_console", "resuming_crawl")
SIGNAL = re.compile(r": (Received SIG(?:BREAK|INT|TERM)(?: twice)?),")
STATS_DUMP = re.compile(r"Dumping Scrapy stats:")
DATETIME_REPR = "datetime.datetime("
_LEADING_NUMBERS = re.compile(r"[\d, ]*")  # the fields of a datetime repr, before its tzinfo


def _timestamp(text: str) -> int:
    return int(time.mktime(datetime.strptime(text, "%Y-%m-%d %H:%M:%S").timetuple()))


def _dates_as_text(text: str) -> str:
    """``datetime.datetime(2024, 5, 1, 10, 1, 4, 12, tzinfo=…)`` reprs replaced by their text, so that the rest is a
    Python literal."""
    out, start = [], 0
    while (begin := text.find(DATETIME_REPR, start)) >= 0:
        depth, end = 0, begin + len(DATETIME_REPR) - 1
        while end < len(text):  # to the matching parenthesis (a tzinfo may hold some)
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0:
                break
            end += 1
        numbers = _LEADING_NUMBERS.match(text, begin + len(DATETIME_REPR))
        parts = [int(p) for p in numbers.group(0).split(",") if p.strip()][:6] if numbers else []
        value = "None"
        if len(parts) >= 3:
            year, month, day, hour, minute, second = [*parts, 0, 0, 0][:6]  # datetime's defaults: 0
            value = repr(str(datetime(year, month, day, hour, minute, second)))
        out += [text[start:begin], value]
        start = end + 1
    return "".join(out) + text[start:]


def parse_stats_dump(text: str) -> dict[str, Any]:
    """Scrapy's ``Dumping Scrapy stats:`` block (a pprint of a dict) as a dict; dates become their text."""
    try:
        value = ast.literal_eval(_dates_as_text(text.strip()))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


@dataclass
class LogDigest:
    """What a Scrapy log says, read line by line as it grows (one entry: a timestamped line and its followers)."""

    offset: int = 0
    inode: int = 0
    head: list[str] = field(default_factory=list)
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    first_time: str = ""
    latest_time: str = ""
    datas: list[list[Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    details: dict[str, deque[list[str]]] = field(
        default_factory=lambda: {name: deque(maxlen=DETAILS_KEPT) for name in CATEGORIES})
    matches: dict[str, str] = field(default_factory=lambda: dict.fromkeys(MATCHES, ""))
    shutdown_reason: str = NA
    stats_dump: list[str] | None = None  # the lines of the latest stats dump, while and after it is read
    stats_time: str = ""
    _entry: list[str] | None = None  # the detail lines of the entry being read, when it is in a category
    _reading_dump: bool = False  # the entry being read is a stats dump

    def feed(self, line: str) -> None:
        if len(self.head) < HEAD_LINES:
            self.head.append(line)
        self.tail.append(line)
        found = TIME.match(line)
        if found is None:  # a follower of the current entry (a traceback, the stats dump)
            if self._entry is not None and len(self._entry) < DETAIL_LINES:
                self._entry.append(line)
            if self.stats_dump is not None and self._reading_dump and len(self.stats_dump) < STATS_DUMP_LINES:
                self.stats_dump.append(line)
            return
        self._reading_dump = False
        self._entry = None
        when = found.group(1)
        self.first_time = self.first_time or when
        self.latest_time = when
        for name, marker in CATEGORIES.items():
            if marker.search(line):
                if name != "retry_logs" or "Gave up retrying <" not in line:
                    self.counts[name] += 1
                self._entry = [line]
                self.details[name].append(self._entry)
                break
        self._match(line, when)

    def _match(self, line: str, when: str) -> None:
        for name, pattern in MATCHES.items():
            if pattern is not None and pattern.search(line) and not (name in FIRST_MATCHES and self.matches[name]):
                self.matches[name] = line
        stats = LOGSTATS.search(line)
        if stats:
            self.datas.append([when, *(int(g) for g in stats.groups())])
        signal = SIGNAL.search(line)
        if signal:
            self.shutdown_reason = signal.group(1)
        if STATS_DUMP.search(line):
            self.stats_dump, self.stats_time, self._reading_dump = [], when, True

    def read(self, path: Path, limit: int = READ_LIMIT) -> None:
        """Feed what was appended to ``path`` since the last read (whole lines; a new file starts over)."""
        status = path.stat()
        if status.st_ino != self.inode or status.st_size < self.offset:
            self.__dict__.update(LogDigest(inode=status.st_ino).__dict__)  # rotated or truncated: start over
        with path.open("rb") as log:
            log.seek(self.offset)
            chunk = log.read(min(limit, status.st_size - self.offset))
        end = chunk.rfind(b"\n") + 1
        for line in chunk[:end].decode("utf-8", "replace").splitlines():
            self.feed(line)
        self.offset += end

    def crawler_stats(self) -> dict[str, Any]:
        stats = parse_stats_dump("\n".join(self.stats_dump or []))
        if not stats:
            return {}
        return {"source": "log", "last_update_time": self.stats_time,
                "last_update_timestamp": _timestamp(self.stats_time), **stats}


def _runtime(first: str, latest: str) -> str:
    if not first or not latest:
        return NA
    return str(datetime.strptime(latest, "%Y-%m-%d %H:%M:%S") - datetime.strptime(first, "%Y-%m-%d %H:%M:%S"))


def logparser_json(digest: LogDigest, *, log_path: str, json_url: str, size: int,
                   live: dict[str, Any] | None = None, now: float | None = None) -> dict[str, Any]:
    """LogParser's per-job JSON from a digest; ``live``: the running worker's registration (pages, items, …)."""
    now = time.time() if now is None else now
    crawler_stats = digest.crawler_stats()
    pages = max((row[1] for row in digest.datas), default=None)
    items = max((row[3] for row in digest.datas), default=None)
    pages = crawler_stats.get("response_received_count", pages)
    items = crawler_stats.get("item_scraped_count", items)
    if live and not crawler_stats:  # a running worker: its own figures, newer than the last LogStats line
        pages, items = int(live.get("pages") or 0), int(live.get("items") or 0)
        crawler_stats = {"source": "crawlfleet", "last_update_time": _local(now), "last_update_timestamp": int(now),
                         "response_received_count": pages, "item_scraped_count": items,
                         **{name: live[name] for name in ("cpu_percent", "rss_bytes") if live.get(name)}}
    scrape = digest.matches["latest_scrape"]
    return {
        "log_path": log_path, "json_url": json_url, "size": size, "position": digest.offset, "status": "ok",
        "head": "\n".join(digest.head), "tail": "\n".join(digest.tail),
        "first_log_time": digest.first_time or NA, "latest_log_time": digest.latest_time or NA,
        "runtime": _runtime(digest.first_time, digest.latest_time),
        "first_log_timestamp": _timestamp(digest.first_time) if digest.first_time else 0,
        "latest_log_timestamp": _timestamp(digest.latest_time) if digest.latest_time else 0,
        "datas": [list(row) for row in digest.datas], "pages": pages, "items": items,
        "latest_matches": {**digest.matches, "latest_item": ""},
        "latest_crawl_timestamp": _line_time(digest.matches["latest_crawl"]),
        "latest_scrape_timestamp": _line_time(scrape),
        "log_categories": {name: {"count": digest.counts[name],
                                  "details": ["\n".join(entry) for entry in digest.details[name]]}
                           for name in CATEGORIES},
        "shutdown_reason": digest.shutdown_reason,
        "finish_reason": str(crawler_stats.get("finish_reason", NA)) if crawler_stats.get("source") == "log" else NA,
        "crawler_stats": crawler_stats, "crawler_engine": {},
        "last_update_time": _local(now), "last_update_timestamp": int(now), "logparser_version": LOGPARSER_VERSION,
    }


def _local(seconds: float) -> str:
    return datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M:%S")


def _line_time(line: str) -> int:
    found = TIME.match(line)
    return _timestamp(found.group(1)) if found else 0


SUMMARY_KEYS = ("log_path", "json_url", "size", "position", "status", "pages", "items", "first_log_time",
                "latest_log_time", "runtime", "shutdown_reason", "finish_reason", "last_update_time")


def summary(data: dict[str, Any]) -> dict[str, Any]:
    """A job's entry in ``stats.json`` (LogParser's simplified keys)."""
    return {key: data[key] for key in SUMMARY_KEYS}


def index(entries: dict[str, dict[str, dict[str, dict[str, Any]]]], now: float | None = None) -> dict[str, Any]:
    """``stats.json``: every job's summary by project, spider and job."""
    now = time.time() if now is None else now
    return {"status": "ok", "datas": entries, "settings_py": "", "settings": {}, "last_update_timestamp": int(now),
            "last_update_time": _local(now), "logparser_version": LOGPARSER_VERSION}


class LogDigests:
    """One :class:`LogDigest` per log file, read further at each request (thread-safe: requests run in threads)."""

    def __init__(self, keep: int = 500) -> None:
        self.keep = keep
        self._digests: dict[str, LogDigest] = {}
        self._lock = threading.Lock()

    def read(self, path: Path) -> LogDigest:
        key = str(path)
        with self._lock:
            digest = self._digests.pop(key, None) or LogDigest()
            self._digests[key] = digest  # most recently used last
            while len(self._digests) > self.keep:
                self._digests.pop(next(iter(self._digests)))
            digest.read(path)
            return digest
