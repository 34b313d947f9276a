"""``crawlfleet failures CRAWL`` and ``crawlfleet retry CRAWL``: a crawl's failed URLs, and their re-run.

``failures`` prints the crawl's failures list (:mod:`messaging.failures`: MongoDB ``<crawlid>.failures``, checked
against the crawl's exact counts) as a table with a summary by reason, or as JSON lines or CSV (``--format``) to
stdout or a file, ready for a spreadsheet or ``jq``. ``retry`` re-submits the listed failures (of ``--reason``, or
all) as tasks of the same crawl: past the dedup filter, through pacing and robots.txt as always; a finished crawl
runs again and finishes again (a second ``crawl_finished``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deploy.cli_errors import require_mongo
from messaging import clients
from messaging import failures as store
from messaging.counts import read_counts
from messaging.settings import load

console = Console()
TABLE_ROWS = 50  # rows of the human table; --format gives every one


def _reason_option(function: Any) -> Any:
    return click.option("--reason", "reasons", multiple=True, metavar="REASON",
                        help="Only failures of this reason, as counted (e.g. 'HTTP 404', 'TimeoutError'); "
                             "repeat for several.")(function)


def _stores() -> tuple[Any, Any, Any]:
    settings = load()
    require_mongo(settings)
    mongo = clients.mongo_client(settings)
    return clients.redis_client(settings), mongo, mongo[settings.mongo_db]


@click.command("failures")
@click.argument("crawlid")
@_reason_option
@click.option("--format", "fmt", type=click.Choice(["table", *store.FORMATS]), default="table", show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Write jsonl or csv to this file instead of stdout.")
def failures(crawlid: str, reasons: tuple[str, ...], fmt: str, output: Path | None) -> None:
    """The failed URLs of crawl CRAWLID: URL, reason, HTTP status, attempts, time (failures beyond
    CRAWLFLEET_FAILURES_MAX are counted, not listed)."""
    redis, mongo, database = _stores()
    try:
        documents = store.failures(database, redis, crawlid, reasons)
        if fmt == "table":
            _table(crawlid, list(documents), redis)
            return
        chunks = store.export((store.row(d) for d in documents), fmt)
        if output is None:
            _stdout(chunks)
        else:
            with output.open("wb") as out:
                for chunk in chunks:
                    out.write(chunk)
    finally:
        mongo.close()


def _stdout(chunks: Iterator[bytes]) -> None:
    stream = sys.stdout.buffer
    for chunk in chunks:
        stream.write(chunk)
    stream.flush()


def _table(crawlid: str, documents: list[dict[str, Any]], redis: Any) -> None:
    counts = read_counts(redis, crawlid)
    by_reason = store.summary(documents)
    console.print(f"crawl [bold]{escape(crawlid)}[/]: {len(documents)} failed URLs listed"
                  + (f", {counts.unlisted} more beyond CRAWLFLEET_FAILURES_MAX (counted only)" if counts.unlisted
                     else "")
                  + (": " + ", ".join(f"{escape(reason)} {n}" for reason, n in by_reason.items()) if by_reason else ""),
                  highlight=False)
    if not documents:
        return
    table = Table()
    for column in ("url", "reason", "status", "attempts", "time"):
        table.add_column(column, overflow="fold")
    for document in documents[:TABLE_ROWS]:
        row = store.row(document)
        table.add_row(escape(str(row["url"])), escape(str(row["reason"])), str(row["status"] or ""),
                      str(row["attempts"]), str(row["time"]))
    console.print(table)
    if len(documents) > TABLE_ROWS:
        console.print(f"… and {len(documents) - TABLE_ROWS} more: --format jsonl or csv lists them all")


@click.command("retry")
@click.argument("crawlid")
@_reason_option
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def retry(crawlid: str, reasons: tuple[str, ...], as_json: bool) -> None:
    """Re-submit the listed failed URLs of crawl CRAWLID (of --reason, or all) as tasks of the same crawl: past the
    dedup filter, paced and checked against robots.txt as always. A finished crawl runs again and finishes again."""
    redis, mongo, database = _stores()
    try:
        result = store.retry(redis, database, crawlid, reasons)
    except store.NotRetryable as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        mongo.close()
    if as_json:
        click.echo(json.dumps(result.__dict__, sort_keys=True))
        return
    if not result.submitted:
        console.print(f"nothing to retry in crawl {escape(crawlid)}"
                      + (f" ({result.skipped} re-submitted already, not processed yet)" if result.skipped else ""),
                      highlight=False)
        return
    console.print(f"retry {result.retry} of crawl {escape(crawlid)}: {result.submitted} failed URLs re-submitted"
                  + (f", {result.skipped} still on their way from an earlier retry" if result.skipped else "")
                  + ("; the finished crawl runs again" if result.reopened else "") + f" (state: {result.state})",
                  highlight=False)


COMMANDS = (failures, retry)
