"""``crawlfleet export <crawlid> --format jsonl|csv|parquet|markdown-dir``: a crawl's items out of MongoDB.

Streamed in ``_id`` order a batch at a time (:mod:`messaging.export`), with a progress bar on a terminal (a line
per 10 % otherwise) and a checkpoint beside the output after every batch: ``--resume`` goes on where an interrupted
export stopped.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from deploy.cli_errors import require_mongo
from messaging import clients
from messaging.export import BATCH, FORMATS, ExportError, export_to
from messaging.settings import load

_SUFFIX = {"jsonl": ".jsonl", "csv": ".csv", "parquet": ".parquet", "markdown-dir": ""}


@click.command("export")
@click.argument("crawlid")
@click.option("--format", "format_", type=click.Choice(FORMATS), default="jsonl", show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="File (jsonl, csv) or directory (parquet, markdown-dir); default: <crawlid>.<format> here.")
@click.option("--resume", is_flag=True, help="Go on from the checkpoint of an interrupted export to the same output.")
@click.option("--batch", type=click.IntRange(1, 100_000), default=BATCH, show_default=True,
              help="Documents read (and held) at a time.")
def export(crawlid: str, format_: str, output: Path | None, resume: bool, batch: int) -> None:
    """Export the items of crawl CRAWLID (its MongoDB collection in CRAWLFLEET_MONGO_DB)."""
    settings = load()
    output = output or Path(f"{crawlid}{_SUFFIX[format_]}" if format_ != "markdown-dir" else crawlid)
    require_mongo(settings)
    client = clients.mongo_client(settings)
    try:
        database = client[settings.mongo_db]
        if crawlid not in database.list_collection_names():
            raise click.ClickException(f"no items of crawl {crawlid!r} in database {settings.mongo_db!r}")
        collection = database[crawlid]
        total = collection.estimated_document_count()
        report = _progress(total)
        try:
            checkpoint = export_to(collection, crawlid, format_, output, resume=resume, progress=report,
                                   batch_size=batch)
        except ExportError as exc:
            raise click.ClickException(str(exc)) from exc
        finally:
            report(None)
    finally:
        client.close()
    click.echo(f"exported {checkpoint.count} items of {crawlid} to {output} ({format_})")


def _progress(total: int):
    """``report(count)`` after each batch; ``report(None)`` at the end."""
    if sys.stderr.isatty():
        from rich.progress import Progress

        bar = Progress(transient=False)
        task = bar.add_task("export", total=total or None)
        bar.start()

        def report(count: int | None) -> None:
            if count is None:
                bar.stop()
            else:
                bar.update(task, completed=count)

        return report
    shown = [-1]

    def report_lines(count: int | None) -> None:
        if count is None or not total:
            return
        tenth = min(10, count * 10 // total)
        if tenth > shown[0]:
            shown[0] = tenth
            click.echo(f"{count}/{total} items", err=True)

    return report_lines
