"""One process of the page-work pool: ``python -m spiders.pipelines.pageproc`` (started by
:class:`spiders.pipelines.pagepool.PagePool`).

It is a program of its own, not a :mod:`multiprocessing` child: multiprocessing's ``spawn`` and ``forkserver``
children import the parent's ``__main__`` again (``spawn.prepare`` runs ``init_main_from_path``), which re-runs a
Scrapy script that has no ``if __name__ == "__main__":`` guard, and ``fork`` copies a threaded process (the feed
thread, the reactor's thread pool) in whatever state its locks are. This process imports only the extraction.

Protocol, on its stdin and stdout: frames of a 4-byte big-endian length and a pickle. It first answers one frame
``{"pid": <its pid>}`` once the extraction is imported and warmed up; then for each frame it reads (a list of
pages, ``(html, url, outputs)``) it writes one frame, the list of :func:`page_work` results in the same order.
It ends at the end of its stdin (its worker closed the pipe or died), and ignores SIGINT and SIGTERM, which reach
it with its worker's process group. Anything printed goes to stderr.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import sys
from typing import Any, BinaryIO

from spiders.pipelines.extract import CHOSEN, EXTRACTED

HEADER = struct.Struct("!I")
Page = tuple[str, "str | None", list[str]]  # (html, url, outputs): what page work needs of an item


def frame(message: Any) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body)) + body


def page_work(html: str, url: str | None, outputs: list[str]) -> dict[str, Any]:
    """What the metadata and extraction pipelines compute for one page (only the fields the item takes:
    ``text``/``markdown`` only when chosen), from one parse of the page: the metadata reads the tree the
    extraction then prunes."""
    from spiders.extraction import extract, parse_html
    from spiders.extraction.metadata import page_metadata

    result: dict[str, Any] = {}
    try:
        document = parse_html(html or "")
    except Exception:  # never expected: then each part parses (and fails) on its own, as the pipelines would
        document = None
    if "metadata" in outputs:
        try:
            result["metadata"], result["broken"] = page_metadata(html, url, document)
        except Exception as exc:
            result["metadata_error"] = f"{type(exc).__name__}: {exc}"
    try:
        extracted = extract(html or "", url, markdown="markdown" in outputs, document=document)
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
    else:
        result["extracted"] = {name: extracted.get(name) for name in EXTRACTED
                               if name not in CHOSEN or name in outputs}
    return result


def page_work_batch(pages: list[Page]) -> list[dict[str, Any]]:
    """:func:`page_work` of each page, in order."""
    return [page_work(html, url, outputs) for html, url, outputs in pages]


def warm_up() -> None:
    """Import what page work needs before the first page waits for it."""
    import spiders.extraction
    import spiders.extraction.metadata

    spiders.extraction.extract("<html><body><p>warm</p></body></html>", markdown=True)
    spiders.extraction.metadata.page_metadata("<html><head><title>w</title></head></html>", None)


def _read_frame(stream: BinaryIO) -> Any:
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None  # the end of stdin: the worker is done (or gone)
    (size,) = HEADER.unpack(header)
    body = stream.read(size)
    if len(body) < size:
        return None
    return pickle.loads(body)


def serve(requests: BinaryIO, answers: BinaryIO) -> int:
    """Answer page batches until ``requests`` ends; returns how many batches were answered."""
    warm_up()
    answers.write(frame({"pid": os.getpid()}))
    answers.flush()
    served = 0
    while (pages := _read_frame(requests)) is not None:
        answers.write(frame(page_work_batch(pages)))
        answers.flush()
        served += 1
    return served


def main() -> None:
    # Ctrl-C in a terminal, or a SIGTERM to the worker's process group (the fleet stops its processes so), reach
    # this process too: the worker shuts down gracefully and may still send pages here, so this process ends when
    # the worker closes its stdin (at its close, or by dying), not on the signal.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print must not corrupt the frames
    sys.stdout = sys.stderr
    serve(sys.stdin.buffer, answers)


if __name__ == "__main__":
    main()
