"""Score crawlfleet's main-text extractor on the extraction-dev set, side by side with trafilatura and readability.

    python -m bench.extraction [--data DIR] [--limit N] [--no-compare] [--split all|tune|holdout]
                               [--timing-repeat K] [--markdown] [--json]

Per source, per language and per (source, language) it prints precision, recall, F1 (see
``bench.extraction_score``) and the number of empty outputs; per extractor the median wall-clock and CPU
milliseconds per page, the maximum, and how crawlfleet's medians compare with each competitor's measured in the
same run (on a shared machine the ratio and the CPU time are the steadier figures). ``--timing-repeat K`` times
each page K times and keeps the fastest run.
crawlfleet is given the raw bytes (so its time includes decoding); the competitors are given the text decoded by
``spiders.encoding`` (so they are timed on extraction alone and never lose points to a wrong guess of theirs).

``--split`` keeps the pages of a deterministic half of the *sites* (``tune``) or the other half (``holdout``):
parameters are chosen on one and reported on the other (see ``bench.extraction_tune``).
With ``--json`` the last line is ``{"f1": {"daniel/zh": ..., ...}, "ms_median": ..., "cpu_ms_median": ...,
"ms_max": ..., "empty": ..., "crashes": ..., "competitors": {...}}``.

``--markdown`` adds the Markdown main text (``bench.extraction_markdown``): the Markdown read as text scored
beside the text field, the structure score (headings, list items, table cells) beside trafilatura's Markdown,
and the render's share of the extraction's CPU time (the JSON line gets a ``"markdown"`` entry).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import statistics
import time
import traceback
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bench.extraction_score import GroupScore, PageScore, aggregate, score_page
from spiders.encoding import decode_html

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "extraction-dev"
HEADLINE_GROUPS = ("daniel/zh", "daniel/other", "wcxb/en", "scrapinghub/en")


@dataclass(frozen=True)
class Page:
    id: str
    source: str
    lang: str
    page_type: str
    url: str
    body: bytes
    reference: str

    @property
    def site(self) -> str:
        """The site a page comes from: its URL's host, or for DAniEL (no URLs) the host inside its id."""
        if self.url:
            host = urlsplit(self.url).hostname or ""
            return host.removeprefix("www.")
        # DAniEL ids look like "daniel/20111121_goodcontents.net_<hash>".
        return self.id.split("/", 1)[-1].split("_")[1] if "_" in self.id else self.id

    @property
    def groups(self) -> list[str]:
        groups = ["all", self.source, f"lang/{self.lang}", f"{self.source}/{self.lang}"]
        if self.source == "daniel" and self.lang != "zh":
            groups.append("daniel/other")
        if self.source == "wcxb":
            groups.append(f"wcxb/{self.page_type}")
        return groups


def site_fold(site: str) -> str:
    """Assign a site to ``tune`` or ``holdout`` by a stable hash, so that no site is in both."""
    return "tune" if hashlib.sha1(site.encode()).digest()[0] % 2 == 0 else "holdout"


def load_pages(data: Path, limit: int | None = None, split: str = "all") -> list[Page]:
    pages = []
    with open(data / "manifest.jsonl", encoding="utf-8") as manifest:
        for line in manifest:
            row = json.loads(line)
            page = Page(
                id=row["id"],
                source=row["source"],
                lang=row["lang"],
                page_type=row.get("page_type") or "",
                url=row.get("url") or "",
                body=gzip.decompress((data / row["html"]).read_bytes()),
                reference=row["text"],
            )
            if split == "all" or site_fold(page.site) == split:
                pages.append(page)
    if limit and limit < len(pages):
        # Evenly spaced, so that a small run still samples every source and language.
        step = len(pages) / limit
        pages = [pages[int(i * step)] for i in range(limit)]
    return pages


Extractor = Callable[[Page], str]


def crawlfleet_extractor() -> Extractor:
    from spiders.extraction import extract

    return lambda page: extract(page.body, url=page.url or None)["text"]


def trafilatura_extractor() -> Extractor:
    import trafilatura

    def run(page: Page) -> str:
        html, _ = decode_html(page.body)
        return trafilatura.extract(html, url=page.url or None) or ""

    return run


_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def readability_extractor() -> Extractor:
    import logging

    import lxml.html
    from readability import Document

    logging.getLogger("readability").setLevel(logging.CRITICAL)
    block_tags = {"p", "div", "li", "td", "th", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "br"}

    def run(page: Page) -> str:
        html, _ = decode_html(page.body)
        summary = Document(html, url=page.url or None).summary(html_partial=True)
        # lxml refuses control characters in text it is given back (the tails set below), though it parsed them.
        root = lxml.html.fromstring(_CONTROL_CHARS.sub("", summary))
        for element in root.iter(*block_tags):  # keep paragraphs apart, as a reader sees them
            element.tail = "\n" + (element.tail or "")
        return root.text_content().strip()

    return run


@dataclass
class RunResult:
    name: str
    scores: dict[str, GroupScore]
    ms: list[float]  # wall-clock milliseconds per page (the minimum over --timing-repeat runs)
    cpu_ms: list[float]  # process CPU milliseconds per page (likewise): less disturbed by other processes
    crashes: int

    @property
    def ms_median(self) -> float:
        return statistics.median(self.ms) if self.ms else 0.0

    @property
    def cpu_ms_median(self) -> float:
        return statistics.median(self.cpu_ms) if self.cpu_ms else 0.0


