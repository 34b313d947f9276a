"""A crawl's items out of MongoDB as files: JSON lines, CSV, Parquet, or a directory of Markdown files; streamed.

The one core of ``crawlfleet export`` (``deploy/cli_export.py``) and of the manager's ``GET
/api/crawls/<crawlid>/export`` (``manager/export.py``): documents are read in ``_id`` order in batches
(:func:`batches`), so memory holds one batch whatever the crawl's size, and an export can go on after the last
``_id`` it wrote (:class:`Checkpoint`).

Formats:

- ``jsonl``: one JSON object per line, UTF-8; ``_id`` as its hex string, dates as ISO 8601.
- ``csv``: RFC 4180 (``\\r\\n``, fields quoted when they hold a comma, quote or line break), UTF-8 **with** a byte
  order mark so that spreadsheets read it as UTF-8 (Python: ``encoding="utf-8-sig"``). Columns: the usual item
  fields first, then every other field of the first ``COLUMN_SAMPLE`` documents; later documents' other fields go to
  the last column, ``_extra``, as JSON. Lists and objects are JSON text; a cell is cut to ``CELL_LIMIT`` characters
  (a spreadsheet's most; the full text is in ``jsonl``).
- ``parquet``: a directory of ``part-NNNNN.parquet`` files (pyarrow, the ``export`` extra), one per batch
  (``--batch`` documents), every column a string (JSON for lists and objects).
- ``markdown-dir``: one ``.md`` file per item with a YAML-ish front matter (url, title, published) and its
  ``markdown`` (else its ``text``), named after its URL.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

__all__ = ["CELL_LIMIT", "FORMATS", "Checkpoint", "ExportError", "batches", "csv_columns", "csv_header", "csv_rows",
           "jsonl_lines", "markdown_file", "plain"]

FORMATS = ("jsonl", "csv", "parquet", "markdown-dir")
STREAMABLE = ("jsonl", "csv")  # formats that are one byte stream (the manager's endpoint)
CELL_LIMIT = 32_767
COLUMN_SAMPLE = 1000
BATCH = 500
LEADING_COLUMNS = ("url", "title", "published", "author", "text", "markdown", "metadata", "crawlid", "spider_type",
                   "status", "fetched_at", "depth", "referer", "encoding")
EXTRA = "_extra"
BOM = "\ufeff"


class ExportError(Exception):
    """An export that cannot be made (unknown format, missing pyarrow, a checkpoint of another export)."""


def plain(value: Any) -> Any:
    """A JSON-ready copy of a document value: ObjectId and other BSON types as text, dates as ISO 8601."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def batches(collection: Any, after: Any = None, batch_size: int = BATCH,
            where: dict[str, Any] | None = None) -> Iterator[list[dict[str, Any]]]:
    """The collection's documents (those matching ``where``) in ``_id`` order, after ``after`` (an ``_id``),
    ``batch_size`` at a time."""
    query = {**(where or {}), **({"_id": {"$gt": after}} if after is not None else {})}
    cursor = collection.find(query, sort=[("_id", 1)], batch_size=batch_size)
    try:
        batch: list[dict[str, Any]] = []
        for document in cursor:
            batch.append(document)
            if len(batch) >= batch_size:
                yield batch
                batch = []
        if batch:
            yield batch
    finally:
        cursor.close()


def jsonl_lines(documents: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(plain(d), ensure_ascii=False) + "\n" for d in documents).encode("utf-8")


def csv_columns(collection: Any) -> list[str]:
    """The CSV columns of a collection: the usual fields, the other fields of its first documents, ``_extra``."""
    seen: dict[str, None] = {}
    for document in collection.find({}, sort=[("_id", 1)], limit=COLUMN_SAMPLE):
        seen.update(dict.fromkeys(document))
    leading = [name for name in LEADING_COLUMNS if name in seen]
    rest = sorted(name for name in seen if name not in LEADING_COLUMNS and name not in ("_id", "url_key"))
    return ["_id", *leading, *rest, EXTRA]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    structured = isinstance(value, dict | list | tuple)
    return (json.dumps(plain(value), ensure_ascii=False) if structured else str(plain(value)))[:CELL_LIMIT]


def _csv_text(rows: list[list[str]]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL).writerows(rows)
    return buffer.getvalue().encode("utf-8")


def csv_header(columns: list[str]) -> bytes:
    return BOM.encode("utf-8") + _csv_text([columns])


def csv_rows(documents: list[dict[str, Any]], columns: list[str]) -> bytes:
    known = set(columns) | {"url_key"}
    rows = []
    for document in documents:
        row = [_cell(document.get(name)) for name in columns[:-1]]
        extra = {k: v for k, v in document.items() if k not in known}
        row.append(_cell(extra) if extra else "")
        rows.append(row)
    return _csv_text(rows)


_SLUG = re.compile(r"[^A-Za-z0-9\u00c0-\uffff]+")


def markdown_file(document: dict[str, Any]) -> tuple[str, str]:
    """The file name and content of one item in ``markdown-dir``."""
    url = str(document.get("url") or document.get("_id"))
    slug = _SLUG.sub("-", url.split("://", 1)[-1]).strip("-")[:80] or "item"
    name = f"{slug}-{hashlib.sha1(url.encode('utf-8')).hexdigest()[:10]}.md"
    front = ["---", f"url: {json.dumps(url, ensure_ascii=False)}"]
    for key in ("title", "published", "crawlid", "fetched_at"):
        if document.get(key):
            front.append(f"{key}: {json.dumps(plain(document[key]), ensure_ascii=False)}")
    body = document.get("markdown") or document.get("text") or ""
    return name, "\n".join([*front, "---", "", str(body), ""])