def _timed(extractor: Extractor, page: Page) -> tuple[str, float, float, str | None]:
    """The extractor's text, wall and CPU milliseconds, and the traceback if it crashed."""
    wall, cpu = time.perf_counter(), time.process_time()
    crash = None
    try:
        text = extractor(page)
    except Exception:  # a crash is scored as an empty output and counted
        crash, text = traceback.format_exc(), ""
    return text, (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000, crash


def run_extractor(name: str, extractor: Extractor, pages: Iterable[Page], repeat: int = 1) -> RunResult:
    """Score every page; time it ``repeat`` times and keep the fastest run (the usual way to time on a busy
    machine: other processes only ever add time). The text scored is the first run's."""
    by_group: dict[str, list[PageScore]] = defaultdict(list)
    timings, cpu_timings, crashes = [], [], 0
    for page in pages:
        text, wall, cpu, crash = _timed(extractor, page)
        if crash:
            crashes += 1
            if crashes <= 3:
                print(f"{name} crashed on {page.id}:\n{crash}")
        for _ in range(repeat - 1):
            _, again_wall, again_cpu, _ = _timed(extractor, page)
            wall, cpu = min(wall, again_wall), min(cpu, again_cpu)
        timings.append(wall)
        cpu_timings.append(cpu)
        score = score_page(text, page.reference)
        for group in page.groups:
            by_group[group].append(score)
    return RunResult(name, {g: aggregate(s) for g, s in by_group.items()}, timings, cpu_timings, crashes)


def print_table(results: list[RunResult]) -> None:
    groups = sorted(results[0].scores, key=lambda g: (g != "all", "/" in g and not g.startswith("lang"), g))
    header = f"{'group':<22}{'pages':>6}" + "".join(f"{r.name:>30}" for r in results)
    print(header)
    print(f"{'':<28}" + "".join(f"{'P':>8}{'R':>8}{'F1':>8}{'empty':>6}" for _ in results))
    for group in groups:
        row = f"{group:<22}{results[0].scores[group].pages:>6}"
        for result in results:
            s = result.scores[group]
            row += f"{s.precision:>8.3f}{s.recall:>8.3f}{s.f1:>8.3f}{s.empty:>6}"
        print(row)
    first = results[0]
    for result in results:
        ratio = ""
        if result is not first and result.ms_median and result.cpu_ms_median:
            ratio = (
                f" ({first.name} takes x{first.ms_median / result.ms_median:.2f} of its wall median,"
                f" x{first.cpu_ms_median / result.cpu_ms_median:.2f} of its CPU median)"
            )
        print(
            f"{result.name}: median {result.ms_median:.2f} ms/page wall, {result.cpu_ms_median:.2f} ms CPU; "
            f"max {max(result.ms, default=0):.0f} ms wall; crashes {result.crashes}{ratio}"
        )


def headline(result: RunResult) -> dict:
    return {
        "f1": {g: round(result.scores[g].f1, 4) for g in HEADLINE_GROUPS if g in result.scores},
        "ms_median": round(result.ms_median, 3),
        "cpu_ms_median": round(result.cpu_ms_median, 3),
        "ms_max": round(max(result.ms, default=0.0), 1),
        "empty": result.scores["all"].empty if "all" in result.scores else 0,
        "crashes": result.crashes,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.extraction", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="extraction-dev folder")
    parser.add_argument("--limit", type=int, default=None, help="score only N evenly spaced pages")
    parser.add_argument("--no-compare", action="store_true", help="skip trafilatura and readability-lxml")
    parser.add_argument("--split", choices=("all", "tune", "holdout"), default="all", help="site fold to score")
    parser.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    parser.add_argument("--markdown", action="store_true", help="score the Markdown output too (text, structure, cost)")
    parser.add_argument(
        "--timing-repeat", type=int, default=1, metavar="K", help="time each page K times and keep the fastest"
    )
    args = parser.parse_args(argv)

    pages = load_pages(args.data, args.limit, args.split)
    print(f"{len(pages)} pages from {args.data} (split: {args.split})")
    runs = [("crawlfleet", crawlfleet_extractor())]
    if not args.no_compare:
        runs += [("trafilatura", trafilatura_extractor()), ("readability-lxml", readability_extractor())]
    results = [run_extractor(name, extractor, pages, max(1, args.timing_repeat)) for name, extractor in runs]
    print_table(results)
    markdown_runs = []
    if args.markdown:
        from bench.extraction_markdown import print_markdown, run_markdown

        markdown_runs = run_markdown(pages, compare=not args.no_compare, repeat=max(1, args.timing_repeat))
        print_markdown(markdown_runs)
    if args.json:
        summary = headline(results[0])
        summary["competitors"] = {r.name: headline(r) for r in results[1:]}
        if markdown_runs:
            from bench.extraction_markdown import summary as markdown_summary

            summary["markdown"] = markdown_summary(markdown_runs)
        print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    main()