def parquet_table(documents: list[dict[str, Any]], columns: list[str]) -> Any:
    try:
        import pyarrow as pa
    except ImportError as exc:  # the export extra
        raise ExportError("the parquet format needs pyarrow: pip install 'crawlfleet[export]'") from exc
    known = set(columns) | {"url_key"}
    data: dict[str, list[str | None]] = {name: [] for name in columns}
    for document in documents:
        for name in columns[:-1]:
            value = document.get(name)
            data[name].append(None if value is None else _cell(value) if not isinstance(value, str) else value)
        extra = {k: v for k, v in document.items() if k not in known}
        data[EXTRA].append(_cell(extra) if extra else None)
    return pa.table({name: pa.array(values, type=pa.string()) for name, values in data.items()})


@dataclass
class Checkpoint:
    """Where an export stands: written after every batch, so ``--resume`` goes on from the last ``_id`` written
    (the output is cut back to ``size`` bytes first: what was written after the checkpoint is written again)."""

    crawlid: str
    format: str
    last_id: str | None = None  # str(ObjectId) or the _id as text; see ``last_id_type``
    last_id_type: str = "objectid"
    count: int = 0
    size: int = 0  # bytes of the output file (jsonl, csv) or parts written (parquet)
    columns: list[str] = field(default_factory=list)
    done: bool = False

    def after(self) -> Any:
        """The ``_id`` to continue after (``None`` from the start)."""
        if self.last_id is None:
            return None
        if self.last_id_type == "objectid":
            from bson import ObjectId

            return ObjectId(self.last_id)
        return json.loads(self.last_id)

    def advance(self, last: Any, count: int, size: int) -> None:
        from bson import ObjectId

        if isinstance(last, ObjectId):
            self.last_id, self.last_id_type = str(last), "objectid"
        else:
            self.last_id, self.last_id_type = json.dumps(plain(last)), "json"
        self.count += count
        self.size = size

    def save(self, path: Path) -> None:
        partial = path.with_name(path.name + ".tmp")
        partial.write_text(json.dumps(asdict(self)), encoding="utf-8")
        partial.replace(path)

    @classmethod
    def load(cls, path: Path, crawlid: str, format: str) -> Checkpoint | None:
        if not path.exists():
            return None
        checkpoint = cls(**json.loads(path.read_text(encoding="utf-8")))
        if checkpoint.crawlid != crawlid or checkpoint.format != format:
            raise ExportError(f"{path} is the checkpoint of an export of {checkpoint.crawlid} as "
                              f"{checkpoint.format}, not of {crawlid} as {format}")
        return checkpoint


def export_to(collection: Any, crawlid: str, format: str, output: Path, *, resume: bool = False,
              progress: Any = None, batch_size: int = BATCH) -> Checkpoint:
    """Export the collection to ``output`` (a file for jsonl and csv, a directory for parquet and markdown-dir),
    with a checkpoint beside it (``<output>.checkpoint``); ``resume`` goes on from it. ``progress(count)`` is called
    after every batch. Returns the final checkpoint (its ``count`` is every document written, over all runs)."""
    if format not in FORMATS:
        raise ExportError(f"unknown format {format!r}: one of {', '.join(FORMATS)}")
    checkpoint_path = output.with_name(output.name + ".checkpoint")
    checkpoint = Checkpoint.load(checkpoint_path, crawlid, format) if resume else None
    if checkpoint is not None and checkpoint.done:
        return checkpoint
    fresh = checkpoint is None
    if checkpoint is None:
        checkpoint = Checkpoint(crawlid, format)
        if format in ("csv", "parquet"):
            checkpoint.columns = csv_columns(collection)
    if format in ("parquet", "markdown-dir"):
        output.mkdir(parents=True, exist_ok=True)
        stream = None
    else:
        stream = open(output, "wb" if fresh else "r+b")  # noqa: SIM115 - closed below
        stream.truncate(checkpoint.size)  # what came after the checkpoint is written again
        stream.seek(checkpoint.size)
        if fresh and format == "csv":
            stream.write(csv_header(checkpoint.columns))
    try:
        if progress is not None:
            progress(checkpoint.count)
        for batch in batches(collection, checkpoint.after(), batch_size):
            size = _write_batch(format, batch, checkpoint, stream, output)
            checkpoint.advance(batch[-1]["_id"], len(batch), size)
            checkpoint.save(checkpoint_path)
            if progress is not None:
                progress(checkpoint.count)
        checkpoint.done = True
        checkpoint.save(checkpoint_path)
    finally:
        if stream is not None:
            stream.close()
    return checkpoint


def _write_batch(format: str, batch: list[dict[str, Any]], checkpoint: Checkpoint, stream: Any,
                 output: Path) -> int:
    """Write one batch; the checkpoint's new ``size``."""
    if format == "jsonl":
        stream.write(jsonl_lines(batch))
    elif format == "csv":
        stream.write(csv_rows(batch, checkpoint.columns))
    elif format == "markdown-dir":
        for document in batch:
            name, content = markdown_file(document)
            (output / name).write_text(content, encoding="utf-8")
        return checkpoint.size + len(batch)
    else:  # parquet: one part per batch (a batch is a row group; parts are what a resume counts)
        import pyarrow.parquet as pq

        part = output / f"part-{checkpoint.size:05d}.parquet"
        partial = part.with_name(part.name + ".tmp")
        pq.write_table(parquet_table(batch, checkpoint.columns), partial)
        partial.replace(part)
        return checkpoint.size + 1
    stream.flush()
    size: int = stream.tell()
    return size

